"""ropelab's operations as PyTorch custom operators: ``torch.compile``, autograd, CUDA graphs.

``import ropelab`` never imports torch.  ``import ropelab.torch_ops`` does, and registers:

* ``torch.ops.ropelab.rope(x, positions, config) -> Tensor`` -- plain RoPE into a new tensor;
  differentiable (its backward is the inverse rotation, run by a ropelab kernel);
* ``torch.ops.ropelab.rope_out(x, positions, out!, config)`` -- the same into ``out`` (which may
  be ``x`` itself: in place); declares that it mutates ``out``;
* ``torch.ops.ropelab.fused_qknorm_rope(qkv!, q_weight, k_weight, positions, config,
  cos_sin_cache=None)`` -- the fused QK-RMSNorm + RoPE, in place on ``qkv``; declares that it
  mutates ``qkv``;
* ``torch.ops.ropelab.fused_qknorm_rope_functional(qkv, q_weight, k_weight, positions, config,
  cos_sin_cache=None) -> Tensor`` -- the same into a new tensor, differentiable in ``qkv`` and
  both weights through ``torch.ops.ropelab.fused_qknorm_rope_backward`` (ropelab's backward
  kernel); a user ``cos_sin_cache`` is read, never differentiated.

Users call this module's :func:`rope` and :func:`fused_qknorm_rope`, with the keywords of
``ropelab.rope`` / ``ropelab.fused_qknorm_rope`` (the way FlashInfer exposes its ops).  They
turn the keywords into the op's ``config`` string and pick the functional or the mutating op.
Torch dynamo cannot trace into ropelab's public functions (it hands the numba kernel 0-d
arrays), while these ops are opaque to it, so a model compiled with
``torch.compile(fullgraph=True)`` has no graph break.  Importing this module also teaches
dynamo to replace a call to ``ropelab.rope`` / ``ropelab.fused_qknorm_rope`` that it meets
while tracing by the op (torch >= 2.5), so code written against the public functions compiles
too; their eager calls are unchanged (and do not record a gradient: use this module's
:func:`rope` for training).

Non-tensor options are plain values, dicts, or ``ropelab.scaling`` objects.  Inside a compiled
function, build scaling objects outside it (a module attribute, or in a model's ``__init__``)
or pass Hugging Face style dicts: dynamo cannot rebuild a frozen dataclass constructed while
it traces.  Before torch 2.12 it cannot take one built outside either (seen on torch 2.11 on
the H200: "can't reconstruct arbitrary frozen dataclass instances"): there, pass the dict form
(``{"rope_type": "linear", "factor": 2.0}``) inside compiled code.

Where the op runs follows the tensors:

* CUDA tensors: the device path of ``ropelab.rope`` / ``fused_qknorm_rope``, on the tensors where
  they lie, on PyTorch's current stream (``with torch.cuda.stream(s):`` picks another), with no
  synchronization, so the op can be captured in a ``torch.cuda.CUDAGraph`` (after one warm-up
  call outside the capture, which compiles the kernel and uploads its tables).
* CPU tensors: the host path (NumPy views of the tensors' memory; on a machine without a GPU the
  kernel runs on the Numba CUDA simulator).  That is slow, and it exists so that registration,
  compilation and autograd are tested in CI without a GPU.

Tensors are passed through unchanged: dtypes (``torch.bfloat16`` as its 16-bit patterns on the
host path), strides and positions' dtype are ropelab's to accept or refuse, with its own errors.
How the ops carry their arguments, and how to add one: :mod:`ropelab.torch_ops.args`.

The package, one op per module: :mod:`~ropelab.torch_ops.registry` (how an op is defined, and
the checks every wrapper shares), :mod:`~ropelab.torch_ops.rope_op`,
:mod:`~ropelab.torch_ops.fused_op` (with its gradient) and :mod:`~ropelab.torch_ops.kv_op`
(the serving op, ``ropelab::fused_qknorm_rope_kv``).
"""

from __future__ import annotations

from . import args, fused_op, kv_op, registry, rope_op
from .args import decode, encode
from .fused_op import fused_qknorm_rope
from .kv_op import fused_qknorm_rope_kv
from .rope_op import BACKWARD_FALLBACK, backward_config, rope

__all__ = ["BACKWARD_FALLBACK", "args", "backward_config", "decode", "encode",
           "fused_op", "fused_qknorm_rope", "fused_qknorm_rope_kv", "kv_op", "registry", "rope",
           "rope_op"]
