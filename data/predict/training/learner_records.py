"""ropelab's own kernels as training entries: every registered plain-RoPE variant and every
controlled kernel of :mod:`ropelab.measure.controls`, launched on step 02.3's contract.

02.3 hands a launch function ``x, out, positions`` (device arrays of a tokens x hidden
problem), ``n_pairs`` and ``base``; these launch functions build the kernel's plan for that
shape, as the bench did when it recorded them, and launch it through ropelab's launch path
(on the simulator that path is a ``kernel[grid, block]`` launch, which the dry run sees).
The bench records hold the same kernels at other shapes (:mod:`ropelab.grader.predict.
sources`); these rows time them again beside the learners' kernels, with the same timer.
"""

from ropelab import kernels
from ropelab.kernels.launch import launch
from ropelab.measure import controls
from ropelab.grader.steps.cases import MAX_POSITION
from ropelab.problem import RopeProblem


def _variant_launch(name, options):
    def launch_variant(x, out, positions, n_pairs, base):
        tokens, hidden = positions.size, 2 * int(n_pairs)
        opts = dict(options)
        if opts.get("cache"):
            opts["max_positions"] = MAX_POSITION  # the course's positions are below it
        plan = kernels.VARIANTS[name].plan(RopeProblem(tokens, 1, hidden, hidden), opts)
        launch(plan, (x, out, positions))
    launch_variant.__name__ = f"launch_{name}"
    return launch_variant


def _control_launch(name):
    def launch_control(x, out, positions, n_pairs, base):
        tokens, hidden = positions.size, 2 * int(n_pairs)
        controls.make_launch(name, tokens, hidden, x, out, positions)()
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
