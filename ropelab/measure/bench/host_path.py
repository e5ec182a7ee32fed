"""Host time of ``ropelab.rope``'s fast path, measured on the CPU: no GPU, no driver.

``python -m ropelab.measure.bench.host_path`` times a repeated call on torch tensors (the
launch-overhead bench's case: 64x512 float32, ``x``, ``out`` and ``positions``) with only the
launch itself taken out.  The tensors are real CPU tensors read by the real metadata reader
(``ops.arrays.torch_meta``), so the key, the lookup, the overlap checks and the stream choice
cost what they cost on a GPU machine; only these are stood in for:

* validation sees the CPU tensors as CUDA tensors (the first call of a shape);
* the stream of a tensor is a C call through ``functools.partial``, as
  ``torch._C._cuda_getCurrentRawStream`` is on a GPU;
* ``bind`` returns a Bound whose ``fire`` does nothing (``null``), or one that runs
  ``Bound.fire``'s own body (lock, pointer patching) with a ``cuLaunchKernel`` stub (``stub``).

It also rebuilds the pre-refactor fast path (``cf71f61``: ``api.rope``'s key and ``_Call.run``)
on the same entry, so the two engines compare on one machine in one run.  These are CPU numbers
on whatever machine runs them: they rank code changes, they are not the H200's launch overhead
(that is ``data/launch_overhead``).
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import threading
import timeit
from contextlib import contextmanager

import numpy as np

from ...kernels.launch import Bound, pack_params
from ...ops import arrays, call, rope as rope_module, streams
from ...validate import fail

SHAPE = (64, 512)  # the launch-overhead bench's shape (OVERHEAD_SHAPE)


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
    # A CPU tensor described as the CUDA tensor it stands for (the real reader refuses CPU).
    # One that needs a gradient goes to the real reader, which refuses it as it would on a GPU.
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
    had = {t: arrays.FAST_META.get(t) for t in (torch.Tensor,)}
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
        for t, meta in had.items():
            if meta is None:
                arrays.FAST_META.pop(t, None)
            else:
                arrays.FAST_META[t] = meta
        call.clear()


# ---- the pre-refactor fast path (cf71f61: api.rope's key and _Call.run), rebuilt ----------------

def _old_torch_meta(t):
    return t.data_ptr(), (t.shape, t.is_contiguous(), t.dtype, t.get_device())


class OldCall:
    __slots__ = ("bound", "nbytes", "same_layout", "alloc", "ptr_of", "arange", "current",
                 "pos_nbytes", "check", "plan")

    def run(self, x, xp, out, op, positions, pp, stream):
        nb = self.nbytes
        if out is None:
            out = self.alloc(x)
            op = self.ptr_of(out)
        elif op != xp:
            if xp < op + nb and op < xp + nb:
                fail("out partially overlaps x; pass out=x for in place, or a separate array")
        elif not self.same_layout:
            fail("out starts where x starts but has another layout; pass out=x for in place")
        if positions is None:
            pp = self.arange
        else:
            if pp < op + nb and op < pp + self.pos_nbytes:
                fail("out overlaps positions; the kernel would overwrite positions it still reads")
        handle = self.current() if stream is None else streams.resolve(stream)
        self.bound.fire((xp, op, pp), handle)
        return out


def old_from(entry, x, out) -> OldCall:
    """The old engine's entry for the call a new :class:`~ropelab.ops.call.DeviceCall` holds
    (``ropelab.rope(x, out=out, positions=...)``, out a separate tensor like x)."""
    from ...ops import memory

    bound = entry.bounds[0]
    old = OldCall()
    old.bound, old.nbytes, old.pos_nbytes = bound, x.nbytes, 4 * x.shape[0]
    old.same_layout = tuple(out.shape) == tuple(x.shape) and out.stride() == x.stride()
    old.alloc, old.ptr_of = memory.maker(arrays.ArrayInfo(tuple(x.shape), np.dtype(np.float32),
                                                          (), 0, True, kind="torch"))
    old.arange = entry.defaults[0][1] if entry.defaults else 0
    old.current, old.check, old.plan = entry.current, False, bound.plan
    return old


def old_rope(old_entries, x, *, variant=None, positions=None, base=10000.0, rotary_dim=None,
             interleave=True, inverse=False, scaling=None, out=None, fastmath=True,
             threads_per_block=None, stream=None, check_positions=False, **variant_options):
    """cf71f61's ``api.rope`` up to its cache hit (a miss raises: the bench only times hits)."""
    meta = arrays.FAST_META.get(type(x))
    if meta is not None:
        xp, xk = _old_torch_meta(x)
        om = arrays.FAST_META.get(type(out)) if out is not None else None
        pm = arrays.FAST_META.get(type(positions)) if positions is not None else None
        if (out is None or om is not None) and (positions is None or pm is not None):
            op, ok = _old_torch_meta(out) if om is not None else (0, None)
            pp, pk = _old_torch_meta(positions) if pm is not None else (0, None)
            key = (type(x), xk, ok, pk, (xp | op) % 16 == 0, variant, base, rotary_dim,
                   interleave, inverse, scaling, fastmath, threads_per_block, check_positions,
                   type(base), type(rotary_dim), type(interleave), type(inverse), type(fastmath),
                   type(threads_per_block), type(check_positions),
                   tuple((k, v, type(v)) for k, v in variant_options.items())
                   if variant_options else ())
            entry = old_entries.get(key)
            if entry is not None:
                return entry.run(x, xp, out, op, positions, pp, stream)
            old_entries["pending"] = key
    raise LookupError("old_rope times cache hits only")


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
    new = lambda: ropelab.rope(x, variant="flat", positions=pos, out=out)  # noqa: E731
    new()  # validates and remembers the call shape
    key, entry = call.remembered()[0]
    old_entries: dict = {}
    try:
        old_rope(old_entries, x, variant="flat", positions=pos, out=out)
    except LookupError:
        old_entries[old_entries.pop("pending")] = old_from(entry, x, out)
    old = lambda: old_rope(old_entries, x, variant="flat", positions=pos, out=out)  # noqa: E731
    scalars = key[0]  # the scalar part of the key rope() built
    trio = (x, out, pos)
    ptrs = [x.data_ptr(), out.data_ptr(), pos.data_ptr()]
    meta = arrays.FAST_META[torch.Tensor]
    return [
        ("rope() hit, x/out/positions tensors (new engine)", new),
        ("rope() hit, same call on cf71f61's fast path (old engine)", old),
        ("  part: call.typed(10 scalars) (the other ops' scalar keys)",
         lambda: call.typed(("rope", "flat", 10000.0, None, True, False, None, True, None, False))),
        ("  part: 3 metadata reads (torch_meta)", lambda: (meta(x), meta(out), meta(pos))),
        ("  part: call.fast() (metadata, key, lookup, run)",
         lambda: call.fast(scalars, trio, None)),
        ("  part: DeviceCall.run() (overlaps, stream, fire)", lambda: entry.run(trio, ptrs, None)),
        ("rope() hit, positions=None, new out", lambda: ropelab.rope(x, variant="flat")),
    ]


def measure(number: int = 2000, repeat: int = 60, binder=NullBound) -> list[tuple[str, float]]:
    with host_route(binder):
        named = cases()
        return list(zip([name for name, _ in named],
                         per_call_us([fn for _, fn in named], number, repeat)))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--number", type=int, default=2000, help="calls per timing run")
    parser.add_argument("--repeat", type=int, default=60, help="timing runs (the best is kept)")
    parser.add_argument("--stub-launch", action="store_true",
                        help="keep Bound.fire's own body (lock, ctypes patching), stub the driver")
    args = parser.parse_args(argv)
    binder = stub_bound if args.stub_launch else NullBound
    rows = measure(args.number, args.repeat, binder)
    for name, us in rows:
        print(f"{us:7.3f} us  {name}")
    print(f"new / old engine: {rows[0][1] / rows[1][1]:.2f}x (same run, same CPU)")


if __name__ == "__main__":
    main()
