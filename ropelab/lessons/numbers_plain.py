"""Numbers the prose quotes about the plain RoPE kernels (notebooks 01-03, 07, the README):
the bench, the Nsight Compute profile, the public call's cost, and the seed's own table.
Each entry reads its record; see :mod:`ropelab.lessons.numbers`."""

from __future__ import annotations

from .ledger import DRAM_4090_GBPS, SEED_TABLE
from .numbers_core import BIG, SEED_SHAPES, Rendered, newest, number, pct, span, times_word
from .tables import bench_row, roof_gbps

# ---------------------------------------------------------------- bench (notebooks 01-03, 07)

def _bench():
    return newest("bench")


def _roof_share(variant, shape=BIG):
    path, rec = _bench()
    return Rendered(pct(bench_row(rec, variant, shape)["gbps"] / roof_gbps(rec), 1), path)


@number("bench.pack4_scalar_roof_pct")
def bench_pack4_scalar_roof_pct():
    return _roof_share("pack4_scalar")


@number("bench.pack4_roof_pct")
def bench_pack4_roof_pct():
    return _roof_share("pack4")


@number("bench.seed_shapes_us")
def bench_seed_shapes_us():
    """How long the ropelab kernels and the copy last at the seed's sizes."""
    path, rec = _bench()
    times = [bench_row(rec, v, s)["median_us"] for v in ("copy_d2d", "flat", "pack4", "pack4_scalar")
             for s in SEED_SHAPES]
    return Rendered(span(times, lambda t: f"{t:.0f}", sep=" to ", unit=" us"), path)


@number("bench.small_copy_us")
def bench_small_copy_us():
    path, rec = _bench()
    return Rendered(f"{bench_row(rec, 'copy_d2d', '4096x512')['median_us']:.0f} us", path)


# The README's table: each row at the 1 GB shape, its median and its share of the roof.
README_TABLE = ("copy_d2d", "pack4", "cuda_float4", "pair_sincos", "flat", "cuda_flat", "freq_table",
                "block2d", "pack4_scalar", "torch_compile", "freq_table:cache", "torch_complex_seed")


def _big_us(variant):
    path, rec = _bench()
    return Rendered(f"{bench_row(rec, variant, BIG)['median_us']:,.0f}", path)


def _big_share(variant):
    """Share of the copy of the same bytes timed in the same run (the record's frac_of_copy)."""
    path, rec = _bench()
    share = bench_row(rec, variant, BIG)["frac_of_copy"]
    return Rendered(pct(share, 1 if share < 0.01 else 0), path)


for _variant in README_TABLE:
    number(f"bench.big_us.{_variant}")(lambda v=_variant: _big_us(v))
    number(f"bench.big_share.{_variant}")(lambda v=_variant: _big_share(v))


@number("bench.pack4_kernel_big_us")
def bench_pack4_kernel_big_us():
    path, rec = _bench()
    return Rendered(f"{bench_row(rec, 'pack4:kernel', BIG)['median_us']:.0f} us", path)


@number("bench.torch_compile_seed_us")
def bench_torch_compile_seed_us():
    path, rec = _bench()
    return Rendered(f"{bench_row(rec, 'torch_compile', '4096x512')['median_us']:.1f} us", path)


def _public_vs_kernel(shapes=None):
    """The largest gap between a public call's time and the same launch fired alone."""
    path, rec = _bench()
    rows = {(r["variant"], r["shape"], r["dtype"]): r["median_us"] for r in rec["rows"]}
    gaps = [abs(rows[(v[:-len(":kernel")], s, d)] / t - 1) for (v, s, d), t in rows.items()
            if v.endswith(":kernel") and (v[:-len(":kernel")], s, d) in rows
            and (shapes is None or s in shapes)]
    return Rendered(pct(max(gaps), 1), path)


@number("bench.public_vs_kernel_pct")
def bench_public_vs_kernel_pct():
    return _public_vs_kernel()


@number("bench.public_vs_kernel_big_pct")
def bench_public_vs_kernel_big_pct():
    return _public_vs_kernel((BIG,))


def _launcher_us(prefix: str) -> tuple[str, float]:
    path, rec = newest("launch_overhead")
    row = next(r for r in rec["rows"] if r["launcher"].startswith(prefix))
    return path, row["us_per_launch"]


@number("launch.rope_torch_us")
def launch_rope_torch_us():
    path, us = _launcher_us("ropelab.rope(flat) torch arrays")
    return Rendered(f"{us:.0f} us", path)


