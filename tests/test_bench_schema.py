"""The bench package's row schema, its one record writer and its one formatter: rows are built
and checked against their kind's columns, records round-trip, committed records still match
their kind, and the tables print as the notebooks show them."""

import json
from pathlib import Path

import pytest

from test_records import fake_meta

from ropelab.measure import bench, records
from ropelab.measure.bench import kinds, record
from ropelab.measure.bench.schema import RowError

DATA = Path(records.DATA_DIR)


def _overhead_row(name="numba empty kernel", us=5.0):
    return kinds.LAUNCH_OVERHEAD.row(launcher=name, kernel_args=0, launches=2000,
                                     us_per_launch=us, us_per_launch_synced=us + 1)


def test_a_row_missing_a_column_or_with_an_unknown_one_is_refused():
    full = _overhead_row()
    assert tuple(full) == kinds.LAUNCH_OVERHEAD.columns
    values = dict(full)
    del values["launches"]
    with pytest.raises(RowError, match=r"missing \['launches'\]"):
        kinds.LAUNCH_OVERHEAD.row(values)
    with pytest.raises(RowError, match=r"unknown \['typo'\]"):
        kinds.LAUNCH_OVERHEAD.row(full, typo=1)


def test_rows_come_out_in_column_order_whatever_order_they_are_given_in():
    given = dict(reversed(list(_overhead_row().items())))
    assert tuple(kinds.LAUNCH_OVERHEAD.row(given)) == kinds.LAUNCH_OVERHEAD.columns
    with pytest.raises(RowError, match="row 0"):
        kinds.LAUNCH_OVERHEAD.check([given])  # a hand-made row in another order


def test_the_timing_and_host_groups_are_what_stats_returns():
    assert tuple(bench.summarize([2.0, 3.0], 1000, 10.0)) == kinds.TIMING
    assert tuple(bench.host_fields([1.0], 100.0)) == kinds.HOST
    assert tuple(bench.host_fields(None, None)) == kinds.HOST


def test_a_written_record_round_trips(tmp_path):
    rows = [_overhead_row(), _overhead_row("ropelab kernel path", 7.5)]
    path = record.save("launch_overhead", rows, method="m", meta=fake_meta(), out=tmp_path)
    assert path.parent == tmp_path / "launch_overhead"
    rec = records.load("launch_overhead", path.parent)
    assert rec["rows"] == rows and tuple(rec["columns"]) == kinds.LAUNCH_OVERHEAD.columns


def test_the_writer_refuses_rows_of_another_kind_before_writing(tmp_path):
    sweep_row = bench.make_row("flat", "numba", bench.plain_shape(8, 16), True,
                               bench.summarize([1.0], 8 * 16 * 8))
    with pytest.raises(RowError, match="launch_overhead row 0"):
        record.save("launch_overhead", [sweep_row], method="m", meta=fake_meta(), out=tmp_path)
    assert not (tmp_path / "launch_overhead").exists()
    with pytest.raises(KeyError, match="no bench record kind 'nope'"):
        record.save("nope", [sweep_row], method="m", meta=fake_meta(), out=tmp_path)


def test_a_recording_rewrites_one_file_as_the_run_goes(tmp_path):
    run = record.Recording("launch_overhead", method="m", meta=fake_meta(), out=tmp_path)
    assert run.save([]) is None  # nothing measured yet: nothing written
    first = run.save([_overhead_row()])
    second = run.save([_overhead_row(), _overhead_row("b", 6.0)])
    assert first == second and len(list(first.parent.glob("*.json"))) == 1
    assert len(records.load("launch_overhead", first.parent)["rows"]) == 2


def _committed():
    for kind in kinds.SCHEMAS:
        for path in sorted((DATA / kind).glob(f"{kind}-*.json")):
            yield kind, path


@pytest.mark.parametrize("kind,path", list(_committed()), ids=lambda v: getattr(v, "name", v))
def test_committed_records_have_their_kinds_columns(kind, path):
    rec = records.validate(json.loads(path.read_text()))
    assert rec["kind"] == kind
    kinds.schema_of(kind).check(rec["rows"])
    kinds.format_rows(rec["rows"], kind)  # the one formatter prints every committed row


def test_every_kind_that_records_exist_for_is_declared():
    # A committed kind written by a bench of this package must have a schema here.
    bench_kinds = {"bench", "bench_fused", "bench_rows", "launch_overhead", "bench_backward",
                   "torch_ops", "controls", "real_model", "serving"}
    assert set(kinds.SCHEMAS) == bench_kinds
    assert {k for k, _ in _committed()} >= bench_kinds - {"real_model", "serving"}


def test_tables_print_as_the_notebooks_show_them():
    row = dict.fromkeys(kinds.CONTROLS.columns)
    row.update(entry="block2d", shape="4096x512", median_us=9.875, frac_of_copy=0.9612,
               reference="flat", vs_reference=1.0234, vs_reference_lo=0.998,
               vs_reference_hi=1.05, host_us=41.2, host_bound=False)
    lines = kinds.format_rows([row], "controls").splitlines()
    assert lines[0] == ("entry                    shape        median us  of copy vs          "
                        "            ratio   round lo-hi  host us")
    assert lines[1] == "-" * len(lines[0])
    assert lines[2] == (f"{'block2d':<24} {'4096x512':<11} {'9.88':>10} {'96.1%':>8} {'flat':<22} "
                        f"{'1.023':>6} {'0.998-1.050':>13} {'41':>8}")


def test_sweep_table_marks_host_bound_rows_and_leaves_missing_values_blank():
    shape = bench.Shape("tiny", 2, heads_q=1, heads_k=1, head_dim=64, dtype="bfloat16")
    timing = dict(bench.summarize([4.0, 5.0, 6.0], shape.bytes_moved), host_us=250.0,
                  fill_us=300.0, host_bound=True)
    text = bench.format_rows([bench.make_row("fused_qknorm_rope", "ropelab_fused", shape, True,
                                             timing)])
    line = text.splitlines()[2]
    assert line == (f"{'fused_qknorm_rope':<22} {'tiny bfloat16':<22} {'5.00':>10} "
                    f"{'4.40':>8}-{'5.60':<8} {'0':>8} {'':>9} {'':>8} {'250!':>8}")  # no copy: blank
    assert text.splitlines()[-1].startswith("! = enqueueing took >= 80%")


def test_the_model_table_appends_a_failed_rows_note():
    row = dict.fromkeys(kinds.REAL_MODEL.columns)
    row.update(model="ropelab", mode="eager", **{"pass": "forward"}, note="RuntimeError: x")
    ok = dict(row, median_us=1234.56, vs_transformers=0.9, note="")
    lines = kinds.format_rows([row, ok], "real_model").splitlines()
    assert lines[2].endswith("                               RuntimeError: x")
    assert lines[2].count("  RuntimeError") == 1 and lines[0].endswith("vs transformers")
    assert lines[3].endswith("1234.6           0.900")
