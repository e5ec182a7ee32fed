"""Charts for the notebooks: thread maps (from :mod:`.tracing`) and recorded GPU data (rows read
with :mod:`.tables`).  matplotlib is imported inside each function so that importing the course
does not pull it in for code that only prints tables.
"""

from __future__ import annotations

import numpy as np

from .tables import case_rows, case_label, provenance, roof_gbps
from .tracing import FusedMap, ThreadMap


def plot_fused_map(fmap: FusedMap, token: int = 0, ax=None):
    """One token's row of ``qkv``: a line per head, colour = warp, number = lane (V: grey)."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap

    heads_total, d = fmap.warp.shape[1], fmap.head_dim
    if ax is None:
        _, ax = plt.subplots(figsize=(min(14.0, max(6.0, 0.2 * d + 1.5)), 0.45 * heads_total + 1.3))
    warps = int(fmap.warp.max()) + 1
    palette = plt.get_cmap("tab10").colors
    colours = ListedColormap(["#dddddd"] + [palette[i % len(palette)] for i in range(warps)])
    ax.imshow(fmap.warp[token] + 1, cmap=colours, vmin=0, vmax=warps, aspect="auto",
              interpolation="nearest")
    per_lane = fmap.elements_per_lane
    for h in range(heads_total):
        for e in range(0, d, per_lane):  # one label per lane, at its first element
            lane = fmap.lane[token, h, e]
            if lane >= 0:
                ax.text(e + (per_lane - 1) / 2, h, str(lane), ha="center", va="center", fontsize=6)
    hq, hk, hv = fmap.heads
    names = [f"Q{i}" for i in range(hq)] + [f"K{i}" for i in range(hk)] + [f"V{i}" for i in range(hv)]
    ax.set_yticks(range(heads_total), names)
    ax.set_xlabel(f"element of the head (0 .. {d - 1})")
    ax.set_title(f"token {token}, {fmap.storage}: colour = warp, number = lane; "
                 f"V heads (grey) are never touched",
                 fontsize=9)
    return ax


def plot_thread_map(tmap: ThreadMap, ax=None, *, label: str = "thread"):
    """Draw ``tmap``: one cell per float, colour = block, text = ``threadIdx.x`` (or the global
    thread number with ``label="global"``).  Returns the matplotlib Axes."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap

    if ax is None:
        _, ax = plt.subplots(figsize=(max(4.0, 0.42 * tmap.row + 1), 0.5 * tmap.tokens + 1.2))
    palette = plt.get_cmap("tab20").colors
    blocks = int(tmap.block.max()) + 1 if tmap.block.size else 1
    colours = ListedColormap(["#dddddd"] + [palette[i % len(palette)] for i in range(blocks)])
    ax.imshow(tmap.block + 1, cmap=colours, vmin=0, vmax=blocks, aspect="auto",
              interpolation="nearest")
    text = tmap.global_thread() if label == "global" else tmap.thread
    for (t, e), value in np.ndenumerate(text):
        ax.text(e, t, "-" if value < 0 else str(value), ha="center", va="center", fontsize=7)
    ax.set_xticks(range(tmap.row))
    ax.set_xticklabels([str(i) if i % 2 == 0 else "" for i in range(tmap.row)], fontsize=7)
    ax.set_yticks(range(tmap.tokens))
    ax.set_xlabel("element of the row (pairs are 2i, 2i+1)")
    ax.set_ylabel("token")
    ax.set_title(f"{tmap.variant}: colour = block, number = "
                 f"{'global thread' if label == 'global' else 'threadIdx.x'}", fontsize=9)
    return ax



