"""The predicted-H200-time model: PTX analysis, features, the fit, its record, the learner's
prediction and the GPU run's plumbing.

Hand-written PTX and synthetic rows test the rules; the committed record tests the fit's
reproducibility; one small kernel goes through the compiler process.  No GPU anywhere.
"""

import json
import math
import sys
import textwrap

import numpy as np
import pytest

from ropelab.grader.predict import features, lanes, model, ptx, record, recorded_fit

HEAD = ".version 9.5\n.target sm_90\n.address_size 64\n.visible .entry K(\n)\n{\n"


def kernel(body: str) -> str:
    return HEAD + textwrap.dedent(body) + "\n}\n"


# Two loads, the second's address computed from the first's value: two rounds, one load
# issued before any wait.  Lanes step by one float (tid.x * 4 bytes).
DEPENDENT = kernel("""
    ld.param.u64 %rd1, [K_param_4];
    ld.param.u64 %rd2, [K_param_11];
    mov.u32 %r1, %tid.x;
    cvt.s64.s32 %rd3, %r1;
    shl.b64 %rd4, %rd3, 2;
    add.s64 %rd5, %rd1, %rd4;
    ld.global.u32 %r2, [%rd5];
    cvt.s64.s32 %rd6, %r2;
    shl.b64 %rd7, %rd6, 2;
    add.s64 %rd8, %rd1, %rd7;
    ld.global.f32 %f1, [%rd8];
    add.s64 %rd9, %rd2, %rd4;
    st.global.f32 [%rd9], %f1;
    ret;
""")


def test_a_load_that_needs_a_load_waits_a_second_round():
    a = ptx.analyze(DEPENDENT)
    assert a["rounds"] == 2
    assert a["first_round_loads"] == 1
    assert a["loads"] == 2 and a["stores"] == 1


def test_a_load_after_a_store_cannot_be_hoisted_above_it():
    start = """
        mov.u32 %r1, %tid.x;
        cvt.s64.s32 %rd3, %r1;
        shl.b64 %rd4, %rd3, 3;
        add.s64 %rd5, %rd1, %rd4;
        add.s64 %rd6, %rd2, %rd4;
    """
    serial = kernel(start + """
        ld.global.f32 %f1, [%rd5];
        st.global.f32 [%rd6], %f1;
        ld.global.f32 %f2, [%rd5+4];
        st.global.f32 [%rd6+4], %f2;
        ret;
    """)
    loads_first = kernel(start + """
        ld.global.f32 %f1, [%rd5];
        ld.global.f32 %f2, [%rd5+4];
        st.global.f32 [%rd6], %f1;
        st.global.f32 [%rd6+4], %f2;
        ret;
    """)
    assert ptx.analyze(serial)["rounds"] == 2
    assert ptx.analyze(loads_first)["rounds"] == 1
    assert ptx.analyze(loads_first)["first_round_loads"] == 2


LOOP = kernel("""
    mov.u32 %r1, %tid.x;
    cvt.s64.s32 %rd3, %r1;
$L__BB0_1:
    shl.b64 %rd4, %rd3, 2;
    add.s64 %rd5, %rd1, %rd4;
    ld.global.f32 %f1, [%rd5];
    add.s64 %rd6, %rd2, %rd4;
    st.global.f32 [%rd6], %f1;
    add.s64 %rd3, %rd3, 256;
    setp.lt.u64 %p1, %rd3, %rd7;
    @%p1 bra $L__BB0_1;
    ret;
""")


def test_a_loop_pays_its_rounds_each_pass_and_counts_its_traffic_per_pass():
    a = ptx.analyze(LOOP)
    assert a["rounds_loop"] == 1 and a["loops"] == 1
    assert a["ld_bytes_loop"] == 4 and a["st_bytes_loop"] == 4 and a["ld_bytes_out"] == 0
    assert a["sectors_loop"] == 8  # two coalesced 4-byte accesses: 4 sectors each


# A cold path laid out after the exit that jumps back to where it rejoins (how LLVM places
# libdevice's reduction of a huge sin argument): a branch to an earlier label, but no cycle.
COLD_PATH = kernel("""
    mov.u32 %r1, %tid.x;
    cvt.s64.s32 %rd3, %r1;
    shl.b64 %rd4, %rd3, 2;
    add.s64 %rd5, %rd1, %rd4;
    ld.global.f32 %f1, [%rd5];
    setp.gt.f32 %p1, %f1, 0f47CE4780;
    @%p1 bra $L__BB0_3;
$L__BB0_1:
    add.f32 %f2, %f1, %f1;
    add.s64 %rd6, %rd2, %rd4;
    st.global.f32 [%rd6], %f2;
    ret;
$L__BB0_3:
    mul.f32 %f3, %f1, %f1;
    mul.f32 %f4, %f3, %f3;
    mul.f32 %f1, %f4, %f3;
    bra.uni $L__BB0_1;
""")


def test_a_cold_path_that_jumps_back_to_rejoin_is_no_loop():
    a = ptx.analyze(COLD_PATH)
    assert a["loops"] == 0 and a["alu_loop"] == 0 and a["rounds_loop"] == 0
    assert a["st_bytes_out"] == 4 and a["st_bytes_loop"] == 0
    # the same code with a branch that does close a cycle (back to the load) is a loop
    cycle = COLD_PATH.replace("    ret;\n$L__BB0_3:", "    @%p1 bra $L__BB0_4;\n    ret;\n$L__BB0_3:")
    cycle = cycle.replace("    mov.u32 %r1, %tid.x;", "$L__BB0_4:\n    mov.u32 %r1, %tid.x;")
    assert ptx.analyze(cycle)["loops"] == 1


# The head of a loop over a thread's floats (byte offset %rd4), and the pass's first load.
LOOP_HEAD = """
    mov.u32 %r1, %tid.x;
    cvt.s64.s32 %rd3, %r1;
    shl.b64 %rd4, %rd3, 2;
$L__BB0_1:
    add.s64 %rd5, %rd1, %rd4;
    ld.global.f32 %f1, [%rd5];
"""


