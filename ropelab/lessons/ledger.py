"""The seed-claims ledger: every claim of the two seed notes, a verdict, and where it is shown.

The seeds are a study note on three CUDA RoPE kernels measured on an RTX 4090 (claims ``A*``)
and a note on SGLang PR 21654, which made ``fused_qknorm_rope`` compute sin/cos once per pair
(claims ``B*``).  Verdicts are ``confirmed``, ``refuted``, ``nuanced`` (true in part, or true
for a different reason), or ``not recorded yet`` (needs a GPU record that ``data/`` lacks).

Where a verdict rests on a number, the number is computed here from the records under
``data/`` (bench, sincos_error, sincos_per_pair) or from the PTX census, not typed in: a
re-recorded run that changes a verdict shows up in notebook 07 (nbval) and in
``tests/test_ledger.py`` (the README's summary must agree).
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

from ..shapes import BIG_LABEL, SEED_LABELS

VERDICTS = ("confirmed", "refuted", "nuanced", "not recorded yet")
BIG = BIG_LABEL  # the shape large enough for L2 and launch cost to vanish
SEED_SHAPES = SEED_LABELS
DRAM_4090_GBPS = 1008  # RTX 4090 data sheet: 21 Gbit/s GDDR6X on a 384-bit bus
SEED_TABLE = {"4096x512": 0.00627, "4096x1024": 0.01009, "8192x512": 0.01005,
              "8192x1024": 0.01866}  # ms per call, the seed's f32 kernel on its 4090


@dataclass(frozen=True)
class Claim:
    id: str
    claim: str  # what the seed says, paraphrased in English
    verdict: str
    evidence: str  # the finding, with the notebook section or data/ record that shows it


def _records():
    from ..measure import records

    out = {}
    for kind in ("bench", "sincos_error", "sincos_per_pair"):
        try:
            out[kind] = records.load(kind)
        except FileNotFoundError:
            out[kind] = None
    return out


def _median(bench, variant, shape, dtype="float32") -> float:
    from .tables import bench_row

    return bench_row(bench, variant, shape, dtype)["median_us"]


def _ratios(bench, a, b, shapes=SEED_SHAPES + (BIG,)) -> list[float]:
    return [_median(bench, a, s) / _median(bench, b, s) for s in shapes]


def _per_pair_timing(record) -> Claim:
    text = ("B4", "sin/cos are SFU operations, so computing them per pair instead of per element "
                  "directly improves performance")
    if record is None:
        return Claim(*text, "not recorded yet",
                     "needs the GPU record data/sincos_per_pair/ (python -m "
                     "ropelab.measure.seed_claims --record); the census part is claim B3")
    rows = {(r["family"], r["kernel"], r["shape"]): r for r in record["rows"]}
    shapes = sorted({r["shape"] for r in record["rows"]})
    gains, beyond_noise = [], []
    for s in shapes:
        before, after = rows[("cuda_cpp", "per_element", s)], rows[("cuda_cpp", "per_pair", s)]
        gain = before["median_us"] / after["median_us"] - 1
        gains.append(gain)
        # A difference counts when it exceeds both rows' own 20-80% spread.
        noise = max((r["p80_us"] - r["p20_us"]) / r["median_us"] for r in (before, after))
        beyond_noise.append(gain > noise)
    numba = [rows[("numba", "per_element", s)]["median_us"] / rows[("numba", "per_pair", s)]["median_us"]
             for s in shapes]
    verdict = ("confirmed" if all(beyond_noise) else "refuted" if not any(beyond_noise)
               else "nuanced")
    return Claim(*text, verdict,
                 f"CUDA C++ (NVRTC) per-element / per-pair time: {min(gains):+.0%} to "
                 f"{max(gains):+.0%} over the production shapes, beyond the rows' 20-80% spread "
                 f"on {sum(beyond_noise)} of {len(shapes)}; the Numba pair (identical code, B3): "
                 f"{min(numba):.2f} to {max(numba):.2f}x (data/sincos_per_pair)")


def claims() -> list[Claim]:
    """Every claim with its verdict, computed from the records and the census."""
    from ..measure import census as ptx
    from .. import shapes
    from ..measure import seed_claims
    from .tables import share_of_roof

    rec = _records()
    bench = rec["bench"]
    census = ptx.census()
    sc = seed_claims.census()
    sfu = lambda compiler, kernel: seed_claims.census_row(sc, compiler, kernel)["sfu"]  # noqa: E731
    instr = lambda compiler, kernel: seed_claims.census_row(sc, compiler, kernel)  # noqa: E731
    pack4 = ptx.row(census, "pack4")["sfu"]
    flat = ptx.row(census, "flat")
    out = [
        Claim("A1", "RoPE turns each pair (x_2i, x_2i+1) by position x theta_i, a complex "
                    "multiply; low pairs turn fast, high pairs slowly",
              "confirmed", "notebook 00, sections 1-2: the complex form by hand equals "
                           "reference.rope; frequencies fall geometrically"),
        Claim("A2", "attention scores then depend only on the relative position",
              "confirmed", "notebook 00, section 3: the same offset at positions 3 to 50000 "
                           "gives the same score"),
    ]
    if bench is None:
        out.append(Claim("A3", "RoPE is compute-bound", "not recorded yet", "needs data/bench"))
    else:
        out += [
            Claim("A3", "RoPE is the first compute-bound kernel of the series: the "
                        "transcendentals are the main cost",
                  "refuted",
                  f"on the H200 the same math per pair runs at {share_of_roof(bench, 'pack4', BIG):.0%} "
                  f"of the copy roof with 128-bit loads (pack4) and {share_of_roof(bench, 'flat', BIG):.0%} "
                  f"with 32-bit loads (flat), {BIG}: bytes in flight set the speed (notebook 03, "
                  f"Timing; data/bench)"),
            Claim("A4", "a GPU has no integer divider: idx / N and idx % N cost about 20 "
                        "instructions each, ~40 per thread",
                  "nuanced",
                  f"no divider, true (census: flat has {flat['int_divrem_ops']}, each a long "
                  f"sequence); the remainder needs no second division; and removing the division "
                  f"(block2d) made no kernel faster: block2d takes "
                  f"{min(_ratios(bench, 'block2d', 'flat')):.2f}-{max(_ratios(bench, 'block2d', 'flat')):.2f}x "
                  f"flat's time (notebooks 01 and 02)"),
        ]
    sincos = rec["sincos_error"]
    if sincos is not None:
        fast = [r for r in sincos["rows"] if r["fastmath"]]
        small = max(max(r["max_abs_err_sin"], r["max_abs_err_cos"]) for r in fast if r["angle_hi"] <= 10)
        long_ctx = max(max(r["max_abs_err_sin"], r["max_abs_err_cos"]) for r in fast
                       if r["angle_lo"] >= 1e4 and r["angle_hi"] <= 1e5)
        out.append(Claim("A5", "with fast-math, sinf/cosf become the SFU's __sinf/__cosf: fast, "
                               "precision about 1e-6",
                         "nuanced",
                         f"SFU, yes (census: sin.approx, cos.approx); error up to {small:.0e} for "
                         f"angles below 10 rad but {long_ctx:.0e} at 1e4-1e5 rad, the angles of a "
                         f"long context (notebook 04, precision story; data/sincos_error)"))
    if bench is not None:
        table = _ratios(bench, "freq_table", "flat")
        out += [
            Claim("A6", "the frequency depends on the pair only; recomputing pow in every "
                        "thread is waste, production code precomputes a table",
                  "nuanced",
                  f"the table removes pow (census: freq_table has no lg2/ex2) but the time does not "
                  f"move: freq_table takes {min(table):.2f}-{max(table):.2f}x flat's time; the "
                  f"float64-built cos/sin cache is what buys precision (notebook 04)"),
            Claim("A7", "each thread reads two adjacent floats; a warp covers 64 consecutive "
                        "floats, so the accesses coalesce and efficiency is fine",
                  "confirmed",
                  f"each load instruction uses half of 8 sectors and the other instruction the "
                  f"other half (notebook 00, coalescing); flat takes "
                  f"{_median(bench, 'flat', BIG) / _median(bench, 'cuda_flat', BIG):.2f}x the "
                  f"time of its CUDA C++ twin on {BIG} (notebook 01)"),
            Claim("A8", "v2 (block = row, thread = pair) gets its coordinates for free and looks "
                        "better across the board",
                  "refuted",
                  f"block2d is slower than flat on every shape ({min(_ratios(bench, 'block2d', 'flat')):.2f}"
                  f"-{max(_ratios(bench, 'block2d', 'flat')):.2f}x its time; notebook 02)"),
        ]
    out.append(Claim("A9", "v2 launches hidden/2 threads per block: it fails past 1024 threads",
                     "confirmed", "CUDA allows 1024 threads per block; ropelab's block2d loops "
                                  "past it and refuses larger blocks before launch (notebook 02, "
                                  "Where it breaks)"))
    out.append(Claim("A10", "x4 pack: the two pairs of a thread have different frequencies, so "
                            "none of its transcendental calls can be shared",
                     "nuanced",
                     f"census of pack4: {pack4}: the compiler shares the one lg2 of the base, "
                     f"nothing else (notebook 03, Census)"))
    if bench is not None:
        gain = 1 - _median(bench, "pack4", BIG) / _median(bench, "flat", BIG)
        implied = [2 * int(s.split("x")[0]) * int(s.split("x")[1]) * 4 / (ms * 1e-3) / 1e9
                   for s, ms in SEED_TABLE.items()]
        complex_factor = _ratios(bench, "torch_complex_seed", "flat")
        complex_rows = [r for r in bench["rows"] if r["variant"] == "torch_complex_seed"]
        host_bound = sum(bool(r["host_bound"]) for r in complex_rows)
        fused_gain = _ratios(bench, "torch_cached", "torch_compile")
        out += [
            Claim("A11", "x4 pack is only ~2% faster, which proves RoPE compute-bound: the "
                         "ceiling of memory optimizations",
                  "refuted",
                  f"on {BIG} pack4 takes {gain:.0%} less time than flat and reaches the copy; the "
                  f"seed's 2% was measured on L2-resident, launch-bound calls (notebooks 03 and 07)"),
            Claim("A12", "to go faster, precompute the frequency table (no powf) and use "
                         "__sincosf, not wider loads",
                  "refuted", "wider loads are what reached the roof (A11); the table left the time "
                             "unchanged (A6); __sincosf saves no SFU work (A14)"),
            Claim("A13", "the PyTorch complex reference is 7-8 separate kernels and 135x slower "
                         "than the handwritten kernel",
                  "nuanced",
                  f"measured {min(complex_factor):.0f}x to {max(complex_factor):.0f}x flat's time "
                  f"on the H200, growing with the shape; {host_bound} of its {len(complex_rows)} "
                  f"rows are host-bound: it builds the angle table on the CPU on every call "
                  f"(notebook 07, sections 3 and 5; data/bench)"),
        ]
    nvrtc_sincos, nvrtc_separate = sfu("nvrtc", "sincosf_intrinsic"), sfu("nvrtc", "sinf_and_cosf")
    out.append(Claim("A14", "__sincosf computes sin and cos at once: half the SFU instructions of "
                            "separate calls",
                     "refuted" if nvrtc_sincos == nvrtc_separate else "nuanced",
                     f"NVRTC with --use_fast_math: __sincosf compiles to {nvrtc_sincos}, "
                     f"__sinf + __cosf to {nvrtc_separate}; Numba has no sincos and emits one "
                     f"sin.approx and one cos.approx per angle (census; notebook 07, ledger)"))
    if bench is not None:
        out += [
            Claim("A15", "the 4090 table (0.006 ms for 16 MB) measures the kernels",
                  "refuted",
                  f"those times imply {min(implied) / DRAM_4090_GBPS:.1f}-{max(implied) / DRAM_4090_GBPS:.1f}x "
                  f"the 4090's DRAM bandwidth: L2-resident data and launch cost (notebook 07, "
                  f"section 1)"),
            Claim("A16", "fusion pays because it removes memory round trips between kernels",
                  "confirmed",
                  f"eager PyTorch's cached-table RoPE (one kernel per operation) takes "
                  f"{min(fused_gain):.1f}-{max(fused_gain):.1f}x the time of the same formula "
                  f"under torch.compile, which fuses the chain (data/bench); notebook 06 fuses "
                  f"RMSNorm into RoPE"),
        ]
    flux = shapes.PRODUCTION_SHAPES["flux_1024"]
    per_el_n, per_pair_n = sfu("nvrtc", "sglang_per_element"), sfu("nvrtc", "sglang_per_pair")
    numba_same = instr("numba", "per_element")["instructions"] == instr("numba", "per_pair")["instructions"]
    runtime, off, on = (instr("numba", k) for k in ("per_pair_yarn_runtime", "per_pair",
                                                    "per_pair_yarn_on"))
    out += [
        Claim("B1", "fused_qknorm_rope fuses RMSNorm and RoPE of the Q and K heads into one kernel",
              "confirmed", "ropelab rebuilt it from the formulas and checks it against a float64 "
                           "reference, V untouched (notebook 06)"),
        Claim("B2", "in interleaved (GPT-J) RoPE the two elements of a pair share one "
                    "frequency and one angle",
              "confirmed", "notebook 00, sections 1 and 4 (reference.pair_indices)"),
        Claim("B3", "before the PR powf and __sincosf ran for every element; once per pair "
                    "halves these calls",
              "nuanced",
              f"in the source, yes; compiled, nvcc's front end (NVRTC) already merges some: per "
              f"lane of 2 pairs the per-element form keeps sin {per_el_n.get('sin')}, cos "
              f"{per_el_n.get('cos')} against {per_pair_n.get('sin')} and {per_pair_n.get('cos')}; "
              + ("NVVM merges them all (Numba's per-element build is the per-pair build)"
                 if numba_same else "NVVM does not merge them")
              + " (census of ropelab.measure.seed_claims; notebook 07, ledger)"),
        _per_pair_timing(rec["sincos_per_pair"]),
        Claim("B5", "if constexpr (yarn) instead of a runtime if (factor != 1.0f) removes the "
                    "branch at compile time",
              "confirmed",
              f"Numba's equivalent is a closure constant: the build without YaRN has "
              f"{off['instructions']} PTX instructions and {off['branches']} branch, with YaRN "
              f"{on['instructions']}; the runtime test keeps both versions: {runtime['instructions']} "
              f"instructions, {runtime['branches']} branches (notebook 07, ledger)"),
        Claim("B6", "the production shapes flux_1024 (4096 tokens, 24/24/24 heads of 128), "
                    "qwen_image_1024 (32 heads), zimage_1024 (30 heads)",
              "confirmed" if (flux.tokens, flux.heads_q, flux.head_dim) == (4096, 24, 128)
              else "refuted",
              "ropelab.shapes.PRODUCTION_SHAPES holds them; the bench times the fused kernel on "
              "them (notebook 06)"),
    ]
    return out


def format_ledger(items=None, width: int = 100) -> str:
    """The ledger as text: one block per claim (id, verdict, claim, evidence), wrapped."""
    items = claims() if items is None else items
    lines = []
    for c in items:
        lines.append(f"{c.id:<4} {c.verdict.upper()}")
        lines += textwrap.wrap(f"claim: {c.claim}", width, initial_indent="     ",
                               subsequent_indent="       ")
        lines += textwrap.wrap(f"shown: {c.evidence}", width, initial_indent="     ",
                               subsequent_indent="       ")
    counts = {v: sum(c.verdict == v for c in items) for v in VERDICTS}
    lines.append(", ".join(f"{n} {v}" for v, n in counts.items() if n))
    return "\n".join(lines)


def markdown_table(items=None) -> str:
    """The README's summary table (id, claim, verdict)."""
    items = claims() if items is None else items
    rows = ["| # | the seed claims | verdict |", "|---|---|---|"]
    # Markdown would read "__sinf/__cosf" as bold and "x_2i" as the start of italics.
    rows += [f"| {c.id} | {c.claim.replace('_', chr(92) + '_')} | {c.verdict} |" for c in items]
    return "\n".join(rows)


