"""Host time of one kernel launch by each route, on a GPU: what ``Bound.fire`` could cost.

Same compiled kernel (ropelab's flat RoPE plan on 64 x 512 float32, six caller arguments plus
scalars), same packed parameters, three ways to call ``cuLaunchKernel``:

* ``bindings``: ``Bound.fire`` as shipped (cuda-bindings' ``driver.cuLaunchKernel``);
* ``ctypes``: the driver's own ``cuLaunchKernel`` from ``libcuda.so.1`` through ctypes, with its
  argument types declared once;
* ``cupy``: a CuPy ``RawKernel`` with as many arguments (the issue's yardstick), and CuPy's
  empty kernel.

Each route launches ``N`` times in batches of 256 with a synchronize between batches (the
launch queue never fills), the host time of the batch's launches divided by 256; median of
the batches.  Prints one line per route and writes ``--json``.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import statistics
import sys
import time

import numpy as np


def per_launch(fn, sync, batches=40, per_batch=256) -> float:
    for _ in range(3):
        fn()
    sync()
    times = []
    for _ in range(batches):
        t0 = time.perf_counter_ns()
        for _ in range(per_batch):
            fn()
        times.append((time.perf_counter_ns() - t0) / per_batch / 1e3)
        sync()
    return statistics.median(times)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)

    import ropelab
    from numba import cuda
    from ropelab.kernels import launch as launch_module

    x = cuda.to_device(np.random.rand(64, 1, 512).astype(np.float32))
    out = cuda.device_array_like(x)
    pos = cuda.to_device(np.arange(64, dtype=np.int32))
    launch_module._bound.clear()
    ropelab.rope(x, positions=pos, out=out, variant="flat")  # builds the one Bound it fires
    cuda.synchronize()
    (plan, caller), bound = next(iter(launch_module._bound.items()))
    ptrs = tuple(a.device_ctypes_pointer.value for a in (x, out, pos))[:len(caller)]
    stream = 0
    sync = cuda.synchronize
    rows = {}
    rows["ropelab.rope(out=) on numba arrays"] = per_launch(
        lambda: ropelab.rope(x, positions=pos, out=out, variant="flat"), sync)
    rows["bindings (Bound.fire)"] = per_launch(lambda: bound.fire(ptrs, stream), sync)

    lib = ctypes.CDLL("libcuda.so.1")
    launch = lib.cuLaunchKernel
    launch.restype = ctypes.c_int
    launch.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
    h = bound.handle  # a cuda-bindings CUfunction (int() is its value), or a ctypes pointer
    handle = h.value if isinstance(h, ctypes.c_void_p) else int(h)
    g, b = plan.grid, plan.block
    addr = bound._addr

    def fire_ctypes():
        for slot, p in zip(bound._slots, ptrs):
            slot.value = p
        err = launch(handle, g[0], g[1], g[2], b[0], b[1], b[2], 0, stream, addr, None)
        if err:
            raise RuntimeError(err)

    rows["ctypes libcuda cuLaunchKernel"] = per_launch(fire_ctypes, sync)
    bare = lambda: launch(handle, g[0], g[1], g[2], b[0], b[1], b[2], 0, stream, addr, None)  # noqa: E731
    rows["ctypes, no pointer patching"] = per_launch(bare, sync)
    # The public call with its Bound launching through ctypes: what Bound.fire would become.
    saved = bound.handle, bound._launch
    bound.handle = handle
    bound._launch = lambda *a: (launch(*a),)  # noqa: E731  (fire reads a 1-tuple)
    try:
        rows["ropelab.rope(out=), Bound on ctypes"] = per_launch(
            lambda: ropelab.rope(x, positions=pos, out=out, variant="flat"), sync)
    except Exception as exc:  # a stream object ctypes cannot pass, say: the record says so
        rows["ropelab.rope(out=), Bound on ctypes"] = f"failed: {type(exc).__name__}: {exc}"
    finally:
        bound.handle, bound._launch = saved
    fn = bound._launch
    h = bound.handle
    rows["bindings, no pointer patching"] = per_launch(lambda: fn(h, *bound._args, stream, addr, 0), sync)
    try:
        import cupy as cp
        k = cp.RawKernel(r'''extern "C" __global__ void k(const float* x, float* o, const int* p,
            unsigned long long a, unsigned long long b, float c) {
            unsigned long long i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < a) o[i] = x[i] * c + p[i % b]; }''', "k")
        cx = cp.asarray(x)
        co = cp.asarray(out)
        cpos = cp.asarray(pos)
        n = np.uint64(64 * 512)
        k((64,), (512,), (cx, co, cpos, n, np.uint64(64), np.float32(1.0)))
        rows["cupy RawKernel, 6 args"] = per_launch(
            lambda: k((64,), (512,), (cx, co, cpos, n, np.uint64(64), np.float32(1.0))),
            cp.cuda.Device().synchronize)
        e = cp.RawKernel('extern "C" __global__ void e() {}', "e")
        e((1,), (1,), ())
        rows["cupy RawKernel, empty"] = per_launch(lambda: e((1,), (1,), ()),
                                                   cp.cuda.Device().synchronize)
    except Exception as exc:  # no CuPy: say so
        rows["cupy"] = f"skipped: {type(exc).__name__}: {exc}"
    for name, v in rows.items():
        print(f"{name:40s} {v if isinstance(v, str) else f'{v:7.2f} us'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "method": __doc__}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