def test_the_huge_angle_path_of_sin_and_cos_is_not_counted():
    # libdevice's sinf skips its Payne-Hanek reduction when |x| < 105615: here that path is
    # the branch's fall-through, inside a loop, as LLVM lays it out in a grid-stride loop
    body = kernel(LOOP_HEAD + """
        abs.f32 %f2, %f1;
        setp.ltu.f32 %p1, %f2, BOUND;
        @%p1 bra $L__BB0_3;
        mul.f32 %f3, %f1, %f1;
        mul.f32 %f4, %f3, %f3;
        mul.f32 %f5, %f4, %f3;
        mul.f32 %f1, %f5, %f3;
    $L__BB0_3:
        sin.approx.f32 %f6, %f1;
        add.s64 %rd6, %rd2, %rd4;
        st.global.f32 [%rd6], %f6;
        add.s64 %rd4, %rd4, 1024;
        setp.lt.u64 %p2, %rd4, %rd7;
        @%p2 bra $L__BB0_1;
        ret;
    """)
    cold = ptx.analyze(body.replace("BOUND", ptx.HUGE_ANGLE))
    other = ptx.analyze(body.replace("BOUND", "0f3F800000"))  # |x| < 1: a real branch
    assert cold["cold"] == 4 and other["cold"] == 0
    assert other["alu_loop"] - cold["alu_loop"] == 4
    # the cold path laid out after the exit (COLD_PATH, with a jump back) is left out too
    assert ptx.analyze(COLD_PATH)["cold"] == 4


# A loop LLVM unrolled by two (two independent loads a pass) and its remainder loop, marked
# nounroll, which runs at most once more: the pass is the unrolled body alone.
UNROLLED = kernel(LOOP_HEAD + """
    ld.global.f32 %f2, [%rd5+1024];
    add.f32 %f3, %f1, %f2;
    add.f32 %f9, %f9, %f3;
    add.s64 %rd4, %rd4, 2048;
    setp.lt.u64 %p1, %rd4, %rd7;
    @%p1 bra $L__BB0_1;
$L__BB0_2:
    .pragma "nounroll";
    add.s64 %rd6, %rd1, %rd4;
    ld.global.f32 %f4, [%rd6];
    add.f32 %f9, %f9, %f4;
    add.s64 %rd4, %rd4, 1024;
    setp.lt.u64 %p2, %rd4, %rd8;
    @%p2 bra $L__BB0_2;
    add.s64 %rd9, %rd2, %rd4;
    st.global.f32 [%rd9], %f9;
    ret;
""")


def test_the_remainder_loop_of_an_unrolled_loop_is_not_a_second_pass():
    a = ptx.analyze(UNROLLED)
    # the body's two loads are one round a pass; the remainder's load is counted once
    assert a["ld_bytes_loop"] == 8 and a["ld_bytes_out"] == 4
    assert a["rounds_loop"] == 1
    # without the pragma both loops are passes: one load and one round more per pass
    plain = ptx.analyze(UNROLLED.replace('.pragma "nounroll";', ""))
    assert plain["ld_bytes_loop"] == 12 and plain["rounds_loop"] == 2
    # a marked loop with no unrolled body beside it is the loop itself
    alone = ptx.analyze(LOOP.replace("$L__BB0_1:", '$L__BB0_1:\n    .pragma "nounroll";'))
    assert alone["ld_bytes_loop"] == 4 and alone["rounds_loop"] == 1


def test_lane_steps_give_sectors_and_a_known_parameter_makes_a_stride_known():
    assert lanes.sectors(4, 4.0) == 4 and lanes.useful_bytes(4, 4.0) == 128
    assert lanes.sectors(4, 8.0) == 8  # two floats apart: half of every sector unused
    assert lanes.sectors(4, 0.0) == 1 and lanes.useful_bytes(4, 0.0) == 4  # a broadcast
    assert lanes.sectors(4, None) == 32 and lanes.sectors(16, 16.0) == 16
    strided = kernel("""
        ld.param.u64 %rd2, [K_param_7];
        mov.u32 %r1, %tid.x;
        cvt.s64.s32 %rd3, %r1;
        mul.lo.s64 %rd4, %rd3, %rd2;
        shl.b64 %rd5, %rd4, 2;
        add.s64 %rd6, %rd1, %rd5;
        ld.global.f32 %f1, [%rd6];
        ret;
    """)
    unknown = ptx.analyze(strided)
    assert unknown["unknown_steps_out"] == 1 and unknown["sectors_out"] == 32
    x = np.zeros(8, np.float32)  # one 1-D array is 7 parameters; the scalar is the 8th
    values = lanes.parameter_values([x, np.uint64(2)])
    assert values[2] == 8 and values[3] == 4 and values[5] == 8 and values[7] == 2
    known = ptx.analyze(strided, values)
    assert known["unknown_steps_out"] == 0 and known["sectors_out"] == 8


# A thread walking its own row of 64 floats (lane t reads x[t * 64 + i]): every lane's access
# lands on a line of its own, and each line then serves the next 31 passes.
ROW_PER_THREAD = kernel("""
    mov.u32 %r1, %tid.x;
    cvt.s64.s32 %rd3, %r1;
    shl.b64 %rd4, %rd3, 8;
$L__BB0_1:
    add.s64 %rd5, %rd1, %rd4;
    ld.global.f32 %f1, [%rd5];
    add.f32 %f9, %f9, %f1;
    add.s64 %rd4, %rd4, 4;
    setp.lt.u64 %p1, %rd4, %rd7;
    @%p1 bra $L__BB0_1;
    ret;
""")


