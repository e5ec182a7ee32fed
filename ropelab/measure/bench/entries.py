"""What the sweep times: :class:`Entry` (one row family), the device buffers of one shape that
every entry of that shape shares, and ropelab's own entries: each variant through the public
call and as its kernel alone, the fused kernel's mappings, and the copy roof.  The other
entries are the rows of :mod:`.rope_rows` and :mod:`.baselines`; :func:`.sweeper.plan` lists
them all."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import cuda

from ... import check as ropelab_check
from ...target import SIMULATED
from .shapes import Shape


@dataclass
class Entry:
    """Something to time: ``make(buffers) -> launch()`` or None when it does not apply.

    ``fused``: True for entries on Q/K shapes, False for plain ``[tokens, hidden]`` shapes,
    None for both (the copy).  ``group``: run order (0 ropelab, the copy and CUDA C++; 1 eager
    PyTorch; 2 torch.compile), so a slow baseline never delays ropelab's rows."""

    name: str
    family: str
    make: object
    fastmath: object = None
    fused: bool | None = False
    group: int = 0


def applies(entry: Entry, shape: Shape) -> bool:
    return entry.fused is None or entry.fused == shape.fused


def remembered_call():
    """``(key, entry)`` of the one call shape the engine remembers: call ``ops.call.clear()``,
    then the public function once, then this.  The bench fires that entry's bound launch alone
    (the kernel row) and the host harness times its parts."""
    from ...ops import call

    remembered = call.remembered()
    if len(remembered) != 1:
        raise RuntimeError(f"expected one remembered call shape, found {len(remembered)}")
    return remembered[0]


def device_ptr(a) -> int:
    """The device address of a torch tensor or of any ``__cuda_array_interface__`` array."""
    return a.data_ptr() if hasattr(a, "data_ptr") else int(a.__cuda_array_interface__["data"][0])


class Buffers:
    """Device inputs of one shape, allocated once and shared by every entry timed on it."""

    def __init__(self, shape: Shape, seed: int = 0):
        self.shape = shape
        self.positions = cuda.to_device(np.arange(shape.tokens, dtype=np.int32))
        if shape.fused:  # the fused kernel's hook allocates Q and K; these serve the copy only
            self._src = cuda.device_array(shape.copy_bytes, dtype=np.uint8)
            self._dst = cuda.device_array(shape.copy_bytes, dtype=np.uint8)
            self._bind_copy()
            return
        rng = np.random.default_rng(seed)
        self.x = cuda.to_device(rng.standard_normal(shape.tokens * shape.hidden, dtype=np.float32))
        self.out = cuda.device_array_like(self.x)
        self._src, self._dst = self.x, self.out
        self._bind_copy()

    def _bind_copy(self):
        if SIMULATED:  # the sweep's plumbing is tested on the simulator with a fake timer
            self._memcpy = lambda dst, src, n, stream: self._dst.copy_to_device(self._src)
            self._src_ptr = self._dst_ptr = self._nbytes = None
            return
        from numba.cuda.cudadrv.driver import device_pointer, driver

        self._memcpy = driver.cuMemcpyDtoDAsync
        self._src_ptr, self._dst_ptr = device_pointer(self._src), device_pointer(self._dst)
        self._nbytes = self._src.nbytes

    def copy(self):
        """Device-to-device copy of the shape's bytes: cuMemcpyDtoDAsync on the default stream.

        Called on the driver directly with pointers taken once: numba's ``copy_to_device``
        spends ~100 us of host time per call in checks (and without a stream it is the
        synchronous cuMemcpyDtoD), long enough for the GPU to idle inside the events.
        """
        self._memcpy(self._dst_ptr, self._src_ptr, self._nbytes, 0)

    def problem(self):
        from ...problem import RopeProblem

        s = self.shape
        return RopeProblem(tokens=s.tokens, heads=1, head_dim=s.hidden, rotary_dim=s.hidden)

    def user_arrays(self):
        """(x, out, positions) as a user holds them: PyTorch tensors over the same memory when
        PyTorch is installed (the review's case), else the numba device arrays."""
        s = self.shape
        plain = (self.x.reshape(s.tokens, s.hidden), self.out.reshape(s.tokens, s.hidden),
                 self.positions)
        if SIMULATED:
            return plain
        try:
            import torch
        except ImportError:
            return plain
        return (torch.as_tensor(self.x, device="cuda").view(s.tokens, s.hidden),
                torch.as_tensor(self.out, device="cuda").view(s.tokens, s.hidden),
                torch.as_tensor(self.positions, device="cuda"))


