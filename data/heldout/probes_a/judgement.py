"""My judgement of each probe's verdict message (read by out/grade_probes.py)."""

NOTES = {
    # 00
    "uninit_out_accumulate": "verdict right; message WRONG cause: says 'never written' (the NaN "
        "sentinel + x keeps the sentinel's payload), but every element was written; the real "
        "cause, reading out before writing it, is not named",
    "guard_le_off_by_one": "right; names the cause (thread past the end, guard i < n)",
    "pair_index_not_doubled": "right; the hint gives the 2p / 2p+1 formula, close to the cause",
    "launch_block_not_warp_multiple": "WRONG verdict: the step text says 'a multiple of 32', the "
        "grader only checks <= 1024, coverage and idle blocks",
    "elements_even_thread_writes_pair": "WRONG verdict: contract 'thread i writes out[i] alone' "
        "is not checked (values only); the writer map exists (verdict.show) but is not graded",
    # 01
    "angles_guard_off_by_one": "right; names the array and the guard",
    "launch_extra_idle_block": "right; names the idle block and the rounding",
    "f64_int32_times_float32": "right verdict; message half-right: lists 'a bare literal or int / "
        "int division' but not the actual cause (int32 * float32), which the notebook text does name",
    "signed_floor_division": "right; names the cause and the fix exactly",
    # 02
    "rows_thread0_does_row": "WRONG verdict: thread 0 writes every pair of the row; the step's "
        "mapping (thread = pair) is not checked",
    "rows_range_loop_division": "verdict defensible (a div.u64 really is in the PTX), but the "
        "message misleads: it says index math needs no division, while the learner wrote none; "
        "the division is range()'s trip count with a run-time step",
    "f64_float32_times_threadidx": "right verdict; message generic (bare literal / int / int), "
        "real cause is float32 * int32 counter",
    "int32_threadidx_plus_uint64": "right verdict; message generic; real cause is int32 + uint64 "
        "typed float64, not a literal or a division",
    "launch_block_over_1024": "right; names the limit and the case",
    # 03
    "tail_guard_off_by_one": "right; names the odd tail and the guard",
    "launch_grid_from_pairs": "right; idle blocks named (not that pairs were used for quads, "
        "but close enough)",
    "loads_after_store_starter": "right; names the cause",
    # 04
    "table_step_still_pow": "right; names the cause",
    "barrier_in_guard": "WRONG verdict: syncthreads() inside `if idx < total_pairs` passes; the "
        "simulator releases a barrier once every live thread has arrived and threads that return "
        "stop counting, so divergent barriers are invisible",
    "barriers_in_both_arms": "WRONG verdict: two syncthreads() call sites in an if/else pass; the "
        "simulator has one barrier per block whatever the call site",
    "shared_race_no_barrier": "right; names the race, the threads and the fix",
    "cache_row_by_token": "right; names the cause",
    "partner_ignored": "right verdict; hint 'pairs of the other layout' is near the cause (the "
        "partner offset ignored)",
    # 05
    "f64_bare_literal": "right; names a bare literal",
    "grid_stride_one_angle": "WRONG verdict (false refusal): the kernel executes one sin and one "
        "cos per pair; the census counts static instructions, and LLVM unswitched the grid-stride "
        "loop on n_pairs == 0 (Numba's // guards a zero divisor), so the PTX holds two copies "
        "of the body: 4 sin/cos (checked in the PTX)",
    "frequency_never_stepped": "right; names the cause exactly",
    "grid_stride_units_pow": "WRONG verdict (arguable): one pow per work unit, none in the slot "
        "loop; 'pow_in_loop' counts a pow inside any loop, the grid-stride loop included. The "
        "message ('once per slot') is untrue for this kernel",
    # 06
    "butterfly_missing_step": "right; names the cause",
    "f64_int_literal_mean": "right verdict; message generic (says 'bare literal (2.0)'; the "
        "literal here is an int, 64)",
    "shuffle_in_divergent_branch": "right verdict (error); the message names divergence, though "
        "as 'ended (an early return?)' rather than 'shuffle inside a branch'",
    "barrier_in_lane0_branch": "right (caught as a race, the visible symptom); does not say the "
        "barrier itself is in divergent code",
    "reduction_forgets_a_warp": "right verdict; hint says the lanes agree on a wrong sum, near "
        "the cause, but does not say a warp's partial is missing",
    "v_heads_normalized": "right; names the cause",
    "launch_block_per_token_1280": "WRONG verdict: passes because the largest graded shape has "
        "8 heads (256 threads), not the 40 heads the notebook says; at 33+ heads this launch is "
        "illegal",
    # 08
    "forward_turn_not_inverse": "right; names the cause exactly",
    "f64_int32_times_float32_08": "WRONG verdict: 08 steps have no census at all, so float64 "
        "arithmetic passes (the 08 text does not state a no-float64 rule either)",
    "f64_bare_literal_08": "WRONG verdict: as above, no census in 08",
    "times_r_not_divide": "right; names the cause",
    "shared_race_no_barrier_dw": "right; names the race",
    "extra_barrier_thread0": "WRONG verdict: an extra syncthreads() only thread 0 reaches "
        "passes (the simulator's barrier counts only threads still running)",
    "reduction_forgets_a_group": "right verdict; the hint is the full solution line, not the "
        "cause (the typical-mistake list has no 'three of four groups' entry)",
    "shared_atomic_reduction": "WRONG verdict (false refusal): cuda.atomic.add on a shared "
        "element is reported as a race; the simulator's atomic is a locked read-modify-write that "
        "goes through the race detector's plain read/write path",
    "launch_block_per_row": "WRONG verdict: the step says at most ceil(rows / 4) blocks; the "
        "idle-block check runs only when the launch function makes one launch, so a two-launch "
        "step is never checked",
    "atomic_stage_two_unzeroed": "right verdict; message WRONG cause: 'never written' (atomics "
        "added into the NaN sentinel, which keeps its payload), while the cause is an un-zeroed out",
}
