"""The public operations and the one call engine behind them.

* :mod:`.rope` — ``ropelab.rope`` (plain RoPE): signature, docstring, its own checks;
* :mod:`.fused` — ``ropelab.fused_qknorm_rope``: the same for the fused QK-RMSNorm + RoPE;
* :mod:`.call` — the engine both use: cache key of a call shape, fast path, host/simulator/
  device dispatch, stream choice, ``check_errors``;
* :mod:`.arrays` — what an input array is (and cheap metadata readers for the fast path);
* :mod:`.streams` — which CUDA stream a call runs on, validated before any launch.
"""
