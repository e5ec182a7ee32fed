"""What the profiler measures: one *case* per kernel launch, and the child script that launches them.

A case is a plain dict (it travels to the child as JSON): ``id`` (unique, e.g.
``flat@large_32768x4096``), ``group`` (``plain``, ``controls``, ``fused``: one Nsight Compute
run each), ``family``, ``name`` (variant or control), ``options``, ``shape`` and its
dimensions, ``dtype``, ``layout``, ``min_bytes`` (the operation's minimum DRAM traffic) and
``expect``: the kernel function names the launch may run (an entry ending in ``*`` is a
prefix), so the parent can check that profile result *i* is case *i*.

Plain variants and the fused kernel are launched through the public calls (``ropelab.rope``,
``ropelab.fused_qknorm_rope``) on device arrays, as a user runs them; controls through
:func:`ropelab.measure.controls.make_launch`.  Each case launches exactly once: under ncu the
profiled launch is replayed with the caches flushed before each pass, so no warm-up is needed.

``python -m ropelab.measure.cases PLAN.json MANIFEST.jsonl`` is the child: it launches every
case of the plan in order and appends one JSON line per case to the manifest (``ok`` or the
error), so the parent knows which launches the profile holds.
"""

from __future__ import annotations

import json
import sys

from .. import check as ropelab_check
from ..freqs import DEFAULT_BASE
from ..shapes import rope_bytes
from .bench.shapes import FUSED_DTYPES, ITEMSIZE

GROUPS = ("plain", "controls", "fused")
FUSED_LAYOUTS = (True, False)  # GPT-J (interleaved) and NeoX


def plain_shapes():
    """The large shape (1 GB moved) and the seed's 4096 x 512, from :mod:`ropelab.shapes`."""
    from ..shapes import LARGE_32768x4096, SEED_4096x512

    return [LARGE_32768x4096, SEED_4096x512]


def _kernel_names(module) -> list[str]:
    """Every kernel function a variant module may launch (``KERNEL``, ``CACHE_KERNEL``, ...)."""
    names = [getattr(module, a).__name__ for a in sorted(vars(module))
             if a.endswith("KERNEL") and callable(getattr(module, a))]
    return sorted(set(names))


def options_label(options: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in options.items())


def _variant_options(module, tokens: int) -> list[dict]:
    """Default options plus the variant's own modes (``CHECK_OPTIONS``), cache sized to the shape."""
    out = [{}]
    for opts in getattr(module, "CHECK_OPTIONS", ()):
        opts = dict(opts)
        if "max_positions" in opts:
            opts["max_positions"] = tokens  # positions are 0 .. tokens-1
        out.append(opts)
    return out


def plain_cases() -> list[dict]:
    from .. import kernels

    cases = []
    for shape in plain_shapes():
        for name, module in kernels.MODULES.items():
            for opts in _variant_options(module, shape.tokens):
                label = options_label(opts)
                cases.append({
                    "id": f"{name}{f'[{label}]' if label else ''}@{shape.name}",
                    "group": "plain", "family": "numba", "name": name, "options": opts,
                    "shape": shape.name, "tokens": shape.tokens, "hidden": shape.hidden,
                    "dtype": "float32", "layout": "gptj",
                    "min_bytes": rope_bytes(shape.tokens, shape.hidden),
                    "expect": _kernel_names(module)})
    return cases


def control_cases() -> list[dict]:
    from . import controls

    cases = []
    for shape in plain_shapes():
        for name, e in controls.KERNELS.items():
            if e.role == "reference" or not controls.applies(name, shape.tokens, shape.hidden):
                continue  # references are profiled as plain variants, through the public call
            cases.append({
                "id": f"{name}@{shape.name}", "group": "controls", "family": e.role,
                "name": name, "options": {}, "shape": shape.name, "tokens": shape.tokens,
                "hidden": shape.hidden, "dtype": "float32", "layout": "gptj",
                "min_bytes": 2 * shape.tokens * shape.hidden * 4
                + (0 if e.copy_only else 4 * shape.tokens),
                "expect": [e.fn.__name__]})
    return cases