def census_table(kernels) -> str:
    """PTX counts of ``[(compiler, kernel)]`` from :func:`ropelab.measure.seed_claims.census`."""
    from ..measure import seed_claims

    doc = seed_claims.census()
    head = f"{'compiler':<9} {'kernel':<30} {'instr':>6} {'branches':>9}  special functions"
    lines = [head, "-" * len(head)]
    for compiler, kernel in kernels:
        r = seed_claims.census_row(doc, compiler, kernel)
        sfu = " ".join(f"{k}:{v}" for k, v in sorted(r["sfu"].items()))
        lines.append(f"{compiler:<9} {kernel:<30} {r['instructions']:>6} {r['branches']:>9}  {sfu}")
    return "\n".join(lines)


def per_pair_table() -> str:
    """The GPU record of per-element against per-pair sin/cos, or a line saying it is missing."""
    from ..measure import records
    from ..measure import seed_claims
    from .tables import provenance, spread

    try:
        record = records.load(seed_claims.RECORD_KIND)
    except FileNotFoundError:
        return (f"not recorded yet: no data/{seed_claims.RECORD_KIND}/ record; on a GPU host run "
                f"python -m ropelab.measure.seed_claims --record")
    head = (f"{'shape':<20} {'family':<9} {'kernel':<12} {'median us':>10} {'p20-p80 us':>13} "
            f"{'of copy':>8}")
    lines = [provenance(record), head, "-" * len(head)]
    for r in sorted(record["rows"], key=lambda r: (r["shape"], r["family"], r["kernel"])):
        lines.append(f"{r['shape']:<20} {r['family']:<9} {r['kernel']:<12} {r['median_us']:>10.1f} "
                     f"{spread(r):>13} {100 * r['frac_of_copy']:>7.1f}%")
    return "\n".join(lines)


def complex_factor_table(bench) -> str:
    """The seed's PyTorch complex reference against ``flat`` per shape, from the bench record,
    beside the seed's own factor on its 4090."""
    from .tables import bench_row

    seed_factor = 0.843 / SEED_TABLE["4096x512"]
    head = f"{'shape':<12} {'torch complex us':>17} {'flat us':>8} {'factor':>7}  host-bound"
    lines = [f"the seed (RTX 4090, 4096x512): 0.843 ms / 0.00627 ms = {seed_factor:.0f}x",
             head, "-" * len(head)]
    for s in SEED_SHAPES + (BIG,):
        t, f = bench_row(bench, "torch_complex_seed", s), bench_row(bench, "flat", s)
        lines.append(f"{s:<12} {t['median_us']:>17,.1f} {f['median_us']:>8.1f} "
                     f"{t['median_us'] / f['median_us']:>6.0f}x  {'yes' if t['host_bound'] else 'no'}")
    return "\n".join(lines)
