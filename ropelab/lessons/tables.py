"""Tables and quoted numbers from the recorded GPU data under ``data/`` (and the live GPU
measurement a notebook shows under an ignored output).  Every number here is read from a record
file, so it is the same on every machine.
"""

from __future__ import annotations

from ..target import SIMULATED


def recorded(kind: str):
    """The newest record of ``kind`` under ``data/`` (see :mod:`ropelab.measure.records`), or None.

    None is printed as a TODO line: the notebooks are meant to ship with recorded data, and a
    missing record means the GPU run has not been committed yet.
    """
    from ..measure import records

    try:
        return records.load(kind)
    except FileNotFoundError:
        print(f"TODO(GPU data): no recorded {kind!r} run under data/{kind}/ yet; "
              f"the chart appears once the GPU run is committed")
        return None


def recorded_runs(kind: str) -> list[dict]:
    """Every record of ``kind`` under ``data/<kind>/``, oldest first (``recorded`` gives the
    newest): two runs of the same code show how far a measurement moves between runs."""
    import json

    from ..measure import records

    paths = sorted((records.DATA_DIR / kind).glob(f"{kind}-*.json"))
    runs = [records.validate(json.loads(p.read_text())) for p in paths]
    return sorted(runs, key=lambda r: r["meta"]["date"])


def provenance(record) -> str:
    """One line saying where and how a record was measured."""
    m = record["meta"]
    return (f"recorded {m['date'][:10]} on {m['gpu']} (driver {m['driver']}), "
            f"numba-cuda {m['numba_cuda']}")


COPY_ROWS = ("torch_copy", "copy_d2d")  # device copies of the same bytes, when timed


def roof_gbps(record) -> float:
    """The fastest device copy in the record (GB/s): the bandwidth a RoPE kernel cannot beat.

    RoPE reads and writes every byte once, like a copy.  The fastest copy of the run (usually
    the largest shape, where launch and ramp-up costs vanish) is the roof for every row.
    """
    rates = [r["gbps"] for r in record["rows"] if r["variant"] in COPY_ROWS]
    if not rates:
        raise ValueError("the record has no copy rows to take a roof from")
    return max(rates)


def bench_row(record, variant: str, shape: str, dtype: str = "float32") -> dict:
    """The one row of ``variant`` on ``shape`` and ``dtype``; KeyError if the run has none.

    Notebooks quote recorded numbers through this (``row["median_us"]``, ``row["gbps"]``)
    instead of typing them into the prose.
    """
    found = [r for r in record["rows"] if r["variant"] == variant and r["shape"] == shape
             and r.get("dtype", "float32") == dtype]
    if len(found) != 1:
        raise KeyError(f"{len(found)} rows for {variant} on {shape} {dtype} in the record")
    return found[0]


def share_of_roof(record, variant: str, shape: str, dtype: str = "float32") -> float:
    """``gbps`` of one row over :func:`roof_gbps` (the fastest copy of the whole run)."""
    return bench_row(record, variant, shape, dtype)["gbps"] / roof_gbps(record)


def copy_table(record, variants, shapes=None, dtypes=("bfloat16", "float32")) -> str:
    """Median time of ``variants`` against the device copy of the *same shape's* bytes, timed in
    the same run (the record's ``frac_of_copy``), per shape and dtype.

    Use it where shapes are small enough that even a copy stays below the run's fastest copy
    (the production shapes of the fused kernel): the share of that shape's own copy is then the
    figure of merit.  Numbers come from the record file.
    """
    rows = [r for r in record["rows"] if r["variant"] in variants
            and (shapes is None or r["shape"] in shapes) and r.get("dtype", "float32") in dtypes]
    rows.sort(key=lambda r: (r["bytes_moved"], r["shape"], list(dtypes).index(r.get("dtype", "float32")),
                             list(variants).index(r["variant"])))
    head = (f"{'shape':<20} {'dtype':<9} {'MB moved':>8}  {'variant':<26} {'median us':>10} "
            f"{'p20-p80 us':>13} {'copy us':>8} {'of copy':>8}")
    lines = [head, "-" * len(head)]
    for r in rows:
        copy_us = r["bytes_moved"] / (r["copy_gbps"] * 1e3)
        lines.append(f"{r['shape']:<20} {r.get('dtype', 'float32'):<9} {r['bytes_moved'] / 1e6:>8.0f}  "
                     f"{r['variant']:<26} {r['median_us']:>10.1f} {spread(r):>13} {copy_us:>8.1f} "
                     f"{100 * r['frac_of_copy']:>7.1f}%")
    return "\n".join(lines)


