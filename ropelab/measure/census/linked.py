"""A shipped kernel's compact PTX and its register report, for the H200, without a GPU.

The census child's client (``engine.run_child("ropelab.measure.census.linked", tasks)``, the
simulator off): each task is ``{key, job, signature, fastmath}``, a kernel shipped as source
(:func:`.shipped.ship_kernel`), rebuilt by the census's own rebuild, compiled with
``cuda.compile_ptx`` for compute capability 9.0 with the kernel's own fast-math setting, and
linked by nvJitLink (part of ``cuda-bindings``; no ``nvdisasm`` needed) for its registers,
stack and spills.  The caller caches the rows (the grader's prediction,
:mod:`ropelab.grader.predict.compiled`).
"""

from __future__ import annotations

import re

from . import engine, shipped



def link_report(ptx_text: str) -> dict:
    """Registers, stack, spills and static shared memory from nvJitLink's verbose link."""
    from cuda.bindings import nvjitlink

    data = ptx_text.encode()
    handle = nvjitlink.create(2, [f"-arch=sm_{engine.CC[0]}{engine.CC[1]}", "-verbose"])
    try:
        nvjitlink.add_data(handle, nvjitlink.InputType.PTX, data, len(data), "kernel.ptx")
        nvjitlink.complete(handle)
        log = bytearray(nvjitlink.get_info_log_size(handle))
        nvjitlink.get_info_log(handle, log)
    finally:
        nvjitlink.destroy(handle)
    return parse_link_log(log.decode(errors="replace"))


def parse_link_log(text: str) -> dict:
    """The numbers of a ``ptxas info`` report (the last entry function's)."""
    def last(pattern, default=0):
        found = re.findall(pattern, text)
        return int(found[-1]) if found else default

    return {"regs": last(r"Used (\d+) registers"),
            "stack_bytes": last(r"(\d+) bytes stack frame"),
            "spill_stores": last(r"(\d+) bytes spill stores"),
            "spill_loads": last(r"(\d+) bytes spill loads")}


def compact(ptx_text: str) -> str:
    """The PTX without comments, blank lines and the entry's parameter declarations, the
    mangled names shortened to ``K`` (``K_param_4`` keeps its index)."""
    lines = []
    for raw in ptx_text.splitlines():
        line = raw.split("//", 1)[0].rstrip()
        if not line.strip() or line.strip().startswith(".param"):
            continue
        lines.append(re.sub(r"_ZN\w*?(?=_param_\d+\b)|_ZN\w+", "K", line))
    return "\n".join(lines) + "\n"


def _rebuild(job: dict):
    """The kernel a shipped job describes, by the census's own rebuild
    (:func:`ropelab.measure.census.shipped.rebuild_job`): one shipping format for both
    children."""
    return shipped.rebuild_job(job, [0])


def compile_rows(tasks: list[dict]):
    """(In the child.)  ``{key, job, signature, fastmath}`` -> ``{key, ptx, regs, ...}``."""
    from numba import cuda

    for task in tasks:
        def work(task=task):
            fn = _rebuild(task["job"])
            fn = getattr(fn, "py_func", fn)
            text, _ = cuda.compile_ptx(fn, task["signature"], cc=engine.CC,
                                       fastmath=bool(task["fastmath"]))
            return {"ptx": compact(text), **link_report(text)}

        yield engine.attempt({"key": task["key"]}, work)