def test_lines_per_access_and_the_share_of_a_loops_rounds_that_miss_the_l1():
    assert lanes.lines(4, 4.0) == 1 and lanes.lines(16, 16.0) == 4  # coalesced
    assert lanes.lines(4, 0.0) == 1 and lanes.lines(4, 256.0) == 32  # broadcast, row per lane
    assert lanes.lines(4, None) == 32 and lanes.lines(4, 64.0) == 16
    coalesced, rows = ptx.analyze(LOOP), ptx.analyze(ROW_PER_THREAD)
    assert coalesced["miss_loop"] == 1.0 and coalesced["lines_loop"] == 2
    assert rows["lines_loop"] == 32 and rows["miss_loop"] == pytest.approx(1 / 32)
    # the same loop, same passes: the walk's rounds mostly hit; its L1 work is 32 lines a load
    f_c = features.launch_features(coalesced, 1024, 256, 1024 * 256 * 64)
    f_r = features.launch_features(rows, 1024, 256, 1024 * 256 * 64)
    assert f_c["passes"] == 8 and f_r["passes"] == 16  # 64 bytes a thread; 8 or 4 a pass
    assert f_c["hit_rounds"] == 0 and f_c["rounds"] == 8
    assert f_r["rounds"] == pytest.approx(16 / 32) and f_r["hit_rounds"] == pytest.approx(15.5)
    assert f_c["wavefronts"] == f_c["warps"] * 8 * 2 and f_r["wavefronts"] == f_r["warps"] * 16 * 32
    c = dict(model.PRIORS)
    assert model.roofs(f_r, c)["l1"] == pytest.approx(32 * model.roofs(f_c, c)["l1"])
    assert model.roofs(f_r, c)["latency"] < model.roofs(f_c, c)["latency"]


# A loop whose pass takes one of two arms: copy a float (a load and a store) or add two (two
# loads and a store).  The counts hold both arms; a pass moves the heavier one's bytes at most.
ARMS = kernel("""
    mov.u32 %r1, %tid.x;
    cvt.s64.s32 %rd3, %r1;
    shl.b64 %rd4, %rd3, 2;
$L__BB0_1:
    setp.lt.u64 %p2, %rd4, %rd8;
    @%p2 bra $L__BB0_3;
    add.s64 %rd5, %rd1, %rd4;
    ld.global.f32 %f1, [%rd5];
    add.s64 %rd6, %rd2, %rd4;
    st.global.f32 [%rd6], %f1;
    bra.uni $L__BB0_4;
$L__BB0_3:
    add.s64 %rd9, %rd1, %rd4;
    ld.global.f32 %f2, [%rd9];
    ld.global.f32 %f3, [%rd9+4096];
    add.f32 %f4, %f2, %f3;
    add.s64 %rd10, %rd2, %rd4;
    st.global.f32 [%rd10], %f4;
$L__BB0_4:
    add.s64 %rd4, %rd4, 1024;
    setp.lt.u64 %p1, %rd4, %rd7;
    @%p1 bra $L__BB0_1;
    ret;
""")


def test_a_pass_through_a_loop_with_two_arms_moves_the_heavier_arms_bytes():
    a = ptx.analyze(ARMS)
    assert a["useful_loop"] == 5 * 128 and a["arm_share_loop"] == pytest.approx(3 / 5)
    assert ptx.analyze(LOOP)["arm_share_loop"] == 1.0
    both = features.launch_features(a, 1024, 256, 1024 * 256 * 48)
    plain = features.launch_features({**a, "arm_share_loop": 1.0}, 1024, 256, 1024 * 256 * 48)
    assert both["passes"] == pytest.approx(4) and plain["passes"] == pytest.approx(2.4)


# Each thread stores its pair partner's float: the even lane reads x[i + 1], the odd lane
# x[i - 1], in two arms of an if/else.  Which arm a lane takes is set by SELECT below.
PAIR_ARMS = kernel("""
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mad.lo.s32 %r4, %r2, %r3, %r1;
    SELECT
    cvt.s64.s32 %rd3, %r4;
    shl.b64 %rd4, %rd3, 2;
    add.s64 %rd5, %rd1, %rd4;
    add.s64 %rd6, %rd2, %rd4;
    @%p1 bra $L__BB0_2;
    ld.global.f32 %f1, [%rd5+-4];
    st.global.f32 [%rd6], %f1;
    bra.uni $L__BB0_3;
$L__BB0_2:
    ld.global.f32 %f2, [%rd5+4];
    neg.f32 %f3, %f2;
    st.global.f32 [%rd6], %f3;
$L__BB0_3:
    ret;
""")
BY_LANE = "and.b32 %r5, %r4, 1;\n    setp.eq.s32 %p1, %r5, 0;"  # the lane's parity
BY_BLOCK = "and.b32 %r5, %r2, 1;\n    setp.eq.s32 %p1, %r5, 0;"  # the block's parity
BY_BOUND = "setp.ge.s32 %p1, %r4, 1000000;"  # past the end: one warp at most splits


def test_a_branch_that_splits_a_warp_runs_its_arms_one_after_the_other():
    split = ptx.analyze(PAIR_ARMS.replace("SELECT", BY_LANE), block=(256, 1, 1))
    together = ptx.analyze(PAIR_ARMS.replace("SELECT", BY_BLOCK), block=(256, 1, 1))
    bound = ptx.analyze(PAIR_ARMS.replace("SELECT", BY_BOUND), block=(256, 1, 1))
    assert split["divergent_branches"] == 1
    assert together["divergent_branches"] == 0 and bound["divergent_branches"] == 0
    # the odd lanes' load waits for the even lanes' arm: two latencies, not one
    assert split["rounds"] == 2 and together["rounds"] == 1 and bound["rounds"] == 1
    # a warp's traffic: both arms where its lanes split, one arm where it goes one way
    assert split["sectors_path_out"] == 16 and together["sectors_path_out"] == 8
    assert split["sectors_out"] == together["sectors_out"] == 16
    # and a thread moves one arm's bytes either way, so every thread of the launch works
    assert split["arm_share_out"] == together["arm_share_out"] == pytest.approx(0.5)
    f = features.launch_features(split, 4096, 256, 4096 * 256 * 8)
    assert f["warps"] == pytest.approx(4096 * 256 / 32)