def plot_roof(record, variants, shapes=None, dtypes=("float32",), ax=None):
    """Share of :func:`roof_gbps` per shape (bars), one colour per variant.

    The roof is the fastest copy of the whole run; on small shapes even a copy stays below it.
    So each shape also gets a marker (a black line across its group) at the share its own copy
    reached: a variant level with it is as fast as copying its bytes, whatever the roof says.
    """
    import matplotlib.pyplot as plt

    roof = roof_gbps(record)
    rows = [r for r in record["rows"] if r["variant"] in variants
            and (shapes is None or r["shape"] in shapes) and r.get("dtype", "float32") in dtypes]
    rows.sort(key=lambda r: r["bytes_moved"])

    def label_of(r):
        return r["shape"] + ("" if len(dtypes) == 1 else f"\n{r['dtype']}")

    labels = list(dict.fromkeys(label_of(r) for r in rows))
    if ax is None:
        _, ax = plt.subplots(figsize=(max(7.0, 1.5 * len(labels)), 4.2))
    width = 0.8 / max(len(variants), 1)
    x = np.arange(len(labels))
    for i, v in enumerate(variants):
        share = np.full(len(labels), np.nan)
        for r in rows:
            if r["variant"] == v:
                share[labels.index(label_of(r))] = r["gbps"] / roof
        ax.bar(x + (i - (len(variants) - 1) / 2) * width, share, width, label=v)
    copy_share = np.full(len(labels), np.nan)
    for r in rows:  # every row carries its run's copy rate for the same bytes
        copy_share[labels.index(label_of(r))] = r["copy_gbps"] / roof
    ax.hlines(copy_share, x - 0.44, x + 0.44, colors="black", lw=2.5, zorder=3,
              label="copy of the same bytes")
    ax.axhline(1.0, color="black", lw=1)
    ax.set_xticks(x, labels, fontsize=8)
    ax.set_ylim(0, 1.1)
    ax.set_ylabel(f"share of the roof ({roof:,.0f} GB/s)")
    ax.set_title(f"Effective bandwidth as a share of the fastest copy\n{provenance(record)}",
                 fontsize=9)
    ax.legend(fontsize=7, ncol=2, loc="lower right")
    ax.figure.tight_layout()
    return ax


def plot_all_variants(record, shape: str, ax=None, *, span: float = 2.0):
    """Every row of one shape: median time (bars, sorted, 20-80% whiskers) on a linear axis,
    with the time of the same bytes at the roof as a dashed line.

    The axis ends at ``span`` times the roof's time, so differences of a few percent between
    the fast rows stay visible (a log axis squeezes them into a few pixels).  Rows beyond the
    axis are drawn to its end, hatched, with their time and factor written on them.
    """
    import matplotlib.pyplot as plt

    rows = sorted((r for r in record["rows"] if r["shape"] == shape
                   and r.get("dtype", "float32") == "float32"), key=lambda r: r["median_us"])
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 0.32 * len(rows) + 1.5))
    colours = {"numba": "tab:blue", "cuda_cpp": "tab:orange", "torch": "tab:green",
               "copy": "tab:gray", "numba_fused": "tab:purple"}
    roof_us = rows[0]["bytes_moved"] / (roof_gbps(record) * 1e3) if rows else 1.0
    limit = span * roof_us
    y = np.arange(len(rows))
    for k, r in enumerate(rows):
        colour = colours.get(r["family"], "tab:red")
        if r["median_us"] <= limit:
            ax.barh(k, r["median_us"], color=colour,
                    xerr=[[r["median_us"] - r["p20_us"]], [min(r["p80_us"], limit) - r["median_us"]]],
                    capsize=2)
        else:
            ax.barh(k, limit, color=colour, hatch="//", alpha=0.5)
            ax.text(limit * 0.98, k, f"{r['median_us']:,.0f} us ({r['median_us'] / roof_us:,.0f}x the roof) >",
                    ha="right", va="center", fontsize=7)
    ax.set_yticks(y, [f"{r['variant']} ({r['family']})" for r in rows], fontsize=8)
    ax.invert_yaxis()
    ax.axvline(roof_us, color="black", lw=1, ls="--")
    ax.set_xlim(0, limit)
    ax.set_xlabel(f"median time per call, us (linear; dashed: the bytes at the roof; the axis "
                  f"ends at {span:g}x that)")
    ax.set_title(f"Every variant and baseline on {shape}\n{provenance(record)}", fontsize=9)
    ax.figure.tight_layout()
    return ax


