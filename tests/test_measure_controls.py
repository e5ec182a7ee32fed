"""Controlled kernels: correct on the simulator, and their census (order of loads) says what
each was built to change.  The memory-order readers are tested on hand-written PTX and SASS."""

import numpy as np
import pytest
from numba import cuda

from ropelab.measure import controls, order

from reference_check import assert_matches_reference

PTX = """
.visible .entry k(
\t.param .u64 k_param_0
)
{
\t.reg .pred \t%p<3>;
\tld.param.u64 \t%rd1, [k_param_0];
\tsetp.ge.s64 \t%p1, %rd1, %rd9;
\t@%p1 bra \t$L__BB0_6;            // index guard: before any access, not reported
\tld.global.f32 \t%f1, [%rd2];
\tld.global.nc.f32 \t%f2, [%rd2+4];
\tst.global.f32 \t[%rd3], %f1;
\t@%p2 bra \t$L__BB0_5;
\tld.global.v4.f32 \t{%f3, %f4, %f5, %f6}, [%rd2+8];
\tst.global.f32 \t[%rd3+4], %f2;
$L__BB0_5:
\t@%p3 bra \t$L__BB0_6;
$L__BB0_6:
\tret;
}
"""

SASS = """
//--------------------- .text.__cuda_sm20_div_u64 --------------------------
        /*0000*/                   LDG.E R9, desc[UR4][R2.64] ;
//--------------------- .text._ZN3foo6kernelB2v1E --------------------------
        /*0000*/                   S2R R5, SR_TID.X ;
        /*0010*/                   LDG.E R2, desc[UR10][R4.64] ;
        /*0020*/                   I2FP.F32.S32 R8, R2 ;
        /*0030*/                   LDG.E.128 R12, desc[UR10][R10.64+0x4] ;
        /*0040*/              @!P0 LDG.E.64 R20, desc[UR10][R10.64] ;
        /*0050*/                   FMUL.FTZ R3, R14.reuse, R8 ;
        /*0060*/                   MOV R21, UR5 ;
        /*0070*/                   STG.E desc[UR10][R2.64], R3 ;
        /*0080*/                   EXIT ;
"""


def test_ptx_memory_order_reports_accesses_and_branches_after_the_first_access():
    got = order.ptx_memory_order(PTX)
    assert got == {"order": "L L S ? L S", "loads_before_first_store": 2, "loads": 3, "stores": 2}


def test_sass_schedule_reads_the_kernel_not_the_helper_and_finds_the_waits():
    got = order.sass_schedule(SASS)
    # R2 is read by I2FP (wait 1); R14 belongs to the 128-bit load R12..R15 (wait 2); MOV
    # overwrites R21 of the pending 64-bit load (wait 3).
    assert got["order"] == "L w L L w w S"
    assert got["loads_before_first_wait"] == 1
    assert got["max_loads_in_flight"] == 2
    assert got["max_load_bytes_in_flight"] == 16 + 8
    assert order.sass_schedule(SASS, kernel="__cuda_sm20")["order"] == "L"
    with pytest.raises(ValueError):
        order.sass_schedule(SASS, kernel="missing")


def test_uniform_registers_are_not_general_registers():
    assert order._registers("desc[UR10][R10.64+0x4]") == {10, 11}
    assert order._registers("UR4") == set()
    assert order._registers("R4.128") == {4, 5, 6, 7}


def test_references_launch_with_the_signatures_ropelab_uses():
    # If a ropelab kernel's arguments change, this module's launchers must change with it.
    assert controls.signature_drift() == []


CASES = [(name, t, h) for name in controls.KERNELS for t, h in ((3, 12), (2, 10))
         if controls.applies(name, t, h)]


@pytest.mark.parametrize("name, tokens, hidden", CASES)
def test_every_entry_computes_rope(rng, name, tokens, hidden):
    x = rng.standard_normal((tokens, hidden)).astype(np.float32)
    pos = rng.integers(0, 3000, tokens).astype(np.int32)
    d_x, d_pos = cuda.to_device(x.reshape(-1)), cuda.to_device(pos)
    d_out = cuda.to_device(np.full(x.size, np.nan, np.float32))
    controls.make_launch(name, tokens, hidden, d_x, d_out, d_pos)()
    got = d_out.copy_to_host().reshape(tokens, hidden)
    if controls.KERNELS[name].role == "roof":
        np.testing.assert_array_equal(got, x)
    else:
        assert_matches_reference(x, got, pos, base=controls.BASE)


def test_block2d_no_loop_covers_rows_wider_than_a_block(rng):
    tokens, hidden = 1, 2100  # 1050 pairs: 1024 threads and a second block in y
    assert controls.KERNELS["block2d_no_loop"].config(tokens, hidden)[0] == (1, 2)
    x = rng.standard_normal((tokens, hidden)).astype(np.float32)
    pos = np.array([1234], np.int32)
    d_out = cuda.to_device(np.full(x.size, np.nan, np.float32))
    controls.make_launch("block2d_no_loop", tokens, hidden, cuda.to_device(x.reshape(-1)), d_out,
                         cuda.to_device(pos))()
    assert_matches_reference(x, d_out.copy_to_host().reshape(tokens, hidden), pos, base=controls.BASE)