def test_the_warp_evaluated_has_the_blocks_threads_and_the_launchs_parameters():
    from ropelab.grader.predict import diverge

    # j < half, half a parameter: a warp of a 64-thread block stays together when half is 32,
    # and splits when half is 8; a block of 16 threads is half a warp, which half = 8 splits
    body = PAIR_ARMS.replace("SELECT", "ld.param.u64 %rd9, [K_param_2];\n"
                             "    cvt.u32.u64 %r6, %rd9;\n    setp.lt.u32 %p1, %r1, %r6;")
    kern = ptx.parse(body)
    assert diverge.divergent_branches(kern, [None, None, 32], (64, 1, 1)) == set()
    assert len(diverge.divergent_branches(kern, [None, None, 8], (64, 1, 1))) == 1
    assert len(diverge.divergent_branches(kern, [None, None, 8], (16, 1, 1))) == 1
    assert diverge.divergent_branches(kern, [None, None, 16], (16, 1, 1)) == set()
    # an unknown parameter (a pointer, here) leaves the guard unknown: the warp stays together
    assert diverge.divergent_branches(kern, None, (64, 1, 1)) == set()


def test_a_choice_of_two_addressings_takes_the_wider_step():
    # a = selp(first + 2 j, first + j, interleaved): a launch takes one; the wider steps 8 bytes
    body = kernel("""
        ld.param.u64 %rd9, [K_param_2];
        mov.u32 %r1, %tid.x;
        cvt.u64.u32 %rd3, %r1;
        shl.b64 %rd4, %rd3, 1;
        setp.eq.s64 %p1, %rd9, 2;
        selp.b64 %rd5, %rd4, %rd3, %p1;
        shl.b64 %rd6, %rd5, 2;
        add.s64 %rd7, %rd1, %rd6;
        ld.global.f32 %f1, [%rd7];
        ret;
    """)
    a = ptx.analyze(body)
    assert a["unknown_steps_out"] == 0 and a["sectors_out"] == 8


def test_the_lane_of_a_warp_and_the_row_of_a_warp():
    # lane = tid & 31 steps by 1; row = tid >> 5 is one value across an aligned warp
    body = kernel("""
        mov.u32 %r1, %tid.x;
        and.b32 %r2, %r1, 31;
        shr.u32 %r3, %r1, 5;
        cvt.u64.u32 %rd3, %r3;
        shl.b64 %rd4, %rd3, 8;
        cvt.u64.u32 %rd5, %r2;
        shl.b64 %rd6, %rd5, 3;
        add.s64 %rd7, %rd4, %rd6;
        add.s64 %rd8, %rd1, %rd7;
        ld.global.f32 %f1, [%rd8];
        ret;
    """)
    a = ptx.analyze(body)
    assert a["sectors_out"] == 8 and a["unknown_steps_out"] == 0  # 8 bytes a lane


def test_instruction_classes_and_shared_memory():
    body = kernel("""
        .shared .align 4 .b8 _cudapy_smem_1[512];
        div.u32 %r1, %r2, %r3;
        div.s64 %rd1, %rd2, %rd3;
        sin.approx.ftz.f32 %f1, %f2;
        st.shared.f32 [%rd4], %f1;
        bar.sync 0;
        shfl.sync.bfly.b32 %r4|%p1, %r5, %r6, %r7, %r8;
        ret;
    """)
    a = ptx.analyze(body)
    assert (a["div32_out"], a["div64_out"], a["sfu_out"], a["shared_out"], a["bar_out"],
            a["shfl_out"]) == (1, 1, 1, 1, 1, 1)
    assert a["shared_bytes"] == 512


# --------------------------------------------------------------------------------------------
# Features and the model
# --------------------------------------------------------------------------------------------

def test_occupancy_limits():
    assert features.occupancy(32, 16, 0)["resident_warps"] == 32  # 32 blocks of one warp
    assert features.occupancy(1024, 16, 0)["resident_warps"] == 64
    assert features.occupancy(256, 128, 0)["limit"] == "registers"
    assert features.occupancy(256, 16, 100 * 1024)["blocks_per_sm"] == 2


def _counts(**more):
    base = {"rounds": 1, "rounds_loop": 0, "useful_out": 512.0, "useful_loop": 0.0,
            "sectors_out": 16, "sectors_loop": 0, "alu_out": 40, "regs": 20}
    base.update(more)
    return base


def test_waves_and_passes_follow_the_launch():
    one = features.launch_features(_counts(), (32768,), (64,), 33554432)
    assert one["passes"] == 1 and one["waves"] == pytest.approx(65536 / (132 * 64))
    tiny = features.launch_features(_counts(), (131072,), (32,), 33554432)
    # the same working threads, half the warps resident (32 blocks of one warp): twice the waves
    assert tiny["resident_warps"] == 32 and tiny["waves"] == pytest.approx(2 * one["waves"])
    assert tiny["blocks"] == 131072
    looped = features.launch_features(_counts(useful_out=0.0, useful_loop=512.0,
                                              sectors_loop=16, rounds_loop=1),
                                      (1024,), (256,), 33554432)
    assert looped["passes"] == pytest.approx(33554432 / (1024 * 256) / 16)
    with pytest.raises(ValueError, match="move some bytes"):
        features.launch_features(_counts(), (1,), (32,), 0)


CONSTANTS = dict(model.PRIORS)