def spread(row) -> str:
    """The 20th to 80th percentile of a row's launches, ``"310.7-312.4"``: how much the single
    launches of one measurement scatter around its median."""
    return f"{row['p20_us']:.1f}-{row['p80_us']:.1f}"


def bench_table(record, variants, shapes=None, dtypes=("float32",)) -> str:
    """Median time, effective bandwidth and share of :func:`roof_gbps` of ``variants`` (in that
    order), per shape.  Numbers come from the record file, the same on every machine."""
    roof = roof_gbps(record)
    rows = [r for r in record["rows"] if r["variant"] in variants
            and (shapes is None or r["shape"] in shapes) and r.get("dtype", "float32") in dtypes]
    rows.sort(key=lambda r: (r["bytes_moved"], r["shape"], r.get("dtype", ""),
                             list(variants).index(r["variant"])))
    width = max([12] + [len(r["shape"]) + (0 if len(dtypes) == 1 else 9) for r in rows])
    head = (f"{'shape':<{width}} {'MB moved':>8}  {'variant':<20} {'median us':>10} "
            f"{'p20-p80 us':>17} {'GB/s':>6} {'of roof':>8}")
    lines = [f"roof: the fastest device copy in this run, {roof:,.0f} GB/s", head, "-" * len(head)]
    for r in rows:
        label = r["shape"] if len(dtypes) == 1 else f"{r['shape']} {r.get('dtype', '')}"
        lines.append(f"{label:<{width}} {r['bytes_moved'] / 1e6:>8.0f}  {r['variant']:<20} "
                     f"{r['median_us']:>10.1f} {spread(r):>17} {r['gbps']:>6.0f} "
                     f"{100 * r['gbps'] / roof:>7.0f}%")
    return "\n".join(lines)



def live_bench(variants, shapes=((4096, 1024), (32768, 4096)), repeats: int = 20) -> str:
    """Time ``variants`` (and a device copy) now, on this machine's GPU, with ropelab.measure.bench.

    On the simulator this returns a sentence instead: a simulated kernel has no meaningful
    time.  Notebooks print the result in a cell whose output nbval ignores.
    """
    if SIMULATED:
        return ("no GPU in this process: nothing is timed live (the simulator's times would "
                "describe Python threads); the chart above is the recorded GPU run")
    from ..measure import bench

    timer = bench.Timer(repeats=repeats)
    entries = bench.plan(list(variants), baselines=False)
    result = bench.sweep([bench.plain_shape(t, h) for t, h in shapes], entries, timer=timer,
                         progress=False)
    return bench.format_rows(result.rows)


def fused_history_table(runs, shapes, storages=("bfloat16", "float16")) -> str:
    """The fused kernel run by run (``runs`` oldest first): GPT-J share of the same-run copy on
    ``shapes``, and the range of its time over the C++ twin's where the run timed the twin.
    The run history of notebook 06, kept in ``data/history/README.md``."""
    def row(run, variant, shape, storage):
        try:
            return bench_row(run, variant, shape, storage)
        except KeyError:  # a row that run did not time
            return None

    lines = [f"{'run (UTC)':<17} {'storage':<9} " + " ".join(f"{s:>16}" for s in shapes)
             + f" {'vs twin':>14}"]
    for run in runs:
        for storage in storages:
            cells, ratios = [], []
            for shape in shapes:
                ours = row(run, "fused_qknorm_rope", shape, storage)
                twin = row(run, "cuda_fused", shape, storage)
                cells.append(f"{100 * ours['frac_of_copy']:>15.1f}%" if ours else f"{'-':>16}")
                if ours and twin:
                    ratios.append(ours["median_us"] / twin["median_us"])
            ratio = f"{min(ratios):.2f}-{max(ratios):.2f}x" if ratios else "-"
            lines.append(f"{run['meta']['date'][:16]:<17} {storage:<9} " + " ".join(cells)
                         + f" {ratio:>14}")
    return "\n".join(lines)


def relative_times(record, baseline: str, variants) -> str:
    """Median time of each of ``variants`` divided by ``baseline``'s, per float32 shape."""
    rows = [r for r in record["rows"] if r.get("dtype", "float32") == "float32"]
    by = {(r["variant"], r["shape"]): r["median_us"] for r in rows}
    shapes = list(dict.fromkeys(r["shape"] for r in sorted(rows, key=lambda r: r["bytes_moved"])
                                if r["variant"] == baseline))
    head = f"{'shape':<12} " + " ".join(f"{v + ' / ' + baseline:>22}" for v in variants)
    lines = [head, "-" * len(head)]
    for s in shapes:
        cells = []
        for v in variants:
            t = by.get((v, s))
            cells.append(f"{t / by[(baseline, s)]:>22.2f}" if t is not None else f"{'-':>22}")
        lines.append(f"{s:<12} " + " ".join(cells))
    return "\n".join(lines)



