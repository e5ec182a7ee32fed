"""How the fused kernel maps (token, head) onto lanes, warps and blocks: the choices that
do not depend on the kernel's code (see the package docstring for why each is made)."""

from __future__ import annotations

from ...validate import check_bool, check_int, fail
from .._device import WARP
from ..plan import STORAGE_DTYPES as STORAGES

HEAD_DIMS = tuple(range(64, 513, 64))  # E = head_dim / 32 must be even (pairs stay in a lane)

HEADS_PER_WARP_CHOICES = (1, 2, 4)
# Heads per warp by storage when the caller does not choose.  float32 is at 91-95% of the copy
# with one head per warp and 128-bit accesses (data/bench) and gains nothing from more; 16-bit
# storage needs two (see the module docstring).
HEADS_PER_WARP = {"float32": 1, "float16": 2, "bfloat16": 2}
LANES_PER_HEAD_CHOICES = (32, 16)
# Lanes per head by storage when a warp holds two or more heads and the caller does not choose:
# 16-bit storage splits the warp (a lane then holds 16 bytes of a 128-element head, one 128-bit
# access); float32 keeps whole warps, heads one after the other, as measured so far.
LANES_PER_HEAD = {"float32": 32, "float16": 16, "bfloat16": 16}

_LOG2 = {32: 5, 16: 4}


def vector_bytes_for(storage: str, elements_per_lane: int) -> int:
    """The widest vector access (16 or 8 bytes, 0 for none) that moves a lane's elements.

    A lane's first element sits at ``lane * elements_per_lane`` of a head, so the access size
    must divide the lane's bytes for every lane to stay aligned.  float32 keeps its 128-bit path
    only (no 64-bit one: it is at the copy rate already).
    """
    nbytes = elements_per_lane * STORAGES[storage].itemsize
    if nbytes % 16 == 0:
        return 16
    if nbytes % 8 == 0 and storage != "float32":
        return 8
    return 0



def pick_warps_per_block(head_groups: int) -> int:
    """Warps per token in a block: 8, 4, 2 or 1 with the fewest idle warps in the last block
    column (ties go to the larger; the block is filled with tokens, see :func:`launch_config`)."""
    best, waste_best = 8, None
    for w in (8, 4, 2, 1):
        waste = (-head_groups) % w / (head_groups + (-head_groups) % w)
        if waste_best is None or waste < waste_best - 1e-12:
            best, waste_best = w, waste
    return best


# Warps per block the launcher aims at: a block of 2 warps (zimage's 30 head pairs) is legal,
# but an SM then holds its limit of 32 blocks, and short blocks spend their time being launched
# and retired (the 2026-12-01 profile: 64-thread blocks at 82% of the copy).  Rows of warps
# for several tokens keep every block at 8 warps.
BLOCK_WARPS = 8


def launch_config(problem, warps_per_block=None, heads_per_warp=1, tokens_per_block=None,
                  values=False):
    """``((token_blocks, head_blocks), (threads_x, tokens_per_block))``.

    ``blockIdx.x * blockDim.y + threadIdx.y`` is the token, ``blockIdx.y * warps_per_block +
    warp`` the warp within the token's heads.  By default a block has ``BLOCK_WARPS`` warps:
    ``8 / warps_per_block`` tokens (fewer when there are fewer tokens).  ``values`` (the
    out-of-place kernel): the V heads' warps, ``heads_per_warp`` heads each, follow the Q and
    K warps of each token.
    """
    groups = -(-(problem.heads_q + problem.heads_k) // heads_per_warp)  # warps needed per token
    if values:
        groups += -(-problem.heads_v // heads_per_warp)
    wpb = warps_per_block or pick_warps_per_block(groups)
    tpb = tokens_per_block or max(1, min(BLOCK_WARPS // wpb, problem.tokens))
    return (-(-problem.tokens // tpb), (groups + wpb - 1) // wpb), (wpb * WARP, tpb)


def split_fits(interleave: bool, full_rotary: bool, storage: str) -> bool:
    """Where the split NeoX mapping applies: NeoX, every dim rotated, 16-bit storage (float32
    is memory-bound with the shuffles already).  The CUDA C++ twin follows the same rule."""
    return not interleave and full_rotary and storage != "float32"


def neox_split(problem, requested=None) -> bool:
    """Whether NeoX pairs are held whole by one lane (each lane takes ``E / 2`` elements of each
    half), by default where :func:`split_fits`.  ``requested=False`` keeps the shuffle mapping
    (the controlled comparison); ``True`` where it cannot apply is refused."""
    fits = split_fits(problem.interleave, problem.rotary_dim == problem.head_dim, problem.storage)
    if requested is None:
        return fits
    if check_bool("neox_split", requested) and not fits:
        fail("neox_split=True needs interleave=False, rotary_dim == head_dim and 16-bit storage")
    return bool(requested)


def neox_fits(problem, lanes_per_head: int, split: bool = False) -> bool:
    """Whether each half of the rotated dims fills whole lanes of a ``lanes_per_head`` group
    (always, when pairs are split across a lane's two runs)."""
    per_lane = problem.head_dim // lanes_per_head
    return problem.interleave or split or problem.rotary_dim % (2 * per_lane) == 0


def pick_lanes_per_head(problem, heads_per_warp: int, requested=None, split: bool = False) -> int:
    """Lanes per head: the caller's choice (checked) or the storage's default where it fits."""
    if requested is not None:
        lanes = check_int("lanes_per_head", requested)
        if lanes not in LANES_PER_HEAD_CHOICES:
            fail(f"lanes_per_head must be one of {LANES_PER_HEAD_CHOICES}, got {lanes}")
        if lanes * heads_per_warp < WARP:
            fail("lanes_per_head=16 puts two heads in a warp: it needs heads_per_warp >= 2")
        if not neox_fits(problem, lanes, split):
            fail(f"with interleave=False and lanes_per_head={lanes}, rotary_dim must be a "
                 f"multiple of {2 * problem.head_dim // lanes}; got {problem.rotary_dim}")
        return lanes
    lanes = LANES_PER_HEAD[problem.storage] if heads_per_warp > 1 else WARP
    return lanes if neox_fits(problem, lanes, split) else WARP


