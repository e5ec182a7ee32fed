"""The CUDA C++ twin of the fused kernel (ropelab.measure.baselines): compiled by NVRTC without a GPU.

Running it needs a GPU and CuPy (``baselines.check_twin()``, the bench's ``cuda_fused`` rows);
here NVRTC from cuda-bindings compiles the source with the options CuPy uses, and the PTX is
held to the same access widths as the numba kernel's census.  Budget: about 3 s.
"""

import numpy as np
import pytest

from ropelab.measure import baselines
from ropelab.kernels import fused_qknorm_rope as kmod
from ropelab.measure.census import count_ptx

pytest.importorskip("cuda.bindings.nvrtc")


@pytest.fixture(scope="module")
def twin_ptx():
    return baselines.compile_fused_twin_ptx(baselines.fused_twin_names(head_dims=(64, 128)))


@pytest.mark.parametrize("storage", ["bfloat16", "float16", "float32"])
@pytest.mark.parametrize("interleave", [True, False], ids=["gptj", "neox"])
def test_twin_moves_a_lane_as_the_numba_kernel_does(twin_ptx, storage, interleave):
    body = twin_ptx[baselines.fused_twin_name(storage, 128, interleave)]
    counts = count_ptx(body)
    lanes = baselines.FUSED_TWIN_STORAGE[storage][2]
    problem = _problem(storage, interleave)
    assert lanes == kmod.pick_lanes_per_head(problem, 32 // lanes)
    split = kmod.neox_split(problem)
    if split:  # 16-bit NeoX: two 64-bit runs of qkv and of the weight, no partner shuffle
        assert counts["ld_global"] == {"64": 4, "128": 1, "32": 1}, counts["ld_global"]
        assert counts["st_global"] == {"64": 2}
    else:  # one 128-bit access of qkv and of the weight; GPT-J: frequencies in one 128 too
        wide = 3 if interleave and lanes == 16 else 2
        assert counts["ld_global"]["128"] == wide, counts["ld_global"]
        assert set(counts["ld_global"]) == {"128", "32"}
        assert counts["st_global"] == {"128": 1}
    assert body.count("shfl.sync.bfly") == (5 if lanes == 32 else 4)
    assert body.count("shfl.sync.idx") == (0 if interleave or split else 128 // lanes)
    assert counts["f64"] == 0 and counts["int_divrem"] == 0 and counts["local_bytes"] == 0
    if storage != "float32":  # the same one-instruction pack as numba's build
        kind = "bf16x2" if storage == "bfloat16" else "f16x2"
        assert body.count(f"cvt.rn.{kind}.f32") == 4


def test_twin_compiles_partial_rotary_too(twin_ptx):
    body = twin_ptx[baselines.fused_twin_name("bfloat16", 128, False, full=False)]
    assert body.count("shfl.sync.idx") == 8  # partial NeoX: partners by shuffle, as numba


def test_twin_at_head_dim_64_uses_64_bit_accesses_for_16_bit_storage(twin_ptx):
    counts = count_ptx(twin_ptx[baselines.fused_twin_name("bfloat16", 64, True)])
    assert counts["ld_global"]["64"] == 2 and counts["st_global"] == {"64": 1}


def test_twin_is_registered_beside_the_fused_rows():
    assert baselines.TWINS["fused_qknorm_rope"] == "cuda_fused"
    if baselines.available()["cupy"]:
        from ropelab.measure.bench import baselines as baseline_rows

        names = [e.name for e in baseline_rows.entries()]
        assert {"cuda_fused", "cuda_fused_neox"} <= set(names)


def test_check_twin_needs_a_gpu_and_cupy():
    if baselines.available()["cupy"] and not __import__("ropelab").SIMULATED:
        pytest.skip("a GPU with CuPy: the lead runs check_twin() there")
    with pytest.raises(RuntimeError, match="needs a GPU and CuPy"):
        baselines.check_twin()


def _problem(storage, interleave):
    from ropelab.ops import fused
    from ropelab.ops.arrays import inspect_array

    qkv = np.zeros((1, 3 * 128), kmod.STORAGES[storage])
    return fused.build_problem(inspect_array(qkv, "qkv"), num_heads_q=1, num_heads_k=1,
                               num_heads_v=1, head_dim=128, interleave=interleave)