def plot_launch_overhead(record, ax=None):
    """Host cost per launch of each launcher in a ``launch_overhead`` record."""
    import matplotlib.pyplot as plt

    rows = sorted(record["rows"], key=lambda r: r["us_per_launch"])
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 0.4 * len(rows) + 1.4))
    y = np.arange(len(rows))
    ax.barh(y, [r["us_per_launch"] for r in rows], color="tab:blue")
    ax.set_yticks(y, [r["launcher"] for r in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("host time per launch, us")
    ax.set_title(f"Launch overhead (back-to-back launches)\n{provenance(record)}", fontsize=9)
    ax.figure.tight_layout()
    return ax



def _drawn_buckets(rows) -> list[tuple[int, float]]:
    """(upper position, max error / max |x|) per bucket, a lone last position folded in.

    A record's last bucket can hold a single position just past a power of two (131072 after
    65536..131071); drawn on its own it sits one position to the right of the previous point
    with the error of one sample, a vertical drop that says nothing.  It is merged into the
    bucket before it.
    """
    out: list[tuple[int, float]] = []
    for r in rows:
        rel = r["max_abs_err"] / r["max_abs_x"]
        if out and r["pos_lo"] == r["pos_hi"] > 1 and r["pos_lo"] == out[-1][0] + 1:
            out[-1] = (r["pos_hi"], max(out[-1][1], rel))
        else:
            out.append((r["pos_hi"], rel))
    return out


def plot_precision(record, cases, ax=None):
    """Max error relative to ``max|x|`` per position bucket (log-log), one line per case."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(8, 4.2))
    for case in cases:
        # Position 0 turns nothing (angle 0): its error is exactly 0, which a log axis cannot
        # draw; clamping it to a floor drew a dive that meant nothing.  It is left out, as is
        # any other bucket whose error is exactly 0.
        buckets = _drawn_buckets(r for r in case_rows(record, **case)
                                 if r["pos_hi"] >= 1 and r["max_abs_err"] > 0)
        if not buckets:
            continue
        hi, rel = np.array(buckets).T
        ax.loglog(hi, rel, ".-", label=case_label(**case))
    ax.axhline(2.0**-8, color="gray", lw=0.8, ls="--")
    ax.text(1.2, 2.0**-8 * 1.15, "half a bf16 ulp at 1.0", fontsize=7, color="gray")
    ax.set_xlabel("position (upper end of each power-of-two bucket; position 0, exact, not drawn)")
    ax.set_ylabel("max |error| / max |x|")
    ax.set_title(f"Error against the float64 reference by position\n{provenance(record)}",
                 fontsize=9)
    ax.legend(fontsize=7)
    ax.figure.tight_layout()
    return ax



def plot_sincos_error(record, ax=None):
    """Max absolute error of float32 sin and cos by decade of angle, fast-math and precise."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(8, 4))
    for fastmath in (True, False):
        rows = sorted((r for r in record["rows"] if bool(r["fastmath"]) == fastmath),
                      key=lambda r: r["angle_lo"])
        if not rows:
            continue
        hi = [r["angle_hi"] for r in rows]
        name = "fast-math (sin.approx)" if fastmath else "precise (libdevice)"
        ax.loglog(hi, [max(r["max_abs_err_sin"], 1e-10) for r in rows], "o-", label=f"sin, {name}")
        ax.loglog(hi, [max(r["max_abs_err_cos"], 1e-10) for r in rows], "s--", label=f"cos, {name}")
    ax.set_xlabel("angle (upper end of each decade, radians)")
    ax.set_ylabel("max |error| of the function")
    ax.set_title(f"float32 sin/cos on exact float32 angles\n{provenance(record)}", fontsize=9)
    ax.legend(fontsize=7)
    ax.figure.tight_layout()
    return ax



def plot_freq_drift(record, chunks=(1, 4, 16, 64), fastmath: bool = True, ax=None):
    """Angle error at the record's position caused by the frequency, per pair and chunk length."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(8, 4))
    for chunk in chunks:
        rows = sorted((r for r in record["rows"] if r["chunk"] == chunk
                       and bool(r["fastmath"]) == fastmath), key=lambda r: r["pair"])
        if not rows:
            continue
        key = "angle_err_pow_rad" if chunk == 1 else "angle_err_recurrence_rad"
        label = "pow for every pair" if chunk == 1 else f"pow + recurrence, {chunk} pairs/thread"
        ax.semilogy([r["pair"] for r in rows], [max(r[key], 1e-12) for r in rows], ".-", label=label)
    ax.set_xlabel("pair index")
    ax.set_ylabel("angle error (radians)")
    ax.set_title(f"Frequency error as angle error{' (fast-math)' if fastmath else ' (precise)'}"
                 f"\n{provenance(record)}", fontsize=9)
    ax.legend(fontsize=7)
    ax.figure.tight_layout()
    return ax