# Variant options timed besides the defaults (the cos/sin cache is how vLLM and FlashInfer run
# RoPE); max_positions=None means "the shape's token count".
EXTRA_OPTIONS = {"freq_table": ({"cache": True, "max_positions": None},)}


def _options_label(options: dict) -> str:
    return ":cache" if options.get("cache") else ""


def variant_entries(names=None, precise: bool = False) -> list[Entry]:
    """Two rows per variant (and option set): the public call and the kernel alone.

    ``<name>`` times ``ropelab.rope(x, variant=name, positions=pos, out=out)`` exactly as a user
    calls it, on PyTorch tensors when PyTorch is installed.  ``<name>:kernel`` fires the same
    compiled, pre-packed launch with fixed pointers: the GPU work of the call and nothing else.
    Their difference is what the public path costs on the GPU's timeline.
    """
    from ... import kernels

    entries = []
    for name, variant in kernels.VARIANTS.items():
        if names and name not in names:
            continue
        for options in ({},) + EXTRA_OPTIONS.get(name, ()):
            for fm in ((True, False) if precise else (True,)):
                label = name + _options_label(options) + ("" if fm else ":precise")
                entries.append(Entry(label, "ropelab", _public_maker(name, options, fm),
                                     fastmath=fm))
                entries.append(Entry(label + ":kernel", "kernel",
                                     _kernel_maker(variant, options, fm), fastmath=fm))
    return entries


def _resolved(options: dict, tokens: int) -> dict:
    return {k: (tokens if v is None and k == "max_positions" else v) for k, v in options.items()}


def _public_maker(name: str, options: dict, fastmath: bool):
    def make(buf: Buffers):
        import ropelab

        x, out, pos = buf.user_arrays()
        opts = _resolved(options, buf.shape.tokens)
        call = lambda: ropelab.rope(x, variant=name, positions=pos, out=out,  # noqa: E731
                                    fastmath=fastmath, **opts)
        call()  # validates and compiles once; every timed call takes the cached path
        return call
    return make


def _kernel_maker(variant, options: dict, fastmath: bool):
    def make(buf: Buffers):
        from ...kernels.launch import bind

        problem = buf.problem()
        plan = variant.plan(problem, _resolved(options, problem.tokens), fastmath=fastmath)
        if SIMULATED:  # the sweep's plumbing is tested on the simulator: no driver to bind to
            from ...kernels.launch import launch

            return lambda: launch(plan, (buf.x, buf.out, buf.positions))
        n = problem.elements
        bound = bind(plan, ((n, 4), (n, 4), (problem.tokens, 4)))
        ptrs = tuple(device_ptr(a) for a in (buf.x, buf.out, buf.positions))
        return lambda: bound.fire(ptrs, 0)
    return make


def fused_entries(names=None) -> list[Entry]:
    """The fused kernel through ``ropelab.fused_qknorm_rope`` (at its default and at each
    heads-per-warp setting), and its kernel alone."""
    from ...kernels import fused_qknorm_rope as kmod

    # "fused_qknorm_rope" is every fused row; "fused_qknorm_rope:default" the public call at
    # its defaults alone; any other row is picked by its name.
    picked = [("fused_qknorm_rope" if n == "fused_qknorm_rope:default" else n)
              for n in (names or ()) if n.startswith("fused_qknorm_rope")]
    if names and not picked:
        return []
    entries = [Entry("fused_qknorm_rope", "ropelab_fused", _fused_maker(None), fastmath=True,
                     fused=True),
               Entry("fused_qknorm_rope:kernel", "kernel_fused", _fused_maker(None, kernel=True),
                     fastmath=True, fused=True)]
    # The NeoX (half-split) layout: by default a lane holds both elements of its pairs (every
    # dim rotated, 16-bit storage); the controlled row keeps the partner shuffles.
    entries.append(Entry("fused_qknorm_rope:neox", "ropelab_fused", _fused_maker(None, neox=True),
                         fastmath=True, fused=True))
    entries.append(Entry("fused_qknorm_rope:neox_shuffle", "kernel_fused",
                         _fused_maker(None, neox=True, options={"neox_split": False}),
                         fastmath=True, fused=True))
    # Controlled: one token per block (blocks of 2 warps at zimage's 30 head pairs).
    entries.append(Entry("fused_qknorm_rope:1token_blocks", "kernel_fused",
                         _fused_maker(None, options={"tokens_per_block": 1}),
                         fastmath=True, fused=True))
    # The long-context path: cos/sin read from float32 tables instead of computed.
    entries.append(Entry("fused_qknorm_rope:cache", "ropelab_fused", _fused_maker(None, cache=True),
                         fastmath=True, fused=True))
    for hpw in kmod.HEADS_PER_WARP_CHOICES:
        entries.append(Entry(f"fused_qknorm_rope_{hpw}head{'s' if hpw > 1 else ''}",
                             "ropelab_fused", _fused_maker(hpw), fastmath=True, fused=True))
    if names and "fused_qknorm_rope" not in names:  # single rows by name (a short GPU call)
        entries = [e for e in entries if e.name in picked]
    return entries