# Noise: when is a difference between two recorded times a difference?


def repeat_gaps(record, same: tuple[str, str], dtype: str = "float32") -> dict[str, float]:
    """``{shape: |t_a / t_b - 1|}`` for two variants ``same`` that time one configuration.

    Two rows of a run that launch the same kernel with the same arguments (for example the
    fused kernel's default and the explicit setting it defaults to) differ only by noise: the
    largest such gap is the smallest difference this run can resolve.
    """
    a, b = same
    by = {(r["variant"], r["shape"]): r["median_us"] for r in record["rows"]
          if r.get("dtype", "float32") == dtype}
    return {s: abs(t / by[(b, s)] - 1) for (v, s), t in by.items() if v == a and (b, s) in by}


def noise_table(record, variants, same: tuple[str, str], shapes=None, dtype: str = "float32",
                same_dtype: str | None = None) -> str:
    """Median times of ``variants`` per shape, their spread (slowest / fastest - 1), and whether
    that spread exceeds the run's noise floor: the largest :func:`repeat_gaps` over all shapes
    for the pair ``same`` in ``same_dtype`` (default ``dtype``; give another dtype when only
    that one has two rows known to time one configuration).  Numbers come from the record."""
    same_dtype = same_dtype or dtype
    gaps = repeat_gaps(record, same, same_dtype)
    if not gaps:
        raise KeyError(f"no shape has both {same[0]} and {same[1]} in {same_dtype}")
    worst = max(gaps, key=gaps.get)
    floor = gaps[worst]
    by = {(r["variant"], r["shape"]): r["median_us"] for r in record["rows"]
          if r.get("dtype", "float32") == dtype}
    names = [v.rsplit("_", 1)[-1] if v.count("_") > 1 else v for v in variants]
    head = (f"{'shape':<20}" + "".join(f"{n + ' us':>11}" for n in names)
            + f"{'spread':>8} {'repeat gap':>11}  verdict")
    lines = [f"{dtype}: {same[0]} and {same[1]} ({same_dtype}) time the same configuration; they "
             f"differ by up to {100 * floor:.1f}% ({worst}), the noise floor of this run",
             head, "-" * len(head)]
    shape_list = shapes or sorted({s for (v, s) in by if v in variants})
    for s in shape_list:
        times = [by.get((v, s)) for v in variants]
        if any(t is None for t in times):
            continue
        sp = max(times) / min(times) - 1
        verdict = ("within noise" if sp <= floor else
                   f"above noise by {100 * (sp - floor):.1f} points")
        gap = f"{100 * gaps[s]:>10.1f}%" if s in gaps and same_dtype == dtype else f"{'-':>11}"
        lines.append(f"{s:<20}" + "".join(f"{t:>11.1f}" for t in times)
                     + f"{100 * sp:>7.1f}% {gap}  {verdict}")
    return "\n".join(lines)


def run_to_run(current, previous, variants, dtype: str = "float32") -> dict[str, float]:
    """``{shape: largest |t_current / t_previous - 1|}`` over ``variants`` whose code did not
    change between two recorded runs: how far the same measurement moves from one run to the
    next."""
    before = {(r["variant"], r["shape"]): r["median_us"] for r in previous["rows"]
              if r.get("dtype", "float32") == dtype}
    out: dict[str, float] = {}
    for r in current["rows"]:
        key = (r["variant"], r["shape"])
        if r["variant"] in variants and r.get("dtype", "float32") == dtype and key in before:
            gap = abs(r["median_us"] / before[key] - 1)
            out[r["shape"]] = max(out.get(r["shape"], 0.0), gap)
    return out


# Precision records (kinds "precision", "sincos_error", "freq_drift"; see ropelab.measure.precision)


def case_rows(record, variant: str, options: str = "-", fastmath: bool = True,
               scaling: str = "-") -> list[dict]:
    rows = [r for r in record["rows"] if r["variant"] == variant and r["options"] == options
            and bool(r["fastmath"]) == bool(fastmath) and r.get("scaling", "-") == scaling]
    return sorted(rows, key=lambda r: r["pos_lo"])


def case_label(variant: str, options: str = "-", fastmath: bool = True, scaling: str = "-") -> str:
    parts = [variant] + ([options] if options != "-" else []) + ([scaling] if scaling != "-" else [])
    return " ".join(parts) + ("" if fastmath else " (precise)")


