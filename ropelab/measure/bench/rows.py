"""What the bench times on and what it writes: shapes (plain RoPE or the fused Q and K) and
result rows in the record's column order, with their text table."""

from __future__ import annotations

from dataclasses import dataclass

from .. import baselines as bl
from .. import bench_rows
from .stats import host_fields
from ...shapes import PRODUCTION_SHAPES, ROPE_SHAPES, qk_bytes, rope_bytes

# The shapes come from ropelab.shapes (the one registry): the seed's [tokens, hidden] sizes, one
# that moves more than 1 GB, and the production shapes of the fused kernel (SGLang PR 21654).
SEED_SHAPES = [(s.tokens, s.hidden) for n, s in ROPE_SHAPES.items() if n.startswith("seed_")]
BIG_SHAPES = [(s.tokens, s.hidden) for n, s in ROPE_SHAPES.items() if n.startswith("large_")]
OVERHEAD_SHAPE = (64, 512)  # host launch cost: a kernel far shorter than its launch
FUSED_DTYPES = ("bfloat16", "float16", "float32")

COLUMNS = ("variant", "family", "shape", "tokens", "hidden", "heads_q", "heads_k", "head_dim",
           "dtype", "fastmath", "bytes_moved", "median_us", "p20_us", "p80_us", "repeats",
           "gbps", "copy_gbps", "frac_of_copy", "host_us", "fill_us", "host_bound")


@dataclass(frozen=True)
class Shape:
    """One benchmark shape: plain RoPE on [tokens, hidden] or the fused kernel's Q and K."""

    label: str
    tokens: int
    hidden: int | None = None  # plain RoPE: one head of this width
    heads_q: int | None = None  # fused: [tokens, heads, head_dim] Q and K
    heads_k: int | None = None
    head_dim: int | None = None
    dtype: str = "float32"
    heads_v: int | None = None  # fused: V heads sit in qkv but are not touched
    rotary_dim: int | None = None

    @property
    def fused(self) -> bool:
        return self.heads_q is not None

    @property
    def itemsize(self) -> int:
        return {"float32": 4, "bfloat16": 2, "float16": 2}[self.dtype]

    @property
    def bytes_moved(self) -> int:
        if self.fused:
            return qk_bytes(self.tokens, self.heads_q, self.heads_k, self.head_dim, self.itemsize)
        return rope_bytes(self.tokens, self.hidden, self.itemsize)

    @property
    def copy_bytes(self) -> int:
        """Bytes one copy must read (and write) to move what this shape moves."""
        if self.fused:
            return self.tokens * (self.heads_q + self.heads_k) * self.head_dim * self.itemsize
        return self.tokens * self.hidden * self.itemsize

    def fields(self) -> dict:
        return {"shape": self.label, "tokens": self.tokens, "hidden": self.hidden,
                "heads_q": self.heads_q, "heads_k": self.heads_k, "head_dim": self.head_dim,
                "dtype": self.dtype}


def plain_shape(tokens: int, hidden: int) -> Shape:
    return Shape(f"{tokens}x{hidden}", tokens, hidden=hidden)


def shapes_for(groups) -> list[Shape]:
    """Shapes of the named groups: 'seed', 'big', 'production' (or 'all')."""
    groups = {"seed", "big", "production"} if "all" in groups else set(groups)
    unknown = groups - {"seed", "big", "production", "rows"}
    if unknown:
        raise ValueError(f"unknown shape group(s) {sorted(unknown)}; use seed, big, production, "
                         f"rows, all")
    out = []
    if "seed" in groups:
        out += [plain_shape(t, h) for t, h in SEED_SHAPES]
    if "big" in groups:
        out += [plain_shape(t, h) for t, h in BIG_SHAPES]
    if "production" in groups:
        out += [Shape(p.name, p.tokens, heads_q=p.heads_q, heads_k=p.heads_k, head_dim=p.head_dim,
                      dtype=dt, heads_v=p.heads_v, rotary_dim=p.rotary_dim)
                for p in PRODUCTION_SHAPES.values() for dt in FUSED_DTYPES]
    if "rows" in groups:  # plain RoPE as models call it (measure/bench_rows.py)
        out += [Shape(label, t, heads_q=hq, heads_k=hk, head_dim=hd, dtype=dt, heads_v=hv)
                for label, t, hq, hk, hd, dt, hv in bench_rows.SHAPES]
    return out


