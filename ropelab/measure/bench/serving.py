"""The serving op on a GPU: ``ropelab.fused_qknorm_rope_kv`` against a copy of the same bytes,
ropelab's fused op followed by torch's scatter, and ``torch.compile`` of the whole chain.

Run on a GPU host::

    python -m ropelab.measure.bench.serving            # print the table
    python -m ropelab.measure.bench.serving --record   # and save it under data/serving/
    python -m ropelab.measure.bench.serving --dry-run  # CPU: tiny cases, every launcher once

Cases (:data:`.serving_cases.CASES`), each with a bfloat16 and an FP8 e4m3 cache, bfloat16
qkv, CUDA tensors, the public call: prefill of 4 requests x 1024 tokens with FLUX's heads
(24/24/24, GPT-J pairs) and Qwen3-8B's (32/8/8, NeoX), pages of 16 slots from a shuffled pool;
decode of 64 requests x 1 token at positions drawn below 32k, and of 1 request x 1 token.
Prefill rows are timed by :class:`.timer.Timer` (a cold L2 before each call, CUDA events,
medians).  Decode rows capture 20 calls in one CUDA graph (after warm-up calls) and time its
replays the same way; a row's times are per call (replay / 20).  The byte model is in
:mod:`.serving_cases`; ``frac_of_copy`` compares with the copy of the same bytes in the same
run, ``vs_op`` divides a row's median by the op's.

Before timing, every launcher runs once from the same inputs on its own copies, and its caches
are compared with the op's: ``cache_bytes_differing`` (0: bit for bit) and ``cache_max_diff``
(the largest difference of the values the cache entries stand for).
"""

from __future__ import annotations

import argparse
import sys

from .kinds import SERVING, format_rows
from .record import Recording, method_text, run_meta
from .serving_cases import (CASES, LAUNCHERS, SCALES, Case, byte_model, copy_launcher,
                            tensors)

CACHE_DTYPES = ("bfloat16", "fp8")
DRY_CASES = (Case("prefill tiny 2+3", "prefill", (2, 1, 1), 64, True, (2, 3)),
             Case("decode tiny 2x1", "decode", (2, 1, 1), 64, False, (1, 1), graph_calls=2,
                  pool_blocks=8))
NOTES = ("qkv bfloat16; slots vLLM's (block * 16 + offset); caches vLLM's flash layout",
         "decode rows: 20 calls captured in one CUDA graph after warm-up, per-call times",
         "compiled_chain: torch.compile(fullgraph=True, dynamic=False) of the chain in torch, "
         "compiled and warmed up before timing",
         "vs_op = median / the op's median in the same case and cache dtype")


def _values(cache, fp8: bool):
    """A cache's entries as float32 (FP8 entries decoded, not scaled: every launcher has the
    same scales)."""
    import torch

    return cache.view(torch.float8_e4m3fn).float() if fp8 else cache.float()


def compare(got: dict, want: dict, fp8: bool) -> tuple[int, float]:
    """(cache bytes that differ, largest difference of the values) between two runs."""
    import torch

    differing, worst = 0, 0.0
    for name in ("k_cache", "v_cache"):
        a, b = got[name], want[name]
        differing += int((a.contiguous().view(torch.uint8)
                          != b.contiguous().view(torch.uint8)).sum().item())
        va, vb = _values(a, fp8), _values(b, fp8)
        both_nan = torch.isnan(va) & torch.isnan(vb)  # an FP8 NaN byte both left or both wrote
        diff = torch.where(both_nan, torch.zeros_like(va), (va - vb).abs())
        diff = torch.nan_to_num(diff, nan=float("inf"))
        worst = max(worst, float(diff.max().item()))
    return differing, worst


