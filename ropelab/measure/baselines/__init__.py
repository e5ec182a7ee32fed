"""Baselines timed beside ropelab's kernels on a GPU host, when their packages are installed.

* ``torch_copy``: ``out.copy_(x)`` in PyTorch, a cross-check of the copy roof.
* ``torch_complex_seed``: the seed's eager PyTorch reference, rebuilt here from its recipe:
  frequencies and the position-frequency outer product on the CPU, moved to the GPU on every
  call, ``torch.polar`` for the unit complex numbers, one complex multiply on the
  ``view_as_complex`` of x.  The CPU work and the host-to-device copy are part of what the
  seed timed, so they are part of this row.
* ``torch_cached``: eager PyTorch with cos/sin tables ``[tokens, hidden/2]`` built once and
  kept on the GPU; each call is the rotation alone.
* ``torch_compile``: ``torch.compile`` of ``torch_cached``'s rotation (one fused Triton kernel).
* ``cuda_fused``, ``cuda_fused_neox``: ``fused_twin.cu`` (:mod:`.twin`), the CUDA C++ twin of the fused
  QK-RMSNorm + RoPE kernel at its default mapping (GPT-J and NeoX pairs), on the production
  shapes; :func:`check_twin` compares it with the float64 reference on the GPU.
* ``cuda_flat``, ``cuda_flat_i32``, ``cuda_float4``: CUDA C++ compiled by NVRTC through CuPy
  (``RawModule``, ``--use_fast_math`` like the seed).  ``cuda_flat`` is the twin of ropelab's
  ``flat``: same index types (int64, as numba's ``cuda.grid(1)``), same float32 formulas, a
  bounds guard and a positions array.  ``cuda_flat_i32`` indexes with ``int`` as the seed does.
  ``cuda_float4`` is the twin of ``pack4`` with the seed's ``float4`` loads and stores (it
  needs ``hidden % 4 == 0``, which every benchmark shape meets).

torch and CuPy are optional (``pip install -e ".[baselines]"``); a missing one only removes its
rows.  All work goes to the legacy default stream, where ropelab's events are recorded.

The package: the CUDA C++ sources as ``.cu`` files (:mod:`.sources` reads them, and names the
ropelab kernel each one twins), the fused kernel's twin (:mod:`.twin`), PyTorch reference
formulas (:mod:`.torch_refs`) and which optional packages import (:mod:`.optional`).  Their
rows in the sweep are :mod:`ropelab.measure.bench.baselines`.
"""

from .optional import available
from .sources import CUDA_SOURCE, FUSED_TWIN_SOURCE, TWINS
from .torch_refs import torch_complex_seed, torch_rotate, torch_tables
from .twin import (FUSED_TWIN_STORAGE, NVRTC_OPTIONS, TwinCase, check_twin,
                   compile_fused_twin_ptx, fused_twin_name, fused_twin_names, twin_sass_counts)

__all__ = ["CUDA_SOURCE", "FUSED_TWIN_SOURCE", "FUSED_TWIN_STORAGE", "NVRTC_OPTIONS", "TWINS",
           "TwinCase", "available", "check_twin", "compile_fused_twin_ptx", "fused_twin_name",
           "fused_twin_names", "torch_complex_seed", "torch_rotate", "torch_tables",
           "twin_sass_counts"]
