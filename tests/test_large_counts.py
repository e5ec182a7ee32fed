"""Element counts past 2**31 (the class of bug behind flash-attention #1195): every kernel is
either correct there or refuses clearly, shown without allocating anything big.

* The plain variants index with 64-bit integers: their plans for a problem of more than 2**32
  elements cover every work item with a grid inside CUDA's limits, and pass the sizes as 64-bit
  arguments (a 32-bit one would wrap).
* block2d launches one block per token: past 2**31 - 1 tokens its grid would exceed CUDA's
  limit, and the plan refuses.
* The fused kernel indexes in 32 bits: a qkv of 2**32 elements or more is refused before launch.
  The test hands it a fake device array (``__cuda_array_interface__`` only, no memory).
"""

import numpy as np
import pytest

import ropelab
from ropelab import kernels
from ropelab.kernels.plan import MAX_GRID
from ropelab.problem import RopeProblem

BIG = RopeProblem(tokens=2**21 + 3, heads=1, head_dim=4096, rotary_dim=4096)  # 2**33 + 12288 elements


class FakeDeviceArray:
    """Metadata of a device array that does not exist: enough for validation, nothing to launch."""

    def __init__(self, shape, dtype):
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": np.dtype(dtype).str,
                                         "data": (1 << 20, False), "strides": None, "version": 3}


@pytest.mark.parametrize("name", [n for n in kernels.VARIANTS if n != "block2d"])
def test_plain_variants_cover_more_than_2_to_the_32_elements_with_64_bit_sizes(name):
    assert BIG.elements > 2**32
    plan = kernels.get(name).plan(BIG)
    threads = plan.block[0] * plan.block[1] * plan.block[2]
    assert plan.grid[0] * threads * _items_per_thread(name) >= BIG.elements // 2  # every pair
    assert all(g <= limit for g, limit in zip(plan.grid, MAX_GRID))
    ints = [s for s in plan.scalars if isinstance(s, np.integer)]
    assert ints and all(s.dtype.itemsize == 8 for s in ints), \
        "every size and index argument is 64-bit: a 32-bit one would wrap past 2**32 elements"


def _items_per_thread(name):
    return {"pack4": 2, "pack4_scalar": 2, "pair_sincos": 4}.get(name, 1)


def test_block2d_refuses_a_grid_past_cudas_limit():
    too_many = RopeProblem(tokens=2**31, heads=1, head_dim=8, rotary_dim=8)
    with pytest.raises(ropelab.RopeInputError, match="grid"):
        kernels.get("block2d").plan(too_many)
    assert kernels.get("block2d").plan(BIG).grid[0] == BIG.tokens  # below the limit: fine


def test_fused_kernel_refuses_2_to_the_32_elements_before_launch(launches):
    heads, head_dim = (32, 32, 32), 128
    tokens = 2**32 // (sum(heads) * head_dim) + 1
    qkv = FakeDeviceArray((tokens, sum(heads) * head_dim), np.float32)
    w = FakeDeviceArray((head_dim,), np.float32)
    pos = FakeDeviceArray((tokens,), np.int32)
    with pytest.raises(ropelab.RopeInputError, match="32-bit indexing"):
        ropelab.fused_qknorm_rope(qkv, num_heads_q=32, num_heads_k=32, num_heads_v=32,
                                  head_dim=head_dim, q_weight=w, k_weight=w, positions=pos)
    assert launches == []


def test_positions_past_int32_are_refused(launches):
    x = np.zeros((2, 8), np.float32)
    with pytest.raises(ropelab.RopeInputError, match="int32"):
        ropelab.rope(x, positions=np.array([0, 2**31], np.int64))
    assert launches == []
