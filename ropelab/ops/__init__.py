"""The public operations and the one call engine behind them.

Each op module is a signature, its checks and its plans, and describes the call it validated
(:class:`~ropelab.ops.slots.Call`); :mod:`.call` runs every such description:

* :mod:`.rope` — ``ropelab.rope`` (plain RoPE) on the course's variants; :mod:`.rows` its
  16-bit / row-strided / ``cos_sin_cache`` calls on the rope_rows kernel, with the checks of
  :mod:`.rows_checks` (shared with :mod:`.qk` and the fused ops' ``cos_sin_cache``);
* :mod:`.qk` — ``ropelab.rope_qk``: q and k in place, one launch, on the rope_rows kernel;
* :mod:`.fused` — ``ropelab.fused_qknorm_rope``, the fused QK-RMSNorm + RoPE;
  :mod:`.fused_backward` — ``ropelab.fused_qknorm_rope_backward``, its gradients;
* :mod:`.slots` — what a description is: the plans and each array's role, and what the roles
  decide (which arrays must not overlap, the one refusal message, the kernels' views);
* :mod:`.call` — the engine: the cache key of a call shape and its fast path, the stream, the
  read-only and overlap refusals, the position policy, and the routes: :mod:`.host_route` for
  NumPy and simulator arrays, a cached ``DeviceCall`` for device arrays, whose buffers
  :mod:`.memory` makes in the caller's library;
* :mod:`.arrays` — what an input array is (and cheap metadata readers for the fast path);
* :mod:`.streams` — which CUDA stream a call runs on, validated before any launch.
"""
