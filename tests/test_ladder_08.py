"""Notebook 08's ladder (the backward pass) has the shape issues 17 and 20 ask for, and its step
references are pieces of ropelab's float64 backward.

Read from the step registry, the solution file and the notebook source; no kernel runs here
(``exercises --verify``, run by tests/test_exercises.py, grades every solution, wrong attempt
and starter).
"""

import ast
import inspect
import textwrap

import numpy as np

from ropelab import reference
from ropelab.grader import steps, verify
from ropelab.grader.steps import nb08

# A step's recorded wrong attempts: at least the two typical ones, and one more for each refusal
# the grader learned since (a barrier, thread ownership, a launch rule, an argument type); each
# is one graded child in --verify, so a few, not a catalogue.
MOST_WRONG = 6

LADDER = steps.for_notebook("08")


def _body_is_empty(source: str) -> bool:
    """The function holds a docstring (optional) and ``pass``, nothing else."""
    fn = next(n for n in ast.walk(ast.parse(textwrap.dedent(source)))
              if isinstance(n, ast.FunctionDef))
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    return len(body) == 1 and isinstance(body[0], ast.Pass)


def _starter_function(step) -> str:
    cell = step.starter_source()
    assert cell is not None, f"{step.id}: no starter cell in the notebook source"
    return cell[cell.index(f"def {step.kernel_name}("):]


def _solutions():
    return verify.load_solution(verify.solution_path(LADDER[0]))


def test_ladder_climbs_rotation_norm_reduction_launch():
    assert [s.id for s in LADDER] == [f"08.{k}" for k in range(1, len(LADDER) + 1)]
    assert len(LADDER) >= 3
    names = [s.kernel_name for s in LADDER]
    assert names[:3] == ["inverse_rotate_head", "rms_norm_backward_head", "dw_partials"]
    empty = [s.id for s in LADDER if _body_is_empty(_starter_function(s))]
    assert len(empty) >= 2, f"steps starting from an empty body: {empty}"
    assert [s.kind for s in LADDER].count("launch") >= 1


def test_the_partial_sums_step_is_race_checked_and_its_solution_waits_at_a_barrier():
    module = _solutions()
    shared = [s for s in LADDER if s.shared]
    assert [s.id for s in shared] == ["08.3"]
    source = inspect.getsource(module.SOLUTIONS["08.3"].py_func)
    assert "cuda.shared.array(" in source and "cuda.syncthreads()" in source
    # and the attempt without the barrier is expected to be caught as a race
    assert any(fragment == "race" for _, fragment in module.WRONG["08.3"])


def test_every_step_has_a_solution_and_two_to_six_wrong_attempts():
    module = _solutions()
    assert set(module.SOLUTIONS) == {s.id for s in LADDER}
    assert set(module.WRONG) == {s.id for s in LADDER}
    for step in LADDER:
        attempts = module.WRONG[step.id]
        assert 2 <= len(attempts) <= MOST_WRONG, f"{step.id}: {len(attempts)} wrong attempts"
        assert all(isinstance(fragment, str) and fragment for _, fragment in attempts)
        if step.kind == "launch":  # a host function that launches, not a kernel
            assert not hasattr(module.SOLUTIONS[step.id], "py_func")
        else:
            assert hasattr(module.SOLUTIONS[step.id], "py_func")
        # a fragment found in the step's general hint would pass whatever the verdict said
        for _, fragment in attempts:
            assert fragment not in step.hint, (step.id, fragment)


def test_no_race_attempt_without_a_race_check():
    module = _solutions()
    for step in LADDER:
        if any(fragment == "race" for _, fragment in module.WRONG[step.id]):
            assert step.shared, step.id


def test_launch_cases_give_host_values():
    for step in LADDER:
        if step.kind != "launch":
            continue
        for case in step.cases():
            for name in ("tokens", "heads"):
                assert type(case.inputs[name]) is int, (step.id, name)


def test_partial_rows_add_up_to_the_weight_gradient():
    """Whatever the grid, step 08.3's expected partial rows sum to step 08.4's dw."""
    for case in LADDER[2].cases():
        rows = int(case.inputs["rows"])
        products = (case.inputs["dz"].astype(np.float64) * case.inputs["n"]).reshape(rows, 64)
        partial_rows = case.expected.reshape(case.grid[0], 64)
        np.testing.assert_allclose(partial_rows.sum(axis=0), products.sum(axis=0), rtol=1e-12)
        assert not np.allclose(partial_rows[0], products.sum(axis=0)) or case.grid[0] == 1


def test_step_references_compose_to_ropelab_backward():
    """Rotation back, norm backward and the row sum, as the steps grade them, give
    reference.fused_qknorm_rope_backward's dx and weight gradients."""
    rng = np.random.default_rng(8)
    tokens, hq, hk, hv, d = 5, 2, 1, 1, nb08.ROW
    qkv = rng.standard_normal((tokens, (hq + hk + hv) * d))
    grad = rng.standard_normal(qkv.shape)
    qw, kw = rng.uniform(0.5, 1.5, d), rng.uniform(0.5, 1.5, d)
    pos = rng.integers(0, 1024, tokens)
    dqkv, dqw, dkw = reference.fused_qknorm_rope_backward(
        qkv, grad, num_heads_q=hq, num_heads_k=hk, num_heads_v=hv, head_dim=d, q_weight=qw,
        k_weight=kw, positions=pos, eps=nb08.EPS)
    heads = qkv.reshape(tokens, -1, d)
    grads = grad.reshape(tokens, -1, d)
    weights = [qw] * hq + [kw] * hk
    dws = {0: np.zeros(d), 1: np.zeros(d)}
    for h in range(hq + hk):
        x = heads[:, h]
        r = np.sqrt((x * x).mean(axis=1) + nb08.EPS)
        n = x / r[:, None]
        dz = nb08._turn(grads[:, h], pos, nb08._freqs(), -1.0)  # step 08.1's reference
        dx = nb08._norm_backward(dz * weights[h], n, r)  # step 08.2's reference
        np.testing.assert_allclose(dx, dqkv.reshape(tokens, -1, d)[:, h], rtol=1e-9, atol=1e-9)
        dws[int(h >= hq)] += nb08._partials(dz * n, 1)  # step 08.3's, one block: the sum
    np.testing.assert_allclose(dws[0], dqw, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(dws[1], dkw, rtol=1e-9, atol=1e-9)


def test_stage_two_is_ropelabs_own_reduction():
    """The launch step's given second stage is the package's kernel (written once), and the
    solution launches it rather than a copy of its own."""
    from ropelab.kernels.fused_qknorm_rope import backward_reduce as qknorm_rope_backward_reduce

    assert nb08.reduce_partials_kernel.py_func is qknorm_rope_backward_reduce.make_reduce(nb08.REDUCE_ROWS)
    source = inspect.getsource(_solutions().SOLUTIONS["08.4"])
    assert "reduce_partials_kernel[" in source and "dw_partials[" in source