def _synthetic_rows(c, n=40, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for k in range(n):
        counts = _counts(rounds=int(rng.integers(1, 4)), alu_out=int(rng.integers(20, 400)),
                         sectors_out=int(rng.choice([16, 32, 64])))
        grid = int(rng.choice([1024, 8192, 32768, 131072]))
        block = int(rng.choice([32, 64, 256, 1024]))
        f = features.launch_features(counts, (grid,), (block,), int(rng.choice([8e6, 3.3e7, 1e8])))
        rows.append({"key": f"r{k}", "family": f"fam{k % 5}", "measured_us": model.predict([f], c),
                     "copy_us": f["dram_bytes"] / 4e6, "launches": [f]})
    return rows


def test_the_fit_recovers_the_time_of_rows_made_by_the_model():
    truth = dict(CONSTANTS, round_us=1.2, block_us=0.06, launch_us=2.0)
    rows = _synthetic_rows(truth)
    fitted = model.fit(rows, prior_weight=1e-6)
    for r in rows:
        assert model.predict(r["launches"], fitted) == pytest.approx(r["measured_us"], rel=0.02)


def test_a_planted_tenfold_error_in_one_constant_is_caught_by_the_validation():
    rows = record.rows_for_fit(recorded_fit())
    kept = recorded_fit()["meta"]["constants"]
    lines = record.evaluate(rows, kept, recorded_fit()["meta"]["trivial_fraction_of_copy"])
    good = model.summary(lines)
    # A bandwidth ten times too high leaves the memory ceiling its fixed ramp, which the other
    # ceilings partly cover, so the bar is "more than doubles"; a latency ten times too short
    # only stops binding where it rarely binds, so it is planted ten times too long.
    for name, factor in (("round_us", 10), ("dram_bytes_per_us", 10),
                         ("dram_bytes_per_us", 0.1), ("block_us", 10)):
        if True:
            planted = dict(kept, **{name: kept[name] * factor})
            bad = model.summary(record.evaluate(rows, planted, 1.0))
            assert bad["model_mean"] > 2 * good["model_mean"], (name, factor)
            assert bad["model_max"] > 0.3


def test_the_smooth_max_is_the_largest_ceiling_raised_a_little():
    f = features.launch_features(_counts(), (32768,), (64,), 33554432)
    roofs = model.roofs(f, CONSTANTS)
    total = model.launch_us(f, CONSTANTS) - CONSTANTS["launch_us"]
    assert max(roofs.values()) <= total <= 1.25 * max(roofs.values())
    assert model.binding(f, CONSTANTS) == max(roofs, key=roofs.get)
    assert model.predict([f, f], CONSTANTS) == pytest.approx(2 * model.launch_us(f, CONSTANTS))


# --------------------------------------------------------------------------------------------
# The record
# --------------------------------------------------------------------------------------------

STALE = ("data/predict is stale: run python -m ropelab.grader.predict --record, then "
         "python scripts/notebooks/build.py 07")


def test_the_recorded_constants_are_the_fit_of_the_recorded_rows():
    rec = recorded_fit()
    rows = record.rows_for_fit(rec)
    refit = model.fit(rows)
    for name, value in rec["meta"]["constants"].items():
        assert refit[name] == pytest.approx(value, rel=1e-3), (name, STALE)
    for r, stored in zip(rows, rec["rows"]):
        assert model.predict(r["launches"], rec["meta"]["constants"]) == pytest.approx(
            stored["fit_us"], rel=1e-3)


def test_the_recorded_validation_is_its_rows_held_out_errors():
    rec = recorded_fit()
    v = rec["meta"]["validation"]
    lines = [{k: r[k] for k in ("key", "family", "measured_us", "model_us", "model_error",
                               "trivial_us", "trivial_error")} for r in rec["rows"]]
    for line in lines:
        assert line["model_error"] == pytest.approx(line["model_us"] / line["measured_us"] - 1,
                                                    abs=2e-4)
    again = model.summary(lines)
    assert again["model_mean"] == v["model_mean"] and again["interval_80"] == v["interval_80"]
    assert set(again["families"]) == set(v["families"])
    assert again["families_worse_than_trivial"] == v["families_worse_than_trivial"]


def test_the_copy_curve_returns_the_recorded_copies_and_keeps_bandwidth_beyond():
    curve = recorded_fit()["meta"]["copy_curve"]
    for size, us in curve:
        assert record.predict_from_curve(curve, size) == pytest.approx(us)
    size, us = curve[-1]
    assert record.predict_from_curve(curve, 2 * size) == pytest.approx(2 * us)


def test_the_error_bar_text():
    from ropelab.grader import predict

    why = predict.explain_launches([features.launch_features(_counts(), (32768,), (64,),
                                                             33554432)])
    low, high = predict.interval()
    assert why["low"] == pytest.approx(why["us"] * low)
    assert why["high"] == pytest.approx(why["us"] * high)
    text = predict.figure(why)
    assert text == f"{why['us']:.1f} us (80% range {why['low']:.1f}-{why['high']:.1f} us)"
    assert low < 1 < high


# --------------------------------------------------------------------------------------------
# A learner's launches and the GPU run's plumbing
# --------------------------------------------------------------------------------------------

def test_derived_signatures_match_the_steps_census_signatures():
    from ropelab.grader import steps
    from ropelab.grader.predict.learner import kernel_step_launch, signature

    checked = 0
    for step in steps.STEPS.values():
        if step.kind != "kernel" or not step.signature:
            continue
        launch = kernel_step_launch(step, step.cases()[0], None)
        assert signature(launch.args).replace(" ", "") == step.signature.replace(" ", ""), step.id
        checked += 1
    assert checked >= 20


def test_a_launch_steps_launches_are_recorded_not_run():
    from ropelab.grader import steps
    from ropelab.grader.verify import load_solution, solution_path
    from ropelab.grader.predict.learner import launch_step_launches

    step = steps.get("00.4")
    fn = load_solution(solution_path(step)).SOLUTIONS["00.4"]
    case = step.timing_case()  # 2 million pairs: far too many to simulate
    (launch,) = launch_step_launches(step, case, fn)
    n_pairs = int(case.inputs["n_pairs"])
    threads = launch.block[0]
    assert launch.grid[0] == (n_pairs + threads - 1) // threads
    assert launch.args[0].nbytes == case.inputs["x"].nbytes  # a description, not the data


def test_a_later_launch_reading_what_an_earlier_one_was_given_is_warm_and_waits_less():
    from ropelab.grader import steps
    from ropelab.grader.verify import load_solution, solution_path
    from ropelab.grader.predict.learner import launch_step_launches

    step = steps.get("08.4")  # stage one writes partial sums, stage two reads them
    fn = load_solution(solution_path(step)).SOLUTIONS["08.4"]
    first, second = launch_step_launches(step, step.timing_case(), fn)
    assert first.warm == 0.0
    partials = second.args[0].nbytes
    assert second.warm == pytest.approx(partials / (partials + second.args[1].nbytes))
    f = features.launch_features(_counts(), (2,), (256,), 262400, warm=1.0)
    cold = dict(f, warm=0.0)
    c = recorded_fit()["meta"]["constants"]
    assert model.roofs(f, c)["latency"] < model.roofs(cold, c)["latency"]


def test_verdict_time_without_a_gpu_prints_the_prediction_with_its_error_bar():
    from ropelab.grader import learner_time, steps
    from ropelab.grader.grading import Verdict
    from ropelab.grader.verify import load_solution, solution_path
    from ropelab.grader import predict

    step = steps.get("00.4")  # a launch step: its one launch is found on the simulator
    fn = load_solution(solution_path(step)).SOLUTIONS["00.4"]
    verdict = Verdict("00.4", "PASS", ["PASS"], subject=(step, fn))
    text = learner_time.predicted(verdict)
    why = predict.explain_step(step, fn)
    assert f"Predicted H200 time for {why['case']}" in text
    assert predict.figure(why) in text and "80% of the measured times" in text
    assert f"{int(why['launches'][0]['features']['blocks'])} blocks of 128 threads" in text
    without = Verdict("00.4", "PASS", ["PASS"])
    assert "needs the graded function" in learner_time.predicted(without)
    assert "splits each warp" not in text
    # the pair swap's solution sends a pair's even lane one way and the odd lane the other
    swap = steps.get("ramp.8")
    fn = load_solution(solution_path(swap)).SOLUTIONS["ramp.8"]
    text = learner_time.predicted(Verdict("ramp.8", "PASS", ["PASS"], subject=(swap, fn)))
    assert "a branch splits each warp" in text


def test_a_broken_set_gives_error_entries_not_exceptions(tmp_path):
    from ropelab.grader.predict.entries import load_set

    (tmp_path / "learner_01.py").write_text("raise RuntimeError('no')\n")
    (tmp_path / "learner_02.py").write_text("ENTRIES = [('99.9', 'x', print), ('00.1',)]\n")
    found = load_set(tmp_path, "probe")
    assert [e.error.split(":")[0] for e in found] == ["import", "entry", "entry"]


def test_the_timing_parent_restarts_a_faulted_child_and_keeps_every_row(tmp_path):
    from ropelab.grader.predict import timings
    from ropelab.grader.predict.entries import Entry

    entries = [Entry("probe", "m", k, "00.1", f"k{k}") for k in range(4)]
    # A stub child: answers the meta line, then one row per entry; "faults" on m/1 once.
    stub = tmp_path / "child.py"
    stub.write_text(textwrap.dedent(f"""
        import json, os, sys
        payload = json.loads(sys.stdin.read())
        print(json.dumps({{"meta": {{"gpu": "stub"}}}}), flush=True)
        flag = {str(tmp_path / "faulted")!r}
        for key in payload["keys"]:
            if key == "probe/m/1" and not os.path.exists(flag):
                open(flag, "w").close()
                print(json.dumps({{"key": key, "set": "probe", "step": "00.1",
                                  "status": "fault", "error": "poisoned"}}), flush=True)
                sys.exit(3)
            print(json.dumps({{"key": key, "set": "probe", "step": "00.1", "status": "ok",
                              "median_us": 1.0, "copy_us": 1.0}}), flush=True)
    """))
    writer = timings.Writer(tmp_path, "timings", "stamp")
    restarts = timings.run_gpu(entries, writer, repeats=3, deadline_s=60, workers=0,
                               directories=[], training=False,
                               meta_path=tmp_path / "meta.json", show=lambda *a: None,
                               child=(sys.executable, str(stub)))
    writer.close()
    rows = (tmp_path / "timings-probe-stamp.csv").read_text().splitlines()
    assert restarts == 1 and len(rows) == 5  # header + one row per entry, none twice
    assert sum("fault" in r for r in rows) == 1 and sum(",ok," in r for r in rows) == 3
    assert json.loads((tmp_path / "meta.json").read_text())["gpu"] == "stub"


class _StandInTimer:
    """Timer's interface without a GPU: fixed samples; the launch runs once (on the
    simulator) after the flush, as a timed launch would, so that its output can be checked."""

    fill_us = 300.0
    last_host_us = [40.0]

    def flush(self):
        pass

    def time(self, launch, repeats=None):
        self.flush()
        launch()
        return [10.0, 11.0, 12.0, 13.0, 14.0]


def test_a_timing_row_checks_the_output_first_and_reads_the_timer():
    from ropelab.grader import steps
    from ropelab.grader.verify import load_solution, solution_path
    from ropelab.grader.predict import gpu_child
    from ropelab.grader.predict.entries import Entry

    step = steps.get("00.1")
    solution = load_solution(solution_path(step))
    case = step.cases()[1]  # the check runs on the simulator: a small case (64 floats)
    right = Entry("probe", "m", 0, "00.1", "right", solution.SOLUTIONS["00.1"])
    row = gpu_child.time_entry(right, case, _StandInTimer(), 5)
    assert row["status"] == "ok" and row["median_us"] == 12.0 and row["p20_us"] == 10.8
    assert row["copy_us"] == 12.0 and row["host_us"] == 40.0 and row["case"] == case.label
    wrong = Entry("probe", "m", 1, "00.1", "wrong", solution.copy_thread_index_only)
    assert gpu_child.time_entry(wrong, case, _StandInTimer(), 5)["status"] == "wrong"


# A kernel of this test file, compiled by the prediction's compiler process (with an empty
# cache, so the process really runs): the coupling with the census's rebuild is tested here.
from numba import cuda, float32  # noqa: E402


@cuda.jit(fastmath=True)
def _probe_kernel(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = x[i] * 2.0


def test_a_kernel_compiles_without_a_gpu_and_reports_its_registers(tmp_path, monkeypatch):
    from ropelab.grader.predict import compiled
    from ropelab.grader.predict.learner import Launch, describe, features_of, light

    monkeypatch.setenv("ROPELAB_CACHE", str(tmp_path))
    monkeypatch.setattr(compiled, "DATA_FILE", tmp_path / "none.json")
    x = np.zeros(1 << 20, np.float32)
    launch = Launch(_probe_kernel, (4096, 1, 1), (256, 1, 1), 0, [light(x), light(x)])
    (built,) = compiled.compiled(describe([launch]))
    assert built.get("error") is None and built["regs"] > 0
    (f,) = features_of([launch], [built])
    assert f["dram_bytes"] == 2 * x.nbytes and f["rounds"] == 1
    assert math.isclose(f["sectors"], 8 * f["warps"])  # a coalesced load and store per warp


def test_unsteady_rows_are_left_out_of_the_fit_and_of_a_held_out_check():
    def row(key, spread):
        return {"key": key, "spread": spread}

    rows = [row("training/learner_t00/0", 1.05), row("training/learner_t00/1", 2.4),
            row("set_a/learner_02/0", 20.9), row("training/solutions/3", 1.5)]
    kept, left = record.steady_rows(rows)
    assert [r["key"] for r in kept] == ["training/learner_t00/0", "training/solutions/3"]
    assert any("unsteady" in x and "learner_t00/1" in x for x in left)
    assert any("unsteady" in x and "set_a/learner_02/0" in x for x in left)


@cuda.jit
def _thread_zero_sums(x, out, n):
    # thread 0 of each block sums the row alone while the others wait at the barrier
    if cuda.threadIdx.x == 0:
        total = float32(0.0)
        for k in range(n):
            total += x[cuda.blockIdx.x * n + k]
        out[cuda.blockIdx.x] = total
    cuda.syncthreads()


@cuda.jit
def _every_thread_one(x, out, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = x[i]


def test_the_block_profile_sees_one_thread_looping_alone_and_nothing_in_even_work():
    from ropelab.grader.predict.learner import Launch, block_lines, light

    x = np.ones(64 * 200, dtype=np.float32)
    out = np.zeros(64, dtype=np.float32)
    args = [x, out, 200]
    alone = block_lines(Launch(_thread_zero_sums, (64, 1, 1), (64, 1, 1), 0,
                                 [light(a) for a in args], values=args))[0]
    assert alone >= 200  # at least a line per iteration, beyond the block's mean
    assert out[0] == 200 and out[1] == 0  # only the first block ran
    even = [x, np.zeros_like(x), x.size]
    assert block_lines(Launch(_every_thread_one, (50, 1, 1), (256, 1, 1), 0,
                                [light(a) for a in even], values=even))[0] == 0.0
    # past the budget the block is stopped and its work counts as even
    from ropelab.grader.predict import learner

    small = learner.PROFILE_BUDGET
    try:
        learner.PROFILE_BUDGET = 50
        assert block_lines(Launch(_thread_zero_sums, (64, 1, 1), (64, 1, 1), 0,
                                    [light(a) for a in args], values=args))[0] == 0.0
    finally:
        learner.PROFILE_BUDGET = small
    f = features.launch_features(_counts(), (64,), (64,), x.nbytes)
    c = recorded_fit()["meta"]["constants"]
    assert model.roofs(dict(f, serial_lines=alone), c)["latency"] > model.roofs(
        dict(f, serial_lines=0.0), c)["latency"]


def test_a_launch_functions_copies_and_allocations_are_counted_and_cost_time():
    from ropelab.grader.predict.learner import counted_transfers

    host = {}
    with counted_transfers(host):
        d = cuda.to_device(np.zeros(100, dtype=np.float32))  # an allocation and a copy
        scratch = cuda.device_array(10, dtype=np.int32)  # an allocation
        scratch.copy_to_device(np.arange(10, dtype=np.int32))  # a copy
        d.copy_to_device(cuda.to_device(np.ones(100, dtype=np.float32)))  # device to device
        back = d.copy_to_host()  # a copy back
    assert back[0] == 1.0
    assert host == {"h2d": 3, "h2d_bytes": 400 + 40 + 400, "d2h": 1, "d2h_bytes": 400,
                    "allocs": 3}
    f = features.launch_features(_counts(), (2,), (256,), 4096, host=host)
    c = recorded_fit()["meta"]["constants"]
    plain = features.launch_features(_counts(), (2,), (256,), 4096)
    assert model.launch_us(f, c) - model.launch_us(plain, c) == pytest.approx(
        4 * c["copy_call_us"] + 1240 / c["pcie_bytes_per_us"] + 3 * c["alloc_us"])


def test_a_check_on_another_gpu_fits_the_constants_on_that_runs_training_rows(tmp_path):
    import csv

    from ropelab.grader.predict.entries import training_entries

    run = record.DATA_DIR / "h100"
    source = run / "timings-training-20261206T224902.csv"
    with open(source, newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["status"] == "ok"]
    keys = {e.key for e in training_entries()}
    picked = [r for r in rows if r["key"] in keys][:3]
    assert len(picked) == 3
    small = tmp_path / "timings-training-20261206T224902.csv"
    with open(small, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(picked[0]))
        writer.writeheader()
        writer.writerows(picked)
    (tmp_path / "timings-20261206T224902.meta.json").write_text(
        (run / "timings-20261206T224902.meta.json").read_text())
    fitted = record.fit_on_run(small)
    assert fitted["fitted_rows"] == 3 and "H100" in fitted["gpu"]
    recorded = recorded_fit()["meta"]
    assert set(fitted["constants"]) == set(recorded["constants"])
    assert fitted["constants"] != recorded["constants"]  # fitted on these rows, not the record's
    assert 0 < fitted["trivial_fraction_of_copy"] <= 1.5
    empty = tmp_path / "timings-training-20261206T000000.csv"
    empty.write_text(",".join(picked[0]) + "\n")
    with pytest.raises(ValueError, match="no timed training rows"):
        record.fit_on_run(empty)
    assert json.loads((run / "check-set_g-20261206T224902-v3.json").read_text())["model"].startswith(
        "fitted on data/predict/h100/timings-training-")


@cuda.jit
def _carry_loop(out, n, stride):
    # each thread carries its index forward by a stride: the inner loop runs stride // n times,
    # a trip count the PTX does not hold
    i = cuda.grid(1)
    pair = i + stride
    token = 0
    while pair >= n:
        pair -= n
        token += 1
    out[i] = token


@cuda.jit
def _lane_zero_loops(out, n):
    # lane 0 of each warp loops n times; its 31 warp-mates wait for it to leave the loop
    i = cuda.grid(1)
    total = 0
    if cuda.threadIdx.x % 32 == 0:
        for k in range(n):
            total += k
    out[i] = total


def test_thread_lines_see_a_data_dependent_trip_count_and_a_warp_waits_for_its_busiest_lane():
    from ropelab.grader.predict.learner import Launch, block_lines, light, warp_mean

    out = np.zeros(64, dtype=np.int64)
    few = [out, 8, 16]
    many = [out, 8, 1600]

    def lines(args, grid=(1, 1, 1), block=(64, 1, 1)):
        return block_lines(Launch(_carry_loop, grid, block, 0, [light(a) for a in args],
                                  values=args))

    _, short = lines(few)
    _, long = lines(many)
    assert long > 20 * short and long >= 3 * 200  # three lines a pass, 200 passes
    assert out[0] == 200
    _, divergent = block_lines(Launch(_lane_zero_loops, (1, 1, 1), (64, 1, 1), 0,
                                      [light(a) for a in [out, 300]], values=[out, 300]))
    assert divergent >= 300  # each warp as long as its lane 0, not the block's mean
    assert warp_mean({0: 10, 1: 2, 32: 4}) == 7.0
    # a block stopped at the budget: the threads that ended count, the stopped one not
    from ropelab.grader.predict import learner

    budget = learner.PROFILE_BUDGET
    try:
        learner.PROFILE_BUDGET = 3000
        serial, stopped = lines(many, block=(16, 4, 1))
    finally:
        learner.PROFILE_BUDGET = budget
    assert serial == 0.0 and 0.8 * long <= stopped <= 1.2 * long


def _serial_launch(**over):
    f = {"warps": 1.0, "resident_warps": 32.0, "threads_per_block": 32.0, "waves": 1.0,
         "rounds": 0.0, "issue": 0.0, "blocks": 1.0, "sectors": 0.0, "dram_bytes": 128.0,
         "serial_lines": 100.0, "loop_global": 1.0}
    return {**f, **over}


def test_a_warps_serial_work_is_paid_once_the_longer_of_its_chain_and_its_extra_lines():
    c = dict(model.PRIORS)
    f = _serial_launch(issue=990.0)  # one warp of 32 threads, its loop reading global memory
    chain = c["serial"] * 990.0 / model.CLOCK_PER_US  # 1 us
    for lines in (0.0, 10.0, 100.0):  # 0.3 us and 3 us of one thread's extra lines
        got = model.roofs({**f, "serial_lines": lines}, c)["latency"]
        line = model.serial_line_us(f, c)
        assert line == pytest.approx(c["line_us"], rel=1e-3)  # one warp alone: an idle machine
        assert got == pytest.approx(c["wave_us"] + max(chain, line * lines))


def test_a_serial_loop_over_shared_memory_waits_less_a_line_than_one_over_global_memory():
    c = dict(recorded_fit()["meta"]["constants"])
    shared, global_ = _serial_launch(loop_global=0.0), _serial_launch()
    assert model.serial_line_us(shared, c) == pytest.approx(c["shared_line_us"])
    assert c["shared_line_us"] < c["line_us"]
    assert model.roofs(shared, c)["latency"] < model.roofs(global_, c)["latency"]


def test_a_global_serial_loop_waits_longer_where_the_launch_fills_the_machine():
    c = dict(recorded_fit()["meta"]["constants"])
    full = _serial_launch(warps=model.SMS * 64.0, resident_warps=64.0, blocks=model.SMS * 32.0,
                          threads_per_block=64.0)
    assert model.serial_line_us(full, c) == pytest.approx(c["line_us"] + c["loaded_line_us"])
    assert model.serial_line_us(full, c) > model.serial_line_us(_serial_launch(), c)


def test_looping_threads_of_blocks_sharing_a_scheduler_take_turns():
    c = dict(recorded_fit()["meta"]["constants"])
    # 32 blocks of 64 threads resident per SM, each with one looping thread: 8 a scheduler
    many = _serial_launch(loop_global=0.0, warps=model.SMS * 64.0, resident_warps=64.0,
                          blocks=model.SMS * 64.0, threads_per_block=64.0)
    turns = 8 * c["serial_line_cycles"] / model.CLOCK_PER_US
    assert model.serial_line_us(many, c) == pytest.approx(max(c["shared_line_us"], turns))
    assert model.serial_line_us(many, c) > model.serial_line_us(_serial_launch(loop_global=0.0), c)
    # a grid of two such blocks has one a SM: no turns to take
    few = dict(many, blocks=2.0, warps=4.0)
    assert model.serial_line_us(few, c) == pytest.approx(
        max(c["shared_line_us"], c["serial_line_cycles"] / model.CLOCK_PER_US))


def test_a_loop_reading_global_memory_is_marked_in_the_features():
    plain = features.launch_features(_counts(), (2,), (256,), 4096)
    looped = features.launch_features({**_counts(), "global_loop": 4}, (2,), (256,), 4096)
    assert plain["loop_global"] == 0.0 and looped["loop_global"] == 1.0


def test_the_lines_ceiling_runs_a_small_grid_on_the_schedulers_it_has():
    c = dict(recorded_fit()["meta"]["constants"])
    one_warp = {"blocks": 1, "threads_per_block": 32, "thread_lines": 10_000}
    full = {"blocks": 132 * 4, "threads_per_block": 32, "thread_lines": 10_000}
    assert model.lines_us(one_warp, c) == pytest.approx(model.lines_us(full, c))
    assert model.lines_us(one_warp, c) == pytest.approx(
        c["line_cycles"] * 10_000 / model.CLOCK_PER_US)
    assert model.lines_us(dict(full, blocks=132 * 8), c) == pytest.approx(
        2 * model.lines_us(full, c))
    assert model.lines_us(dict(full, thread_lines=0.0), c) == 0.0


def test_the_check_options_are_refused_without_a_check_and_a_fit_needs_its_runs_timings(capsys):
    from ropelab.grader.predict.__main__ import main

    for argv in (["--fit-timings", "x.csv"], ["--save", "x.json"], ["--timings", "x.csv"]):
        with pytest.raises(SystemExit):
            main(argv)
        assert "only with --check-set" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--check-set", "data/heldout/set_g", "--fit-timings", "x.csv"])
    assert "needs --timings" in capsys.readouterr().err
    with pytest.raises(ValueError, match="not of the run"):
        record.check_set("data/heldout/set_g", "data/predict/h100/timings-set_g-20261206T224902.csv",
                         fit_csv="data/predict/h100/timings-training-20260101T000000.csv")
