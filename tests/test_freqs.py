"""The formula layer: ropelab.freqs depends on nothing internal, the judge only on it, no cycles.

Also the formulas against versions written here from their published definitions, one pair
at a time in plain Python (no NumPy, no shared code).  Budget: well under a second.
"""

import ast
import math
from pathlib import Path

import numpy as np
import pytest

from ropelab import freqs, reference

PACKAGE = Path(freqs.__file__).resolve().parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _ropelab_imports(path: Path) -> tuple[set, set]:
    """(module-level, function-level) ropelab modules imported by the file at ``path``."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    top, late = set(), set()
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(base + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            # ``from . import x`` imports the module x; ``from .x import y`` the module x.
            targets = {f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names}
        elif isinstance(node, ast.Import):
            targets = {a.name for a in node.names}
        else:
            continue
        targets = {t for t in targets if t == "ropelab" or t.startswith("ropelab.")}
        (top if node.col_offset == 0 else late).update(targets)
    return top, late


MODULES = {_module_name(p) for p in PACKAGE.rglob("*.py")}
GRAPH = {_module_name(p): _ropelab_imports(p) for p in PACKAGE.rglob("*.py")}


def test_freqs_imports_nothing_from_ropelab_and_the_judge_only_freqs():
    assert GRAPH["ropelab.freqs"] == (set(), set())
    assert GRAPH["ropelab.reference"] == ({"ropelab.freqs"}, set())


@pytest.mark.parametrize("module", ["ropelab.freqs", "ropelab.reference", "ropelab.scaling",
                                    "ropelab.tolerance", "ropelab.check", "ropelab.target",
                                    "ropelab.sim", "ropelab.sim.fma", "ropelab.sim.warp",
                                    "ropelab.kernels.pair_sincos"])
def test_no_late_imports_of_ropelab_modules(module):
    assert GRAPH[module][1] == set(), GRAPH[module][1]


def test_module_level_imports_have_no_cycle():
    edges = {m: {t for t in top if t in GRAPH and t != m} for m, (top, _) in GRAPH.items()}
    state = {}

    def visit(m, path):
        state[m] = "open"
        for t in edges[m]:
            assert state.get(t) != "open", " -> ".join(path + [m, t])
            if t not in state:
                visit(t, path + [m])
        state[m] = "done"

    for m in edges:
        if m not in state:
            visit(m, [])


def test_the_judge_reexports_the_formulas_themselves():
    for name in ("inv_freq", "linear_inv_freq", "ntk_inv_freq", "yarn_inv_freq", "yarn_blend_inv_freq",
                 "llama3_inv_freq", "yarn_mscale", "DEFAULT_BASE"):
        assert getattr(reference, name) is getattr(freqs, name)


# ---- the formulas against plain-Python versions of their definitions ------------------------

def default_by_hand(d, base):
    return [base ** (-2 * i / d) for i in range(d // 2)]


def yarn_by_hand(d, base, factor, original, beta_fast=32.0, beta_slow=1.0):
    """Hugging Face's _compute_yarn_parameters, one pair at a time."""
    def correction_dim(turns):
        return d * math.log(original / (turns * 2 * math.pi)) / (2 * math.log(base))

    low = max(math.floor(correction_dim(beta_fast)), 0)
    high = min(math.ceil(correction_dim(beta_slow)), d - 1)
    if low == high:
        high += 0.001
    out = []
    for i, f in enumerate(default_by_hand(d, base)):
        extrapolation = 1 - min(max((i - low) / (high - low), 0.0), 1.0)
        out.append(f / factor * (1 - extrapolation) + f * extrapolation)
    return out


def llama3_by_hand(d, base, factor, low_ff, high_ff, original):
    """Hugging Face's _compute_llama3_parameters, one pair at a time."""
    out = []
    for f in default_by_hand(d, base):
        wavelen = 2 * math.pi / f
        if wavelen < original / high_ff:
            out.append(f)
        elif wavelen > original / low_ff:
            out.append(f / factor)
        else:
            smooth = (original / wavelen - low_ff) / (high_ff - low_ff)
            out.append((1 - smooth) * f / factor + smooth * f)
    return out


@pytest.mark.parametrize("d, base, factor, original", [(64, 1e4, 4.0, 2048), (128, 1e6, 32.0, 4096),
                                                       (16, 500.0, 2.0, 64)])
def test_yarn_against_its_definition(d, base, factor, original):
    np.testing.assert_allclose(freqs.yarn_inv_freq(d, base, factor, original),
                               yarn_by_hand(d, base, factor, original), rtol=1e-13, atol=0)


@pytest.mark.parametrize("d, base, args", [(64, 5e5, (8.0, 1.0, 4.0, 8192)), (32, 1e4, (4.0, 1.0, 4.0, 200))])
def test_llama3_against_its_definition(d, base, args):
    got = freqs.llama3_inv_freq(d, base, *args)
    np.testing.assert_allclose(got, llama3_by_hand(d, base, *args), rtol=1e-13, atol=0)
    # all three bands occur, so every branch above is exercised
    kept = np.isclose(got, default_by_hand(d, base), rtol=1e-14)
    divided = np.isclose(got, np.array(default_by_hand(d, base)) / args[0], rtol=1e-14)
    assert kept.any() and divided.any() and (~kept & ~divided).any()


def test_linear_and_ntk_known_values():
    # Linear: every frequency divided; NTK: the highest kept, the lowest divided by the factor.
    np.testing.assert_allclose(freqs.linear_inv_freq(16, 1e4, 3.0), np.array(default_by_hand(16, 1e4)) / 3,
                               rtol=1e-14)
    ntk = freqs.ntk_inv_freq(16, 1e4, 2.0)
    assert ntk[0] == 1.0
    assert ntk[-1] == pytest.approx(default_by_hand(16, 1e4)[-1] / 2.0, rel=1e-13)
    assert freqs.ntk_base(4, 100.0, 4.0) == pytest.approx(1600.0)


def test_the_one_yarn_guard():
    # Bounds that meet become a step at low; others are left alone.
    assert freqs.yarn_ramp_bounds(6.0, 6.0) == (6.0, 6.001)
    assert freqs.yarn_ramp_bounds(6.0, 6.0 + 1e-7) == (6.0, 6.0 + 1e-7 + 0.001)
    assert freqs.yarn_ramp_bounds(2.0, 9.0) == (2.0, 9.0)
    w = freqs.yarn_ramp(16, 3.0, 3.0)
    np.testing.assert_array_equal(w, [0, 0, 0, 0, 1, 1, 1, 1])


def test_blend_with_factor_one_is_exactly_the_default():
    np.testing.assert_array_equal(freqs.yarn_blend_inv_freq(32, 1e4, 1.0, 3.0, 9.0), freqs.inv_freq(32))