def test_entries_that_need_whole_quads_refuse_other_rows():
    assert not controls.applies("pack4", 3, 10)
    d = cuda.to_device(np.zeros(30, np.float32))
    with pytest.raises(ValueError, match="hidden % 4"):
        controls.make_launch("copy_f32x4", 3, 10, d, d, cuda.to_device(np.zeros(3, np.int32)))


def test_every_control_names_its_reference_and_what_would_confirm_it():
    for e in controls.KERNELS.values():
        if e.role == "control":
            assert e.reference in controls.KERNELS
            assert e.isolates and e.confirms != "-"
    text = controls.describe()
    assert "pack4_scalar_unhoisted (vs pack4_scalar)" in text and "flat (vs" not in text


@pytest.fixture(scope="module")
def census():
    # The committed census (with SASS, also where nvdisasm is not installed) when its key matches.
    return controls.census()


def test_census_compiled_every_entry(census):
    assert census["key"] == controls.cache_key()
    assert [r["name"] for r in census["rows"]] == list(controls.KERNELS)
    assert not [r for r in census["rows"] if r["error"]]


def test_census_ptx_shows_the_hoisted_and_the_unhoisted_pack4_scalar(census):
    row = lambda n: controls.census_row(census, n)  # noqa: E731
    # The old order: pair 2's loads come after pair 1's stores; the hoisted kernel loads all first.
    assert row("pack4_scalar_unhoisted")["ptx_order"]["loads_before_first_store"] == 3
    assert row("pack4_scalar")["ptx_order"]["loads_before_first_store"] == 5
    assert row("pack4_scalar")["ld_global"] == row("pack4_scalar_unhoisted")["ld_global"] == {"32": 5}


def test_census_sass_shows_which_kernels_wait_for_the_position_first(census):
    first_wait = {r["name"]: r["sass_schedule"]["loads_before_first_wait"] for r in census["rows"]}
    # block2d, and the controls that keep (or add) its order, wait after the position load.
    assert first_wait["block2d"] == first_wait["block2d_loads_first"] == 1
    assert first_wait["flat_serial_pos"] == 1
    # flat and the controls that remove the wait issue all three loads first.
    assert first_wait["flat"] == first_wait["block2d_pos_in_loop"] == first_wait["block2d_no_loop"] == 3
    flight = {r["name"]: r["sass_schedule"]["max_loads_in_flight"] for r in census["rows"]}
    assert flight["pack4_scalar"] == 5 and flight["pack4_scalar_unhoisted"] == 3


# --------------------------------------------------------------------------------------------
# The timing harness, with a fake timer (times are never taken on the simulator)
# --------------------------------------------------------------------------------------------

class CountingTimer:
    """Runs each launch once (it must work) and reports the call number as its time."""

    fill_us = 100.0

    def __init__(self):
        self.calls = 0
        self.last_host_us = []

    def time(self, launch, repeats=None):
        launch()
        self.calls += 1
        self.last_host_us = [10.0] * repeats
        return [float(self.calls)] * repeats


def test_timing_interleaves_entries_and_reports_ratios_to_the_reference():
    from ropelab.measure.bench import controls as timing

    timer = CountingTimer()
    rows = timing.time_shape(2, 12, timer, rounds=2, repeats=3)
    names = [r["entry"] for r in rows]
    n = len(names)
    assert names[0] == timing.COPY and set(names[1:]) == set(controls.KERNELS)  # 12 % 4 == 0: all apply
    assert timer.calls == 2 * n
    k = {name: i + 1 for i, name in enumerate(names)}  # call number in round 0; round 1 adds n
    row = {r["entry"]: r for r in rows}
    b2, fl = row["block2d"], k["flat"]
    assert b2["reference"] == "flat"
    assert b2["median_us"] == (k["block2d"] + k["block2d"] + n) / 2
    assert b2["vs_reference"] == round((2 * k["block2d"] + n) / (2 * fl + n), 4)
    assert b2["vs_reference_lo"] == round((k["block2d"] + n) / (fl + n), 4)
    assert b2["vs_reference_hi"] == round(k["block2d"] / fl, 4)
    assert row["copy_f32x4"]["reference"] == timing.COPY
    assert row[timing.COPY]["vs_reference"] is None and row["flat"]["vs_reference"] is None
    assert row["flat"]["host_bound"] is False and row["flat"]["repeats"] == 6
    assert tuple(rows[0]) == timing.CONTROLS.columns


def test_timing_cli_refuses_on_the_simulator(capsys):
    if not __import__("ropelab").SIMULATED:
        pytest.skip("on a GPU it times")
    from ropelab.measure.bench import controls as timing

    assert timing.main([]) == 2
    assert "simulator" in capsys.readouterr().err
