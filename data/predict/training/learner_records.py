"""ropelab's own kernels as training entries: every registered plain-RoPE variant and every
controlled kernel of :mod:`ropelab.measure.controls`, launched on step 02.3's contract.

02.3 hands a launch function ``x, out, positions`` (device arrays of a tokens x hidden
problem), ``n_pairs`` and ``base``; these launch functions build the kernel's plan for that
shape, as the bench did when it recorded them, and launch it through ropelab's launch path
(on the simulator that path is a ``kernel[grid, block]`` launch, which the dry run sees).
The bench records hold the same kernels at other shapes (:mod:`ropelab.grader.predict.
sources`); these rows time them again beside the learners' kernels, with the same timer.
"""

from functools import lru_cache

import numpy as np

from ropelab import kernels
from ropelab.kernels.launch import launch
from ropelab.kernels.plan import Plan
from ropelab.measure import controls
from ropelab.grader.steps.cases import MAX_POSITION
from ropelab.problem import RopeProblem

# The plans are built once per shape and kept: the timer calls a launch function many times,
# and a plan built inside the call (its tables, a cos/sin cache of MAX_POSITION rows, the
# parameter packing ropelab's launch path caches per plan, the controls' signature check) is
# host work inside the timed call, which the first GPU run measured instead of the kernel
# (control block2d 186 us beside ropelab's block2d 17 us).


@lru_cache(maxsize=None)
def _variant_plan(name, options, tokens, hidden):
    opts = dict(options)
    if opts.get("cache"):
        opts["max_positions"] = MAX_POSITION  # the course's positions are below it
    return kernels.VARIANTS[name].plan(RopeProblem(tokens, 1, hidden, hidden), opts)


@lru_cache(maxsize=None)
def _control_plan(name, tokens, hidden):
    # make_launch's plan, built once (make_launch checks the references' signatures per call)
    if controls.signature_drift():
        raise RuntimeError(f"ropelab's kernels drifted from the controls: {controls.signature_drift()}")
    if not controls.applies(name, tokens, hidden):
        raise ValueError(f"{name} needs hidden % 4 == 0, got {hidden}")  # as make_launch says
    e = controls.KERNELS[name]
    grid, threads, scalars = e.config(tokens, hidden)
    f32, i32 = np.dtype(np.float32), np.dtype(np.int32)
    return Plan(e.fn, True, grid, threads, (f32, f32, i32),
                scalars=tuple(np.int64(v) if type(v) is int else v for v in scalars))


def _variant_launch(name, options):
    frozen = tuple(sorted(options.items()))

    def launch_variant(x, out, positions, n_pairs, base):
        tokens, hidden = positions.size, 2 * int(n_pairs)
        launch(_variant_plan(name, frozen, tokens, hidden), (x, out, positions))
    launch_variant.__name__ = f"launch_{name}"
    return launch_variant


def _control_launch(name):
    def launch_control(x, out, positions, n_pairs, base):
        tokens, hidden = positions.size, 2 * int(n_pairs)
        launch(_control_plan(name, tokens, hidden), (x, out, positions))
    launch_control.__name__ = f"launch_{name}"
    return launch_control


ENTRIES = [
    ("02.3", "ropelab flat", _variant_launch("flat", {})),
    ("02.3", "ropelab block2d", _variant_launch("block2d", {})),
    ("02.3", "ropelab pack4", _variant_launch("pack4", {})),
    ("02.3", "ropelab pack4_scalar", _variant_launch("pack4_scalar", {})),
    ("02.3", "ropelab freq_table", _variant_launch("freq_table", {})),
    ("02.3", "ropelab freq_table cache", _variant_launch("freq_table", {"cache": True})),
    ("02.3", "ropelab pair_sincos", _variant_launch("pair_sincos", {})),
    *[("02.3", f"control {name}", _control_launch(name)) for name in controls.KERNELS
      if not controls.KERNELS[name].copy_only],
]