def make_row(name: str, family: str, shape: Shape, fastmath, timing: dict) -> dict:
    row = {"variant": name, "family": family, **shape.fields(), "fastmath": fastmath,
           **host_fields(None, None), **timing}
    return {c: row[c] for c in COLUMNS}


def target_summary(rows: list[dict]) -> list[str]:
    """The course's speed targets, read off one record's rows (no judgement of pass/fail).

    Best plain-RoPE numba variant at >= 1 GB as a share of the copy; each numba variant over its
    CUDA C++ twin; the fused kernel's share of the copy on the production shapes.
    """
    TWINS = bl.TWINS

    out = []
    big = [r for r in rows if r["family"] == "numba" and r["bytes_moved"] >= 1e9
           and r["frac_of_copy"] is not None]
    for label in dict.fromkeys(r["shape"] for r in big):
        best = max((r for r in big if r["shape"] == label), key=lambda r: r["frac_of_copy"])
        out.append(f"best plain RoPE at {label}: {best['variant']} {100 * best['frac_of_copy']:.1f}% "
                   f"of copy (target >= 95%)")
    med = {(r["variant"], r["shape"], r["dtype"]): r["median_us"] for r in rows}
    for numba_name, cpp_name in TWINS.items():
        ratios = [(r["shape"], r["median_us"] / med[(cpp_name, r["shape"], r["dtype"])])
                  for r in rows if r["variant"] == numba_name
                  and (cpp_name, r["shape"], r["dtype"]) in med]
        if ratios:
            worst = max(ratios, key=lambda t: t[1])
            out.append(f"{numba_name} / {cpp_name}: worst time ratio {worst[1]:.3f} at {worst[0]} "
                       f"(target <= 1.10)")
    for r in rows:
        if r["family"] == "numba_fused" and r["frac_of_copy"] is not None:
            out.append(f"{r['variant']} {r['shape']} {r['dtype']}: {100 * r['frac_of_copy']:.1f}% "
                       f"of copy (target >= 80% on flux_1024, qwen_image_1024)")
    return out


def format_rows(rows: list[dict]) -> str:
    head = (f"{'variant':<22} {'shape':<22} {'median us':>10} {'p20-p80 us':>17} {'GB/s':>8} "
            f"{'copy GB/s':>9} {'of copy':>8} {'host us':>8}")
    lines = [head, "-" * len(head)]
    for r in rows:
        label = r["shape"] + ("" if r["dtype"] == "float32" else f" {r['dtype']}")
        frac = "" if r["frac_of_copy"] is None else f"{100 * r['frac_of_copy']:.1f}%"
        copy = "" if r["copy_gbps"] is None else f"{r['copy_gbps']:.0f}"
        lines.append(f"{r['variant']:<22} {label:<22} {r['median_us']:>10.2f} "
                     f"{r['p20_us']:>8.2f}-{r['p80_us']:<8.2f} {r['gbps']:>8.0f} {copy:>9} "
                     f"{frac:>8} {_host_cell(r):>8}")
    if any(r.get("host_bound") for r in rows):
        lines.append("! = enqueueing took >= 80% of the fill's GPU time: that row may include host time")
    return "\n".join(lines)


def _host_cell(row: dict) -> str:
    if row.get("host_us") is None:  # records made before host times were kept
        return ""
    return f"{row['host_us']:.0f}{'!' if row.get('host_bound') else ''}"
