"""Host time of ``ropelab.rope``'s fast path, measured on the CPU: no GPU, no driver.

``python -m ropelab.measure.bench.host_path`` times a repeated call on torch tensors (the
launch-overhead bench's case: 64x512 float32, ``x``, ``out`` and ``positions``) with only the
launch itself taken out, and the parts of that call.  The tensors are real CPU tensors read by
the engine's own metadata reader (``ops.arrays.torch_meta``), so the key, the lookup, the overlap checks and the stream
choice cost what they cost on a GPU machine; only the hardware is stood in for:

* validation sees the CPU tensors as the CUDA tensors they stand for (the first call of a
  shape);
* the stream of a tensor is a C call through ``functools.partial``, as
  ``torch._C._cuda_getCurrentRawStream`` is on a GPU;
* ``bind`` returns a Bound whose ``fire`` does nothing (``null``), or one that runs
  ``Bound.fire``'s own body (lock, pointer patching) with a ``cuLaunchKernel`` stub (``stub``).

These are CPU numbers on whatever machine runs them: they rank code changes (run it before
and after one), they are not the H200's launch overhead (that is ``data/launch_overhead``).
"""

from __future__ import annotations

import argparse
import functools
import threading
import timeit
from contextlib import contextmanager
from dataclasses import replace

import numpy as np

from ...freqs import DEFAULT_BASE
from ...kernels.launch import Bound, pack_params
from ...ops import arrays, call, rope as rope_module, streams
from .entries import remembered_call
from .shapes import OVERHEAD_SHAPE as SHAPE


class NullBound:
    """``fire`` does nothing: what is left is the Python around the launch."""

    def __init__(self, plan, caller):
        self.plan, self.caller = plan, caller

    def fire(self, ptrs, stream):
        pass


def stub_bound(plan, caller):
    """A real :class:`~ropelab.kernels.launch.Bound`'s ``fire`` (lock, ctypes slot patching),
    built without a driver: ``cuLaunchKernel`` is a stub that returns success."""
    bound = Bound.__new__(Bound)
    values, slots = pack_params(plan, caller, ())
    bound.plan, bound._values, bound._slots = plan, values, slots
    bound.handle, bound._addr, bound._lock = 0, 0, threading.Lock()
    bound._launch = lambda *args: (0,)
    bound._args = (*plan.grid, *plan.block, 0)
    return bound


def _as_device(obj, name):
    # A CPU tensor described as the CUDA tensor it stands for (the real reader refuses CPU): what
    # the reader says of its NumPy view (bfloat16 as uint16 bits), placed on the device.  One
    # that needs a gradient goes to the real reader, which refuses it as it would on a GPU.
    import torch

    if isinstance(obj, torch.Tensor) and not (obj.requires_grad and torch.is_grad_enabled()):
        dt, storage = arrays.TORCH_DTYPES[str(obj.dtype).rsplit(".", 1)[-1]]
        dt = np.dtype(dt)
        return arrays.ArrayInfo(tuple(obj.shape), dt, tuple(s * dt.itemsize for s in obj.stride()),
                                obj.data_ptr(), True, False, "torch", storage)
    return arrays.inspect_array(obj, name)


_ARANGE = np.arange(1 << 16, dtype=np.int32)  # host memory standing for the device arange


def _arange_positions(tokens):
    return arrays.RawDevice(_ARANGE.ctypes.data, tokens, np.int32)


def _current_for(kind, x):
    return functools.partial(abs, 0)  # one C call, like partial(_cuda_getCurrentRawStream, dev)


@contextmanager
def host_route(binder=NullBound):
    """Route ``ropelab.rope`` on CPU torch tensors through the device path (see the module
    docstring); restores everything on exit."""
    import torch

    saved = [(call, "bind", call.bind), (call, "register_fast_types", call.register_fast_types),
             (call, "SIMULATED", call.SIMULATED),
             (rope_module, "inspect_array", rope_module.inspect_array),
             (streams, "current_for", streams.current_for),
             (call, "arange_positions", call.arange_positions)]
    fast_meta = dict(arrays.FAST_META)
    call.bind, call.register_fast_types = binder, lambda: None
    call.SIMULATED, rope_module.inspect_array = False, _as_device
    streams.current_for, call.arange_positions = _current_for, _arange_positions
    arrays.FAST_META[torch.Tensor] = arrays.torch_meta
    call.clear()
    try:
        yield
    finally:
        for module, name, value in saved:
            setattr(module, name, value)
        arrays.FAST_META.clear()
        arrays.FAST_META.update(fast_meta)
        call.clear()


# ---- the measurement -----------------------------------------------------------------------------

def per_call_us(fns, number: int, repeat: int) -> list[float]:
    """Microseconds per call of each thunk in ``fns``: the best of ``repeat`` runs of
    ``number`` calls.  The thunks take turns run by run, so a burst of load on a shared CPU
    hits them all alike; the minimum, since every other statistic measures the neighbours."""
    best = [float("inf")] * len(fns)
    timers = [timeit.Timer(fn) for fn in fns]
    for _ in range(repeat):
        for i, timer in enumerate(timers):
            best[i] = min(best[i], timer.timeit(number))
    return [b / number * 1e6 for b in best]


def cases():
    """``(name, thunk)`` pairs; each thunk is one call on a warm cache.  Call inside
    :func:`host_route`."""
    import torch

    import ropelab

    x, out = torch.zeros(SHAPE), torch.zeros(SHAPE)
    pos = torch.arange(SHAPE[0], dtype=torch.int32)
    call.clear()
    public = lambda: ropelab.rope(x, variant="flat", positions=pos, out=out)  # noqa: E731
    public()  # validates and remembers the call shape
    key, entry = remembered_call()
    scalars = key[0]  # the scalar part of the key rope() built
    trio = (x, out, pos)
    ptrs = [x.data_ptr(), out.data_ptr(), pos.data_ptr()]
    meta = arrays.FAST_META[torch.Tensor]
    return [
        ("rope() hit, x/out/positions tensors", public),
        ("  part: call.typed(10 scalars) (the other ops' scalar keys)",
         lambda: call.typed(("rope", "flat", DEFAULT_BASE, None, True, False, None, True, None,
                             False))),
        ("  part: 3 metadata reads (torch_meta)",
         lambda: (meta(x), meta(out), meta(pos))),
        ("  part: call.fast() (metadata, key, lookup, run)",
         lambda: call.fast(scalars, trio, None)),
        ("  part: the remembered entry's run() (overlaps, stream, fire)",
         lambda: entry.run(trio, ptrs, None)),
        ("rope() hit, positions=None, new out", lambda: ropelab.rope(x, variant="flat")),
    ]


def measure(number: int = 2000, repeat: int = 60, binder=NullBound) -> list[tuple[str, float]]:
    with host_route(binder):
        named = cases()
        return list(zip([name for name, _ in named],
                         per_call_us([fn for _, fn in named], number, repeat)))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m ropelab.measure.bench.host_path",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--number", type=int, default=2000, help="calls per timing run")
    parser.add_argument("--repeat", type=int, default=60, help="timing runs (the best is kept)")
    parser.add_argument("--stub-launch", action="store_true",
                        help="keep Bound.fire's own body (lock, ctypes patching), stub the driver")
    args = parser.parse_args(argv)
    binder = stub_bound if args.stub_launch else NullBound
    for name, us in measure(args.number, args.repeat, binder):
        print(f"{us:7.3f} us  {name}")


if __name__ == "__main__":
    main()