def fused_cases() -> list[dict]:
    from .. import kernels
    from ..shapes import PRODUCTION_SHAPES

    (name,) = kernels.FUSED  # one fused operator today; its kernels share the name as prefix
    cases = []
    for shape in PRODUCTION_SHAPES.values():
        for dtype in FUSED_DTYPES:
            for interleave in FUSED_LAYOUTS:
                layout = "gptj" if interleave else "neox"
                cases.append({
                    "id": f"{name}[{dtype},{layout}]@{shape.name}", "group": "fused",
                    "family": "numba_fused", "name": name, "options": {},
                    "shape": shape.name, "tokens": shape.tokens,
                    "heads": [shape.heads_q, shape.heads_k, shape.heads_v],
                    "head_dim": shape.head_dim, "rotary_dim": shape.rotary_dim,
                    "dtype": dtype, "layout": layout,
                    "min_bytes": shape.qk_bytes(ITEMSIZE[dtype]),
                    "expect": [f"{name}*"]})
    return cases


def plan(groups=GROUPS) -> list[dict]:
    """Every case of the named groups, in group order."""
    unknown = set(groups) - set(GROUPS)
    if unknown:
        raise ValueError(f"unknown group(s) {sorted(unknown)}; choose from {', '.join(GROUPS)}")
    build = {"plain": plain_cases, "controls": control_cases, "fused": fused_cases}
    return [c for g in GROUPS if g in groups for c in build[g]()]


def accepts(case: dict, kernel: str) -> bool:
    """Whether ``kernel`` (a short function name) is one the case may launch."""
    return any(kernel.startswith(e[:-1]) if e.endswith("*") else kernel == e
               for e in case["expect"])


# --------------------------------------------------------------------------------------------
# The child: launch every case once (GPU)
# --------------------------------------------------------------------------------------------

class _PlainInputs:
    """x, out and positions of one plain shape, reused by consecutive cases of that shape."""

    def __init__(self):
        self.key = None
        self.arrays = None

    def get(self, tokens: int, hidden: int):
        import numpy as np
        from numba import cuda

        if self.key != (tokens, hidden):
            self.arrays = None  # free the previous shape's buffers first
            rng = np.random.default_rng(0)
            x = cuda.to_device(rng.standard_normal(tokens * hidden, dtype=np.float32))
            self.arrays = (x, cuda.device_array_like(x),
                           cuda.to_device(np.arange(tokens, dtype=np.int32)))
            self.key = (tokens, hidden)
        return self.arrays


def launch_case(case: dict, plain: _PlainInputs) -> None:
    """Launch the case's kernel once and wait for it."""
    from numba import cuda

    import ropelab

    if case["group"] == "plain":
        x, out, pos = plain.get(case["tokens"], case["hidden"])
        shape = (case["tokens"], case["hidden"])
        ropelab.rope(x.reshape(shape), variant=case["name"], positions=pos,
                     out=out.reshape(shape), base=DEFAULT_BASE, **case["options"])
    elif case["group"] == "controls":
        from . import controls

        x, out, pos = plain.get(case["tokens"], case["hidden"])
        controls.make_launch(case["name"], case["tokens"], case["hidden"], x, out, pos)()
    else:
        import numpy as np

        plain.key = plain.arrays = None
        qkv, wq, wk, pos = ropelab_check.random_inputs(np.random.default_rng(0), case["tokens"],
                                               tuple(case["heads"]), case["head_dim"], case["dtype"])
        hq, hk, hv = case["heads"]
        ropelab.fused_qknorm_rope(
            cuda.to_device(qkv), num_heads_q=hq, num_heads_k=hk, num_heads_v=hv,
            head_dim=case["head_dim"], q_weight=cuda.to_device(wq), k_weight=cuda.to_device(wk),
            positions=cuda.to_device(pos), rotary_dim=case["rotary_dim"],
            interleave=case["layout"] == "gptj", base=DEFAULT_BASE)
    cuda.synchronize()


def run_child(plan_path: str, manifest_path: str) -> int:
    import ropelab

    if ropelab.SIMULATED:
        print("ropelab.measure.cases: the child launches on a GPU only", file=sys.stderr)
        return 2
    with open(plan_path) as fh:
        cases = json.load(fh)
    plain = _PlainInputs()
    failed = 0
    with open(manifest_path, "w") as manifest:
        for case in cases:
            try:
                launch_case(case, plain)
                entry = {"id": case["id"], "ok": True}
            except Exception as exc:  # one failing case must not cost the others their profile
                failed += 1
                entry = {"id": case["id"], "ok": False,
                         "error": f"{type(exc).__name__}: {exc}".splitlines()[0][:300]}
            manifest.write(json.dumps(entry) + "\n")
            manifest.flush()
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print("usage: python -m ropelab.measure.cases PLAN.json MANIFEST.jsonl", file=sys.stderr)
        sys.exit(2)
    sys.exit(run_child(sys.argv[1], sys.argv[2]))
