"""The learner measures: ``verdict.time()``.

On a GPU the learner's passing kernel is timed beside ropelab's kernel for the same step (when
it takes the same arguments) and a device-to-device copy of the same bytes, each cold (L2
evicted before every launch), as a median with its p20-p80 spread, by the project's timer.

With no GPU nothing can be timed: a simulated launch measures Python threads.  Then the
learner gets a *predicted* H200 time from their kernel's census, if a prediction model is
installed (``ropelab.measure.predict.predict_h200``); otherwise a sentence saying that no
model is installed.  This module holds no model.
"""

from __future__ import annotations

import importlib

import numpy as np

from ..target import SIMULATED


def _timer_class():
    """The project's Timer: its own module if the measure package has one, else bench's."""
    for name in ("ropelab.measure.timer", "ropelab.measure.bench"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(module, "Timer"):
            return module.Timer
    raise ImportError("no Timer in ropelab.measure")


def prediction_model():
    """``predict_h200`` if a prediction model is installed, else None."""
    try:
        module = importlib.import_module("ropelab.measure.predict")
    except ImportError:
        return None
    return getattr(module, "predict_h200", None)


def predicted(verdict) -> str:
    """The no-GPU answer of ``verdict.time()``."""
    model = prediction_model()
    head = "nothing timed: no GPU in this process (a simulated launch times Python threads)"
    if model is None:
        return (f"{head}; and no prediction model is installed (ropelab.measure.predict), "
                "so no predicted H200 time either")
    if verdict.census is None or verdict.subject is None:
        return f"{head}; a prediction needs the kernel's PTX census, which this step has not"
    step = verdict.subject[0]
    case = step.timing_case()
    try:
        result = model(verdict.census, case.bytes_moved)
    except Exception as exc:  # noqa: BLE001  (the model is another module's; say what failed)
        return f"{head}; the prediction model failed: {type(exc).__name__}: {exc}"
    value = f"{result:.1f} us" if isinstance(result, (int, float)) else str(result)
    return (f"{head}. Predicted H200 time for {case.label} ({case.bytes_moved / 1e6:.0f} MB "
            f"moved), from your kernel's census: {value}")


def report(verdict, repeats: int) -> str:
    """What ``verdict.time()`` prints."""
    if not verdict.passed:
        return "nothing timed: the kernel has not passed the check yet"
    if SIMULATED:
        return predicted(verdict)
    if verdict.timer is None:
        return "nothing timed: this verdict came without its kernel"
    return verdict.timer(repeats)


def _device_args(step, case, out):
    from numba import cuda

    from .trial import host_scalar

    args = []
    for name in step.arguments:
        value = out if name == "out" else case.inputs[name]
        args.append(cuda.to_device(value) if isinstance(value, np.ndarray)
                    else host_scalar(step, value))
    return args


def _reference_kernel(step):
    """ropelab's kernel for the step when it takes the step's own arguments, else None."""
    if step.kind != "kernel" or step.reference is None or step.reference[2] is not None \
            or step.signature != step.reference_signature:
        return None
    module, name, _ = step.reference
    found = getattr(importlib.import_module(module), name, None)
    # Only a kernel can be launched with [grid, block]: a host function of that name cannot.
    return found if callable(getattr(found, "__getitem__", None)) else None


def time_on_gpu(step, fn, repeats: int) -> str:
    """Median (p20-p80) of the learner's kernel, ropelab's and a device copy, cold."""
    from numba import cuda

    from .timed import implausible, last_run_problem, resetting_out, sentinel_like, timing_inputs

    timer = _timer_class()(repeats=repeats)
    case = timing_inputs(step)  # inputs only: the answer is built after the timing
    out = cuda.device_array(case.out_size, dtype=np.float32)
    args = _device_args(step, case, out)
    src = cuda.to_device(np.zeros(case.bytes_moved // 8, dtype=np.float32))
    dst = cuda.device_array_like(src)

    def launch(kernel):
        if step.kind == "launch":
            return lambda: kernel(*args)
        return lambda: kernel[case.grid, case.block](*args)

    def copy():
        dst.copy_to_device(src)

    def spread(samples):
        q = np.percentile(samples, [20, 50, 80])
        return q[1], f"{q[1]:.1f} us median (p20-p80 {q[0]:.1f}-{q[2]:.1f})"

    with resetting_out(timer, out, cuda.to_device(sentinel_like(case.out_size))):
        mine, mine_text = spread(timer.time(launch(fn)))
    cuda.synchronize()
    problem = last_run_problem(step, out.copy_to_host())
    if problem is not None:
        return f"not timed: {problem}"
    base, base_text = spread(timer.time(copy))
    problem = implausible(mine, base)
    if problem is not None:
        return f"not timed: {problem}"
    lines = [f"{case.label}: your kernel {mine_text}",
             f"  a device copy moving the same {case.bytes_moved / 1e6:.0f} MB: {base_text}"]
    ref = _reference_kernel(step)
    if ref is not None:
        theirs, theirs_text = spread(timer.time(launch(ref)))
        lines.append(f"  {step.reference_label}, same launch: {theirs_text}")
    else:
        lines.append(f"  {step.reference_label}: not timed here (its launch contract differs "
                     "from this step's)")
    lines.append(f"  yours runs at {100 * base / mine:.0f}% of the copy's speed")
    return "\n".join(lines)
