"""The package's import graph has no cycle, not even through imports inside functions.

A late import (inside a function) is allowed for a reason that is not a cycle: an optional
dependency, or keeping ``import ropelab`` cheap.  This test resolves every ``from ... import``
of every module, top-level and late, and fails on any strongly connected component.
"""

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "ropelab"


def _modules() -> dict[str, Path]:
    out = {}
    for path in PKG.rglob("*.py"):
        parts = path.relative_to(PKG.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _targets(mods, current, node) -> set[str]:
    package = current if mods[current].name == "__init__.py" else current.rsplit(".", 1)[0]
    if node.level:
        parts = package.split(".")
        base = ".".join(parts[:len(parts) - node.level + 1])
        mod = base + ("." + node.module if node.module else "")
    else:
        mod = node.module or ""
    subs = {f"{mod}.{a.name}" for a in node.names} & set(mods)
    return subs or ({mod} & set(mods))


def graph() -> dict[str, set[str]]:
    mods = _modules()
    g = {}
    for name, path in mods.items():
        tree = ast.parse(path.read_text())
        g[name] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                g[name] |= _targets(mods, name, node)
        g[name].discard("ropelab")  # the root package re-exports; importing it is no cycle
    return g


def cycles(g) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in g.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in list(g):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles_even_through_late_imports():
    assert cycles(graph()) == []


def test_the_cycle_finder_finds_a_planted_cycle():
    g = graph()
    g["ropelab.reference"] = g["ropelab.reference"] | {"ropelab.ops.rope"}  # rope -> ... -> reference
    found = cycles(g)
    assert any("ropelab.reference" in c and "ropelab.ops.rope" in c for c in found)


# The call path lives in ropelab.ops: the modules it replaced are gone, with no shims (rope_qk
# is ops.qk, rope's rope_rows path ops.rows, their checks ops.rows_checks, their host route the
# engine's ops.host_route).
OLD_PATHS = ["ropelab.api", "ropelab.fused", "ropelab.calls", "ropelab.arrays", "ropelab.streams",
             "ropelab.kernels._launch", "ropelab.qk", "ropelab.rows_checks", "ropelab.rows_launch",
             "ropelab.rows_rope", "ropelab.kernels.fused_qknorm_rope.fused_qknorm_rope",
             "ropelab.ops.rows_host"]


def _imported_names() -> dict[str, set[str]]:
    """Every module name each file's imports mention (absolute, relative resolved)."""
    mods = _modules()
    out = {}
    for name, path in mods.items():
        seen = set()
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[:len(parts) - node.level + 1])
                    mod = base + ("." + node.module if node.module else "")
                else:
                    mod = node.module or ""
                seen.add(mod)
                seen |= {f"{mod}.{a.name}" for a in node.names}
            elif isinstance(node, ast.Import):
                seen |= {a.name for a in node.names}
        out[name] = seen
    return out


def test_the_old_call_path_modules_are_gone_and_nothing_imports_them():
    mods = _modules()
    assert not set(OLD_PATHS) & set(mods)
    users = {name: sorted(set(OLD_PATHS) & seen) for name, seen in _imported_names().items()}
    assert {n: u for n, u in users.items() if u} == {}


def test_the_ops_sit_above_the_kernels_and_problem_holds_data_only():
    g = graph()
    kernels = {m for m in g if m == "ropelab.kernels" or m.startswith("ropelab.kernels.")}
    ops = {m for m in g if m.startswith("ropelab.ops")}
    assert not any(g[k] & ops for k in kernels), "a kernel module imports the ops layer"
    assert g["ropelab.problem"] <= {"ropelab.reference", "ropelab.cuda_limits"}, g["ropelab.problem"]


def test_models_sit_on_top_and_import_ropelab_does_not_reach_them():
    """ropelab.models imports torch and transformers; nothing else in the package imports it
    (the course's notebook 09 reaches it directly), so ``import ropelab`` stays free of both."""
    names = _imported_names()
    users = {n for n, seen in names.items() if not n.startswith("ropelab.models")
             and any(s == "ropelab.models" or s.startswith("ropelab.models.") for s in seen)}
    assert users == set()
    heavy = {"torch", "transformers", "diffusers"}
    top_level = {n for n, seen in names.items() if n == "ropelab.models" and seen & heavy}
    assert top_level == set(), "ropelab/models/__init__.py must not import torch or transformers"


def test_tables_are_data_only_and_the_rows_ops_use_the_one_engine():
    g = graph()
    # ropelab.tables builds cos/sin arrays with NumPy: no kernel, no op behind it.
    assert not {m for m in g["ropelab.tables"] if m.startswith(("ropelab.ops", "ropelab.kernels"))}
    # Every op describes its call and the engine runs it: the public entry points hand their
    # call to ops.call, and no op launches on its own (only the engine's routes launch).
    for op in ("ropelab.ops.rope", "ropelab.ops.qk", "ropelab.ops.fused",
               "ropelab.ops.fused_backward"):
        assert "ropelab.ops.call" in g[op], op
    launching = {m for m in g if m.startswith("ropelab.ops") and "ropelab.kernels.launch" in g[m]}
    assert launching <= {"ropelab.ops.call", "ropelab.ops.host_route"}, launching


def test_measure_sits_below_the_course_even_through_the_census_child():
    """ropelab.measure (census, benches, predictor) never imports the grader or the lessons, not in a late
    import and not by name: the census child imports its client by a string, so a module name
    in a string constant counts too."""
    names = _imported_names()
    users = {n for n, seen in names.items() if n.startswith("ropelab.measure")
             and any(s.split(".")[:2] in (["ropelab", "grader"], ["ropelab", "lessons"])
                     for s in seen)}
    assert users == set()
    by_name = set()
    for name, path in _modules().items():
        if name.startswith("ropelab.measure"):
            for node in ast.walk(ast.parse(path.read_text())):
                if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                        and node.value.startswith(("ropelab.grader", "ropelab.lessons"))):
                    by_name.add(name)
    assert by_name == set()