def precision_table(record, cases, limits=(4095, 32767, 131072)) -> str:
    """Worst error relative to ``max|x|`` of each case over positions ``0 .. limit``.

    ``cases`` are dicts with ``variant`` and optionally ``options``, ``fastmath``, ``scaling``
    (as stored in the record).  Numbers come from the record file.
    """
    head = f"{'case':<34}" + "".join(f"{'pos <= ' + str(lim):>16}" for lim in limits)
    lines = [head, "-" * len(head)]
    for case in cases:
        rows = case_rows(record, **case)
        cells = []
        for lim in limits:
            rel = [r["max_abs_err"] / r["max_abs_x"] for r in rows if r["pos_hi"] <= lim]
            cells.append(f"{max(rel):>16.1e}" if rel else f"{'-':>16}")
        lines.append(f"{case_label(**case):<34}" + "".join(cells))
    return "\n".join(lines)



def sincos_table(record) -> str:
    """Worst absolute error of float32 sin and cos (the larger of the two) per decade of angle,
    fast-math against precise, from a ``sincos_error`` record."""
    worst = {}
    for r in record["rows"]:
        key = (r["angle_lo"], r["angle_hi"])
        err = max(r["max_abs_err_sin"], r["max_abs_err_cos"])
        worst.setdefault(key, {})[bool(r["fastmath"])] = err
    head = f"{'angles (rad)':<22} {'fast-math':>10} {'precise':>10}"
    lines = [head, "-" * len(head)]
    for (lo, hi), by in sorted(worst.items()):
        cells = [f"{by[fm]:>10.1e}" if fm in by else f"{'-':>10}" for fm in (True, False)]
        lines.append(f"{f'[{lo:g}, {hi:g})':<22} " + " ".join(cells))
    return "\n".join(lines)



def drift_table(record, chunks=(1, 2, 4, 8, 16, 32, 64), fastmath: bool = True) -> str:
    """Worst relative frequency error and worst angle error per chunk length, from the record."""
    head = f"{'pairs/thread':>12} {'max rel. freq error':>20} {'max angle error (rad)':>22}"
    lines = [head, "-" * len(head)]
    for chunk in chunks:
        rows = [r for r in record["rows"] if r["chunk"] == chunk and bool(r["fastmath"]) == fastmath]
        if not rows:
            continue
        rel_key, ang_key = (("rel_err_pow", "angle_err_pow_rad") if chunk == 1 else
                            ("rel_err_recurrence", "angle_err_recurrence_rad"))
        lines.append(f"{chunk:>12} {max(r[rel_key] for r in rows):>20.1e} "
                     f"{max(r[ang_key] for r in rows):>22.1e}")
    return "\n".join(lines)


def public_path_table(record) -> str:
    """The ``public_path`` record: each public call before (the reviewed code) and after the
    one-launch-path rework, host time per call and GPU-timeline time per call."""
    rows = record["rows"]
    lines = [f"{'call':<34} {'shape':<16} {'side':<7} {'host us/call':>12} {'events us':>10}",
             "-" * 84]
    for r in sorted(rows, key=lambda r: (r["call"], r["shape"], r["side"] != "before")):
        host = "-" if r["host_us"] is None else f"{r['host_us']:.1f}"
        ev = "-" if r["event_us"] is None else f"{r['event_us']:.1f}"
        lines.append(f"{r['call']:<34} {r['shape']:<16} {r['side']:<7} {host:>12} {ev:>10}"
                     + (f"  ({r['error']})" if r.get("error") else ""))
    return "\n".join(lines)


def public_vs_kernel(record, shapes=None) -> str:
    """Bench rows of the public call (``name``) beside the kernel alone (``name:kernel``): the
    GPU-timeline cost of going through ``ropelab.rope`` / ``ropelab.fused_qknorm_rope``."""
    rows = {(r["variant"], r["shape"], r["dtype"]): r for r in record["rows"]}
    lines = [f"{'variant':<22} {'shape':<22} {'public us':>10} {'kernel us':>10} {'public/kernel':>14}",
             "-" * 82]
    for (name, shape, dtype), r in rows.items():
        k = rows.get((name + ":kernel", shape, dtype))
        if k is None or (shapes and shape not in shapes):
            continue
        label = shape if dtype == "float32" else f"{shape} {dtype}"
        lines.append(f"{name:<22} {label:<22} {r['median_us']:>10.2f} {k['median_us']:>10.2f} "
                     f"{r['median_us'] / k['median_us']:>14.3f}")
    return "\n".join(lines)