def _graphed(launch, calls: int):
    """Replay of one CUDA graph of ``calls`` calls of ``launch`` (warmed up on a side stream)."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            launch()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            launch()
    torch.cuda.synchronize()
    return graph.replay


def case_launchers(case: Case, fp8: bool, device: str, backend: str = "inductor",
                   calls=None) -> tuple[dict, dict]:
    """``({call: launcher}, {call: (cache bytes differing, max diff)})``: each launcher on its
    own copy of one set of inputs, run once (compiling what compiles) and compared with the op."""
    base = tensors(case, fp8, device)
    launchers, state, checks = {}, {}, {}
    for name, make in LAUNCHERS.items():
        if calls is not None and name not in calls and name != "op":
            continue
        state[name] = {k: v.clone() for k, v in base.items()}
        extra = {"backend": backend} if name == "compiled_chain" else {}
        try:
            launchers[name] = make(case, state[name], fp8, **extra)
            launchers[name]()
        except Exception as exc:  # a baseline that cannot run here: say so, time the rest
            if name == "op":
                raise
            print(f"{case.name}: {name} skipped: {type(exc).__name__}: {exc}", file=sys.stderr)
            launchers.pop(name, None)
            del state[name]
    for name in launchers:
        checks[name] = compare(state[name], state["op"], fp8)
    return launchers, checks


def run(record: bool = False, out=None, cases=CASES, cache_dtypes=CACHE_DTYPES,
        calls=None) -> list[dict]:
    """Time every case on the GPU; with ``record``, save the rows (``out/serving/`` for a data
    root ``out``) after each case, so a time limit keeps what finished."""
    import torch

    from .stats import host_fields, quantiles, summarize
    from .timer import BenchError, Timer, require_gpu

    require_gpu()
    if not torch.cuda.is_available():
        raise BenchError("PyTorch has no CUDA device here: the serving bench needs one")
    timer = Timer()
    recording = Recording("serving", method=method_text(timer, *NOTES),
                          meta=run_meta(timer, torch=torch.__version__), out=out)
    rows = []
    for case in cases:
        for cache_dtype in cache_dtypes:
            fp8 = cache_dtype == "fp8"
            nbytes = byte_model(case, 1 if fp8 else 2)
            try:
                launchers, checks = case_launchers(case, fp8, "cuda", calls=calls)
            except Exception as exc:  # the op itself failed here: say so, keep going
                print(f"{case.name} {cache_dtype}: {type(exc).__name__}: {exc}", file=sys.stderr)
                continue
            launchers["copy"] = copy_launcher(nbytes, "cuda")
            checks["copy"] = (None, None)
            timed = {}
            for name, launch in launchers.items():
                n = case.graph_calls
                target = _graphed(launch, n) if n else launch
                samples = [s / (n or 1) for s in timer.time(target)]
                timed[name] = (samples, host_fields(timer.last_host_us, timer.fill_us))
            copy = summarize(timed["copy"][0], nbytes)
            op_median = quantiles(timed["op"][0])[0]
            for name, (samples, host) in timed.items():
                timing = summarize(samples, nbytes, copy["gbps"])
                rows.append(SERVING.row(
                    timing, **host, case=case.name, regime=case.regime, call=name,
                    tokens=case.tokens, requests=len(case.lengths), heads_q=case.heads[0],
                    heads_k=case.heads[1], head_dim=case.head_dim,
                    layout="gptj" if case.interleave else "neox", dtype="bfloat16",
                    cache_dtype=cache_dtype, graph_calls=case.graph_calls,
                    vs_op=round(timing["median_us"] / op_median, 4),
                    cache_bytes_differing=checks[name][0], cache_max_diff=checks[name][1]))
            del launchers, timed  # the graphs and the copies of this case's tensors
            torch.cuda.empty_cache()
            if record:
                recording.save(rows)
            print(format_rows([r for r in rows if r["case"] == case.name
                               and r["cache_dtype"] == cache_dtype], "serving"), flush=True)
    print(format_rows(rows, "serving"))
    print(verdicts(rows))
    if record and recording.path:
        print(f"recorded {recording.path}")
    return rows


def verdicts(rows: list[dict]) -> str:
    """One line per case and cache dtype: each target met or missed."""
    lines = []
    for key in dict.fromkeys((r["case"], r["cache_dtype"]) for r in rows):
        got = {r["call"]: r for r in rows if (r["case"], r["cache_dtype"]) == key}
        op, copy = got.get("op"), got.get("copy")
        if op is None or copy is None:
            continue
        parts = []
        if op["regime"] == "prefill":
            parts.append(f"op {100 * op['frac_of_copy']:.1f}% of copy (target 90%)")
        else:
            gap = op["median_us"] - copy["median_us"]
            parts.append(f"op - copy {gap:+.2f} us (target <= 0.5)")
        for name, target in (("fused+scatter", 1.5), ("compiled_chain", 5.0)):
            if name in got:
                ok = "met" if got[name]["vs_op"] >= target else "MISSED"
                parts.append(f"{name} {got[name]['vs_op']:.2f}x op ({ok}, target {target}x)")
        lines.append(f"{key[0]} {key[1]}: " + "; ".join(parts))
    return "\n".join(lines)


def dry_run(cases=DRY_CASES, backend: str = "aot_eager") -> list[dict]:
    """On CPU tensors (the simulator): every launcher of tiny cases once, compared with the op;
    rows without times.  The launchers' code paths, not their speed."""
    rows = []
    for case in cases:
        for cache_dtype in CACHE_DTYPES:
            fp8 = cache_dtype == "fp8"
            _, checks = case_launchers(case, fp8, "cpu", backend=backend)
            for name, (differing, worst) in checks.items():
                rows.append(dict(case=case.name, cache_dtype=cache_dtype, call=name,
                                 bytes_moved=byte_model(case, 1 if fp8 else 2),
                                 cache_bytes_differing=differing, cache_max_diff=worst))
    for r in rows:
        print(f"{r['case']:<18} {r['cache_dtype']:<9} {r['call']:<15} bytes {r['bytes_moved']:>7}"
              f"  differing {r['cache_bytes_differing']:>4}  max diff {r['cache_max_diff']:.3g}")
    return rows


def main(argv=None) -> int:
    from .timer import refused

    parser = argparse.ArgumentParser(prog="python -m ropelab.measure.bench.serving",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--record", action="store_true", help="save the rows under data/serving/")
    parser.add_argument("--out", default=None, help="data root (default the repo's data/)")
    parser.add_argument("--dry-run", action="store_true",
                        help="CPU tensors, tiny cases, each launcher once (no timing)")
    args = parser.parse_args(argv)
    if args.dry_run:
        rows = dry_run()
        return 0 if all(r["cache_bytes_differing"] == 0 for r in rows
                        if r["call"] == "fused+scatter") else 1
    if refused(parser.prog):
        return 2
    run(record=args.record, out=args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

__all__ = ["SCALES", "compare", "dry_run", "run", "verdicts"]