@number("launch.cupy_flat_us")
def launch_cupy_flat_us():
    path, us = _launcher_us("cupy RawKernel cuda_flat")
    return Rendered(f"{us:.0f} us", path)


# -------------------------------------------------------------------- profile (notebook 03)

def _profile_row(rec, case):
    return next(r for r in rec["rows"] if r["case"] == case)


@number("profile.scalar_over_flat_sectors")
def profile_scalar_over_flat_sectors():
    """How many more sectors one 4-byte access of pack4_scalar touches than one of flat: the
    store column, which holds only the x/out accesses (the load column averages in the
    positions loads, one sector each)."""
    path, rec = newest("profile")
    scalar = _profile_row(rec, f"pack4_scalar@large_{BIG}")["st_sectors_per_request"]
    flat = _profile_row(rec, f"flat@large_{BIG}")["st_sectors_per_request"]
    return Rendered(times_word(scalar / flat), path)


@number("profile.scalar_and_flat_store_sectors")
def profile_scalar_and_flat_store_sectors():
    path, rec = newest("profile")
    scalar = _profile_row(rec, f"pack4_scalar@large_{BIG}")["st_sectors_per_request"]
    flat = _profile_row(rec, f"flat@large_{BIG}")["st_sectors_per_request"]
    return Rendered(f"{scalar:.0f} against {flat:.0f}", path)



# ------------------------------------------------------------- launch and public path (07, README)

def _public(column, side, call=None, shape=None):
    path, rec = newest("public_path")
    rows = [r for r in rec["rows"] if r["side"] == side and r[column] is not None
            and (call is None or r["call"] == call) and (shape is None or r["shape"] == shape)]
    return Rendered(span([r[column] for r in rows], lambda v: f"{v:.0f}", sep=" to ", unit=" us"), path)


@number("public.rope_host_before_us")
def public_rope_host_before_us():
    return _public("host_us", "before", "rope flat", "64x512")


@number("public.rope_host_after_us")
def public_rope_host_after_us():
    return _public("host_us", "after", "rope flat", "64x512")


@number("public.fused_events_before_us")
def public_fused_events_before_us():
    return _public("event_us", "before", "fused_qknorm_rope bf16", "4096xflux_1024")


@number("public.fused_events_after_us")
def public_fused_events_after_us():
    return _public("event_us", "after", "fused_qknorm_rope bf16", "4096xflux_1024")


@number("public.pack4_events_before_us")
def public_pack4_events_before_us():
    return _public("event_us", "before", "rope pack4", BIG)


@number("public.pack4_events_after_us")
def public_pack4_events_after_us():
    return _public("event_us", "after", "rope pack4", BIG)


@number("public.flat_small_events_before_us")
def public_flat_small_events_before_us():
    return _public("event_us", "before", "rope flat", "4096x512")


@number("public.flat_small_events_after_us")
def public_flat_small_events_after_us():
    return _public("event_us", "after", "rope flat", "4096x512")


# ------------------------------------------------------------------ the seed's note (07)

SEED_NOTE = "the seed's note (its RTX 4090 table, quoted in ropelab/lessons/ledger.py)"
# The seed's other columns and its headline factor, as its note states them (its f32 column is
# ledger.SEED_TABLE, which notebook 07's computations use).
SEED_PACK4_MS = {"4096x512": 0.00602, "8192x1024": 0.01843}
SEED_TORCH_MS = {"4096x512": 0.843, "8192x1024": 2.525}
SEED_COMPLEX_FACTOR = 135


def _seed_ms(value: float) -> Rendered:
    return Rendered(f"{value:g} ms", SEED_NOTE)


for _shape in ("4096x512", "8192x1024"):
    number(f"seed.pack4_{_shape}_ms")(lambda s=_shape: _seed_ms(SEED_PACK4_MS[s]))
    number(f"seed.torch_{_shape}_ms")(lambda s=_shape: _seed_ms(SEED_TORCH_MS[s]))


@number("seed.complex_factor")
def seed_complex_factor():
    return Rendered(f"{SEED_COMPLEX_FACTOR} times", SEED_NOTE)


@number("seed.f32_4096x512_ms")
def seed_f32_4096x512_ms():
    return _seed_ms(SEED_TABLE["4096x512"])


@number("seed.f32_8192x1024_ms")
def seed_f32_8192x1024_ms():
    return _seed_ms(SEED_TABLE["8192x1024"])


@number("seed.dram_4090_gbps")
def seed_dram_4090_gbps():
    return Rendered(f"{DRAM_4090_GBPS:,} GB/s", "the RTX 4090 data sheet (ropelab/lessons/ledger.py)")


