"""The public operations and the one call engine behind them.

* :mod:`.rope` — ``ropelab.rope`` (plain RoPE): signature, docstring, its own checks;
* :mod:`.fused` — ``ropelab.fused_qknorm_rope``: the same for the fused QK-RMSNorm + RoPE;
* :mod:`.qk` — ``ropelab.rope_qk``: q and k in place, one launch, on the rope_rows kernel;
* :mod:`.rows` — ``ropelab.rope``'s 16-bit / row-strided / ``cos_sin_cache`` calls, routed
  there from :mod:`.rope` (same kernel); :mod:`.rows_checks` their checks (shared with
  ``cos_sin_cache`` of :mod:`.fused`); :mod:`.rows_host` their host route (row spans);
* :mod:`.call` — the engine all of them use: cache key of a call shape, fast path, host/simulator/
  device dispatch, stream choice, ``check_errors``;
* :mod:`.arrays` — what an input array is (and cheap metadata readers for the fast path);
* :mod:`.streams` — which CUDA stream a call runs on, validated before any launch.
"""