def fused_user_arrays(shape: Shape, seed: int = 0):
    """(qkv, q_weight, k_weight, positions) on the device as a PyTorch user holds them
    (``torch.bfloat16`` for bfloat16) when PyTorch is installed, else numba arrays (bfloat16
    as uint16 bit patterns)."""
    heads = (shape.heads_q, shape.heads_k, shape.heads_v or 0)
    host = ropelab_check.random_inputs(np.random.default_rng(seed), shape.tokens, heads,
                                       shape.head_dim, shape.dtype)
    try:
        import torch
    except ImportError:
        torch = None
    if SIMULATED or torch is None or not torch.cuda.is_available():  # a CPU build is no GPU
        return tuple(cuda.to_device(a) for a in host)
    dev = [torch.from_numpy(np.ascontiguousarray(a)).cuda() for a in host]
    if shape.dtype == "bfloat16":
        dev[:3] = [t.view(torch.bfloat16) for t in dev[:3]]
    return tuple(dev)


def fused_kwargs(shape: Shape) -> dict:
    return dict(num_heads_q=shape.heads_q, num_heads_k=shape.heads_k,
                num_heads_v=shape.heads_v or 0, head_dim=shape.head_dim,
                rotary_dim=shape.rotary_dim)


def _fused_maker(heads_per_warp, kernel: bool = False, cache: bool = False, neox: bool = False,
                 options=None):
    """``options``: kernel options the public call does not take (controlled rows); they time
    the kernel alone (``kernel=True``)."""
    kernel = kernel or options is not None

    def make(buf: Buffers):
        import ropelab

        if not buf.shape.fused:
            return None
        qkv, wq, wk, pos = fused_user_arrays(buf.shape)
        kw = fused_kwargs(buf.shape)
        if neox:
            kw.update(interleave=False)
        if cache:  # positions of fused_user_arrays are below 4096 (ropelab_check.random_inputs)
            kw.update(cache=True, max_positions=4096)
        # In place, so every repeat re-normalizes the previous output: values stay O(weight).
        call = lambda: ropelab.fused_qknorm_rope(qkv, q_weight=wq, k_weight=wk,  # noqa: E731
                                                 positions=pos, heads_per_warp=heads_per_warp, **kw)
        call()
        if not kernel:
            return call
        from ...ops import fused
        from ...ops.arrays import inspect_array
        from ...kernels import fused_qknorm_rope as kmod
        from ...kernels.launch import bind

        info = inspect_array(qkv, "qkv")
        problem = fused.build_problem(info, **kw)
        plan = kmod.VARIANT.plan(problem, dict(options or {}), aligned=info.ptr % 16 == 0)
        if SIMULATED:
            from ...ops.arrays import device_view
            from ...kernels.launch import launch

            words = np.uint32 if problem.storage == "bfloat16" else None
            views = [device_view(qkv, info, words)] + [
                device_view(a, inspect_array(a, "a")) for a in (wq, wk, pos)]
            return lambda: launch(plan, views)
        bound = bind(plan, fused.caller_sizes(problem))
        ptrs = tuple(device_ptr(a) for a in (qkv, wq, wk, pos))
        return lambda: bound.fire(ptrs, 0)
    return make


def copy_entry() -> Entry:
    return Entry("copy_d2d", "copy", lambda buf: buf.copy, fused=None)
