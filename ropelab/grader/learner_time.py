"""The learner measures: ``verdict.time()``.

On a GPU the learner's passing kernel is timed beside ropelab's kernel for the same step (when
it takes the same arguments) and a device-to-device copy of the same bytes, each cold (L2
evicted before every launch), as a median with its p20-p80 spread, by the project's timer
(:func:`measure_on_gpu` gives the numbers, :func:`time_on_gpu` the text).

With no GPU nothing can be timed: a simulated launch measures Python threads.  Then the
learner gets a *predicted* H200 time for the same timing case, with its error bar, if the
prediction model is installed (:mod:`ropelab.grader.predict`: the launches the timing would
make, found on the simulator without running them, each kernel's PTX compiled without a GPU,
a roofline fitted on H200 timings); otherwise a sentence saying that no model is installed.
This module holds no model.
"""

from __future__ import annotations

import importlib

import numpy as np

from ..target import SIMULATED


def timer_class():
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
    """The prediction package (``ropelab.grader.predict``) if it is installed, else None."""
    try:
        module = importlib.import_module("ropelab.grader.predict")
    except ImportError:
        return None
    return module if hasattr(module, "explain_step") else None


def _progress(done: int, total: int) -> None:
    print(f"\r  compiling for the prediction (PTX for the H200, no GPU needed): {done}/{total}",
          end="\n" if done == total else "", flush=True)


def predicted(verdict) -> str:
    """The no-GPU answer of ``verdict.time()``."""
    model = prediction_model()
    head = "nothing timed: no GPU in this process (a simulated launch times Python threads)"
    if model is None:
        return (f"{head}; and no prediction model is installed (ropelab.grader.predict), "
                "so no predicted H200 time either")
    if verdict.subject is None:
        return f"{head}; a prediction needs the graded function, which this verdict has not"
    step, fn = verdict.subject
    try:
        why = model.explain_step(step, fn, progress=_progress)
    except Exception as exc:  # noqa: BLE001  (the model is another module's; say what failed)
        return f"{head}; no prediction: {type(exc).__name__}: {exc}"
    launches = why["launches"]
    what = ("your kernel" if len(launches) == 1 else f"your {len(launches)} launches")
    lines = [f"{head}.",
             f"Predicted H200 time for {why['case']} ({why['bytes_moved'] / 1e6:.0f} MB moved), "
             f"{what}: {model.figure(why)}",
             f"  a device copy of the same bytes: about {why['copy_us']:.1f} us "
             f"(yours at about {100 * why['copy_us'] / why['us']:.0f}% of its speed)"]
    for k, part in enumerate(launches):
        f = part["features"]
        label = f"  launch {k + 1}: " if len(launches) > 1 else "  "
        lines.append(f"{label}{int(f['blocks'])} blocks of {int(f['threads_per_block'])} "
                     f"threads, {f['waves']:.1f} waves; set by {part['binding']} "
                     f"({part['us']:.1f} us)")
        if f.get("divergent_branches"):
            lines.append(f"{' ' * len(label)}a branch splits each warp (its lanes disagree): "
                         "the warp runs both arms, one after the other")
    lines.append("  (the range holds 80% of the measured times of kernels the fit never saw; "
                 "a model, not a measurement)")
    return "\n".join(lines)


def report(verdict, repeats: int) -> str:
    """What ``verdict.time()`` prints."""
    if not verdict.passed:
        return "nothing timed: the kernel has not passed the check yet"
    if SIMULATED:
        # the prediction finds a launch function's launches by calling it here (on the
        # simulator, no thread runs): whatever it replaces of the grader is put back
        from .tamper import Guard, said

        subject = verdict.subject if isinstance(verdict.subject, tuple) else ()
        guard = Guard(extra=(("the step", subject[0]),) if subject else ())
        text = predicted(verdict)
        changed = guard.restore()
        if changed:
            return (f"no prediction: your function replaced {said(changed)} while its launches "
                    "were found (put back now)")
        return text
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


def _spread(samples) -> dict:
    p20, median, p80 = np.percentile(samples, [20, 50, 80])
    return {"median_us": float(median), "p20_us": float(p20), "p80_us": float(p80),
            "repeats": len(samples)}


def measure_on_gpu(step, fn, repeats: int, *, timer=None, reference: bool = True,
                   case=None) -> dict:
    """Cold timings of ``fn`` on the step's timing case, of a device copy of the case's bytes
    and (``reference``) of ropelab's kernel for the step: ``{"mine", "copy", "reference",
    "host_us", "fill_us", "case", "problem"}``, each timing ``{median_us, p20_us, p80_us,
    repeats}``.  ``problem`` says why the learner's time does not count (the last timed run's
    output is wrong or unwritten, or a time no kernel moving these bytes can reach), else None;
    then ``copy`` and ``reference`` may be missing.
    ``timer``: a Timer to reuse (it holds a 1 GiB eviction buffer); ``case``: the timing
    case's inputs when the caller has built them already (:func:`.timed.timing_inputs`: the
    function is handed no answer; the answer is built after the timing)."""
    from numba import cuda

    from .timed import implausible, last_run_problem, resetting_out, sentinel_like, timing_inputs

    timer = timer or timer_class()(repeats=repeats)
    case = case or timing_inputs(step)
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

    with resetting_out(timer, out, cuda.to_device(sentinel_like(case.out_size))):
        mine = _spread(timer.time(launch(fn), repeats))
    host = list(timer.last_host_us)
    result = {"case": case, "mine": mine, "copy": None, "reference": None,
              "host_us": float(np.median(host)) if host else None,
              "fill_us": getattr(timer, "fill_us", None)}
    cuda.synchronize()
    result["problem"] = last_run_problem(step, out.copy_to_host(), case)
    if result["problem"] is not None:
        return result
    result["copy"] = _spread(timer.time(copy, repeats))
    result["problem"] = implausible(mine["median_us"], result["copy"]["median_us"])
    if result["problem"] is not None:
        return result
    ref = _reference_kernel(step) if reference else None
    if ref is not None:
        result["reference"] = _spread(timer.time(launch(ref), repeats))
    return result


def time_on_gpu(step, fn, repeats: int) -> str:
    """Median (p20-p80) of the learner's kernel, ropelab's and a device copy, cold."""
    m = measure_on_gpu(step, fn, repeats)
    if m["problem"] is not None:
        return f"not timed: {m['problem']}"
    case = m["case"]

    def text(t):
        return f"{t['median_us']:.1f} us median (p20-p80 {t['p20_us']:.1f}-{t['p80_us']:.1f})"

    lines = [f"{case.label}: your kernel {text(m['mine'])}",
             f"  a device copy moving the same {case.bytes_moved / 1e6:.0f} MB: {text(m['copy'])}"]
    if m["reference"] is not None:
        lines.append(f"  {step.reference_label}, same launch: {text(m['reference'])}")
    else:
        lines.append(f"  {step.reference_label}: not timed here (its launch contract differs "
                     "from this step's)")
    lines.append(f"  yours runs at {100 * m['copy']['median_us'] / m['mine']['median_us']:.0f}% "
                 "of the copy's speed")
    return "\n".join(lines)
