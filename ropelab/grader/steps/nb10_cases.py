"""The test cases of notebook 10's ladder (serving): ragged batches over a small paged cache,
and values that meet every branch of the e4m3 rounding.

A batch is built as a serving engine builds one: requests with a number of new tokens and a
number already cached, each with a block table of cache blocks; token ``p`` of a request sits
in block ``table[p // BLOCK_SIZE]`` at offset ``p % BLOCK_SIZE``, slot ``block * BLOCK_SIZE +
offset``; padding tokens at the end have slot -1.  Two choices make the typical mistakes show
where the grader looks first: the blocks below the batch's token count are never handed out
(a kernel that writes row ``token`` instead of row ``slot`` lands there, in memory order before
any right row), and the cache's last block is kept free (a padding token whose slot -1 was not
skipped wraps around to the last row, in Numba as in NumPy).  Every slot no token maps to is
NaN in the expected cache: it must stay untouched (:func:`ropelab.grader.grading.wrong_mask`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ... import fp8, reference, reference_kv
from ...tolerance import max_angle
from ..grading import Case
from .cases import MAX_POSITION, base, blocks, rng_for, tolerance

BLOCK_SIZE = 4  # slots per cache block: small, so that a request spans several blocks
HEAD_DIM = 64  # steps 3 and 4: two floats per lane of a warp
HEADS_Q, HEADS_K, HEADS_V = 2, 1, 1  # a row of qkv: two Q heads, then K, then V
ROW = (HEADS_Q + HEADS_K + HEADS_V) * HEAD_DIM
K_AT, V_AT = HEADS_Q * HEAD_DIM, (HEADS_Q + HEADS_K) * HEAD_DIM
EPS = 1e-6
WARPS_PER_BLOCK = 4  # steps 3 and 4: one warp per token, four tokens a block
THREADS = 64  # steps 1 and 2: one thread per float


@dataclass
class Batch:
    """A ragged batch: per-token positions and slots, and the cache they index."""

    query_lens: tuple  # new tokens per request
    context_lens: tuple  # tokens already in the cache per request
    positions: np.ndarray  # int32[tokens] (padding: 0)
    slots: np.ndarray  # int64[tokens] (padding: -1)
    num_slots: int  # num_blocks * BLOCK_SIZE

    @property
    def tokens(self) -> int:
        return int(self.slots.size)

    def label(self) -> str:
        pad = int((self.slots < 0).sum())
        return (f"{len(self.query_lens)} request{'s' if len(self.query_lens) > 1 else ''}, "
                f"{self.tokens} tokens{f' ({pad} padding)' if pad else ''}, "
                f"{self.num_slots // BLOCK_SIZE} blocks of {BLOCK_SIZE} slots")


def batch(rng, query_lens, context_lens, pad: int = 0) -> Batch:
    """Block tables drawn at random from the blocks the module docstring leaves free."""
    tokens = sum(query_lens) + pad
    need = [-(-(q + c) // BLOCK_SIZE) for q, c in zip(query_lens, context_lens)]
    low = -(-tokens // BLOCK_SIZE)  # blocks a row-number mistake would write: never handed out
    pool = rng.permutation(np.arange(low, low + sum(need)))
    num_blocks = low + sum(need) + 1  # + the last block, kept free
    positions, slots, start = [], [], 0
    for q, c, n in zip(query_lens, context_lens, need):
        table = pool[start:start + n]
        start += n
        p = np.arange(c, c + q)
        positions.append(p)
        slots.append(table[p // BLOCK_SIZE] * BLOCK_SIZE + p % BLOCK_SIZE)
    positions.append(np.zeros(pad, np.int64))
    slots.append(np.full(pad, -1, np.int64))
    return Batch(tuple(query_lens), tuple(context_lens),
                 np.concatenate(positions).astype(np.int32),
                 np.concatenate(slots).astype(np.int64), num_blocks * BLOCK_SIZE)


def scattered(rows: np.ndarray, slots, num_slots: int, *, wrap: bool = False) -> np.ndarray:
    """A cache of ``num_slots`` rows (NaN: untouched) with ``rows[t]`` at row ``slots[t]`` for
    every token whose slot is not negative; ``wrap``: negative slots too, as Python indexes."""
    out = np.full((num_slots, rows.shape[1]), np.nan)
    for t, s in enumerate(slots):
        if s >= 0 or wrap:
            out[s] = rows[t]
    return out


# --- step 1: the slot scatter --------------------------------------------------------------

SCATTER_SHAPES = (((3,), (0,), 0, 2, 8), ((2, 4, 1), (0, 5, 2), 2, 2, 8),
                  ((5, 3), (6, 0), 1, 4, 4))  # (query_lens, context_lens, pad, heads, head_dim)


def scatter_cases(big: bool) -> list[Case]:
    rng = rng_for("10.1")
    cases = []
    for query, context, pad, heads, dim in (((1024,) * 4, (0,) * 4, 0, 8, 128),) if big \
            else SCATTER_SHAPES:
        b = batch(rng, query, context, pad)
        row = heads * dim
        k = rng.standard_normal((b.tokens, row)).astype(np.float32)
        expected = scattered(k, b.slots, b.num_slots)
        alternatives = []
        if not big:
            by_head_dim = np.full(b.num_slots * row, np.nan)
            for t, s in enumerate(b.slots):
                if s >= 0:
                    by_head_dim[s * dim:s * dim + row] = k[t]
            alternatives = [
                ("a padding token was written: its slot is -1, and a negative index wraps "
                 "around to the cache's last row (Numba indexes as Python does); skip tokens "
                 "whose slot is negative", scattered(k, b.slots, b.num_slots, wrap=True)),
                ("row `token` of the cache was written: the token's row is its slot, "
                 "slot_mapping[token]", scattered(k, np.arange(b.tokens), b.num_slots)),
                ("a cache row is all the heads of a slot, heads * head_dim floats: the row "
                 "starts at slot * heads * head_dim, not slot * head_dim", by_head_dim),
            ]
        cases.append(Case(
            label=f"{b.label()}, {heads} heads of {dim}",
            inputs={"k": k.ravel(), "slot_mapping": b.slots, "tokens": np.int64(b.tokens),
                    "heads": np.int64(heads), "head_dim": np.int64(dim)},
            grid=(blocks(k.size, THREADS),), block=(THREADS,),
            expected=expected.ravel(), tol=0.0,
            locate=lambda e, r=row: f"cache slot {e // r}, float {e % r}",
            unit=lambda e: [e], alternatives=alternatives,
            bytes_moved=2 * k.nbytes + b.slots.nbytes,
            owner=_scatter_owner(b.slots, b.num_slots, row),
        ))
    return cases


def _scatter_owner(slots, num_slots: int, row: int) -> np.ndarray:
    """Thread ``token * row + c`` writes float ``c`` of its slot's row; -1: nobody's."""
    owner = np.full((num_slots, row), -1, np.int64)
    for t, s in enumerate(slots):
        if s >= 0:
            owner[s] = t * row + np.arange(row)
    return owner.ravel()


# --- step 2: FP8 e4m3 rounding -------------------------------------------------------------

def _f32(bits) -> np.ndarray:
    return np.asarray(bits, np.uint32).view(np.float32)


# Values (already scaled) that meet every branch: ties between neighbours in the normal range
# (even and odd kept mantissa), 448 and the ties and values past it, infinity and NaN of both
# signs, the smallest normal, subnormal ties (2**-10 rounds to 0, 3 * 2**-10 to 2 * 2**-9),
# signed zeros, float32 subnormals.
SPECIAL = np.concatenate([
    np.array([0.0, -0.0, 1.0, -1.0, 1.0625, 1.1875, -1.0625, 2.5, 3.75, 0.1, 416.0, 432.0,
              440.0, 448.0, -448.0, 460.0, 464.0, 470.0, 480.0, 1e6, -1e30, np.inf, -np.inf,
              2.0 ** -6, 2.0 ** -6 * 1.0625, 2.0 ** -7, 2.0 ** -9, 2.0 ** -10, 3 * 2.0 ** -10,
              5 * 2.0 ** -10, -7 * 2.0 ** -10, 2.0 ** -11, 0.00976, -0.0137], np.float32),
    _f32([0x7FC00000, 0xFFC00000, 0x00000001, 0x80400000]),  # NaN, -NaN, float32 subnormals
]).astype(np.float32)


def _integer_rounding(y: np.ndarray, *, ties_up=False, truncate=False, saturate=True,
                      subnormals=True) -> np.ndarray:
    """e4m3 codes of ``y`` (float32) with one typical mistake switched on (the right rule is
    :func:`ropelab.fp8.from_float32`, which these reproduce with every switch at its default)."""
    b = y.view(np.uint32).astype(np.int64)
    sign, a = (b >> 24) & 0x80, b & 0x7FFFFFFF
    bias = 0x80000 if ties_up else 0x7FFFF + ((a >> 20) & 1)
    normal = (a - (120 << 23) + (0 if truncate else bias)) >> 20
    right = fp8.from_float32(y).astype(np.int64) & 0x7F
    out = np.where(a >= 0x3C800000, normal, right if subnormals else 0)
    if saturate:
        out = np.where(a >= 0x43E00000, 0x7E, out)
    out = np.where(a > 0x7F800000, 0x7F, out)
    return (out | sign).astype(np.float64)


def _fp8_diagnose(y: np.ndarray):
    """Names the range of the value a wrong code belongs to, where its rule is easy to miss."""
    def diagnose(got, e):
        v = y[e]
        if np.isnan(v):
            return ("x * inv_scale is NaN here: e4m3fn's NaN is S.1111.111, 0x7F with the "
                    "sign bit of the input (0xFF when float32 bit 31 is set)")
        if abs(v) >= 448:
            return ("x * inv_scale is at or past 448 (or infinite) here: e4m3fn has no "
                    "infinity, so the cache saturates every such value to S.1111.110 = 448, "
                    "0x7E or 0xFE")
        if np.isfinite(got[e]) and int(got[e]) == int(fp8.from_float32(v)) ^ 0x80:
            return "the sign is wrong: bit 7 of the code is bit 31 of the float32"
        if 0 < abs(v) < 2.0 ** -6:
            return ("x * inv_scale is below 2**-6 here, e4m3's subnormal range: the code is "
                    "|v| / 2**-9 rounded to nearest even, not zero and not the normal formula "
                    "(adding 2**14 rounds |v| to a multiple of 2**-9 in float32)")
        return None
    return diagnose


def fp8_cases(big: bool) -> list[Case]:
    rng = rng_for("10.2")
    cases = []
    shapes = ((1 << 20, 1.0 / 0.037),) if big else ((SPECIAL.size, 1.0), (5, 1.0 / 0.037),
                                                    (150, 1.0 / 0.037))
    for n, inv in shapes:
        inv_scale = np.float32(inv)
        if n == SPECIAL.size:
            x = SPECIAL.copy()
        else:  # a spread that reaches saturation after scaling, and the subnormals
            x = (rng.standard_normal(n) * 10.0 ** rng.uniform(-4, 1.5, n)).astype(np.float32)
        y = x * inv_scale  # the float32 product the cache rounds
        expected = fp8.from_float32(y).astype(np.float64)
        alternatives = []
        if not big:
            alternatives = [
                ("truncated: the 20 dropped mantissa bits must round the kept 3 to nearest "
                 "(add 0x7FFFF plus the lowest kept bit, then shift)",
                 _integer_rounding(y, truncate=True)),
                ("a tie went up: a value exactly halfway between two e4m3 neighbours rounds "
                 "to the one whose last mantissa bit is 0 (add 0x7FFFF + odd, not 0x80000)",
                 _integer_rounding(y, ties_up=True)),
                ("divided by inv_scale: the cache holds x * inv_scale (inv_scale = 1 / scale)",
                 fp8.from_float32(x / inv_scale).astype(np.float64)),
                ("values below 2**-6 were flushed to zero: they are e4m3 subnormals, "
                 "multiples of 2**-9", _integer_rounding(y, subnormals=False)),
            ]
        case = Case(
            label=f"{n} values, inv_scale {float(inv_scale):.6g}",
            inputs={"x": x, "inv_scale": inv_scale, "n": np.int64(n)},
            grid=(blocks(n, THREADS),), block=(THREADS,),
            expected=expected, tol=0.0,
            locate=lambda e, x=x, y=y: f"x[{e}] = {float(x[e])!r}, x * inv_scale = "
                                       f"{float(y[e])!r}",
            unit=lambda e: [e], alternatives=alternatives,
            bytes_moved=x.nbytes + n, owner=np.arange(n, dtype=np.int64))
        case.diagnose = _fp8_diagnose(y)
        cases.append(case)
    return cases


# --- steps 3 and 4: the K/V write of the fused kernel --------------------------------------

def kv_expected(qkv, k_weight, positions, slots, inv_freq, num_slots) -> np.ndarray:
    """The cache ``[2, num_slots, HEAD_DIM]`` (K rows, then V rows; NaN: untouched) in float64,
    by ropelab's serving reference, :func:`ropelab.reference_kv.fused_qknorm_rope_kv`."""
    empty = np.full((num_slots, 1, HEAD_DIM), np.nan)
    _, k_cache, v_cache = reference_kv.fused_qknorm_rope_kv(
        qkv.astype(np.float64), num_heads_q=HEADS_Q, num_heads_k=HEADS_K, num_heads_v=HEADS_V,
        head_dim=HEAD_DIM, q_weight=np.ones(HEAD_DIM), k_weight=k_weight, positions=positions,
        slot_mapping=slots, k_cache=empty, v_cache=empty, eps=EPS, interleave=True,
        freqs=inv_freq.astype(np.float64))
    return np.concatenate([k_cache.ravel(), v_cache.ravel()])


def kv_mistake(qkv, k_weight, positions, slots, inv_freq, num_slots, *, norm=True,
               rotate=True, weigh=True, v_normed=False, wrap=False, floats=HEAD_DIM) -> np.ndarray:
    """:func:`kv_expected` with one typical mistake switched on, written out in float64 (a
    test checks that with none it is :func:`kv_expected`)."""
    def head(x):
        x = x.astype(np.float64)
        if norm:
            x = x / np.sqrt((x * x).sum(axis=1, keepdims=True) / floats + EPS)
        if weigh:
            x = x * k_weight.astype(np.float64)
        return reference.rope(x, positions, freqs=inv_freq.astype(np.float64)) if rotate else x

    k_rows, v_rows = head(qkv[:, K_AT:V_AT]), qkv[:, V_AT:].astype(np.float64)
    if v_normed:
        v_rows = head(qkv[:, V_AT:])
    both = np.concatenate([scattered(k_rows, slots, num_slots),
                           scattered(v_rows, slots, num_slots)])
    for t, s in enumerate(slots):
        if s < 0 and wrap:  # slot -1 of the K half is the V half's last row, and the reverse
            both[s], both[num_slots + s] = k_rows[t], v_rows[t]
    return both.ravel()


def kv_case(b: Batch, rng, *, big: bool, extra=None) -> Case:
    """A case of steps 3 and 4 over batch ``b`` (``extra(*args)``: more alternatives, from
    :func:`kv_mistake`'s arguments)."""
    qkv = rng.standard_normal((b.tokens, ROW)).astype(np.float32)
    k_weight = rng.uniform(0.5, 1.5, HEAD_DIM).astype(np.float32)
    inv_freq = (base() ** (-2.0 * np.arange(HEAD_DIM // 2) / HEAD_DIM)).astype(np.float32)
    args = (qkv, k_weight, b.positions, b.slots, inv_freq, b.num_slots)
    expected = kv_expected(*args)
    alternatives = []
    if not big:
        # The step's own mistakes first: in step 4 a position of 0 would read as no rotation.
        alternatives = (extra(*args) if extra else []) + [
            ("V was normalized and rotated: only Q and K are; V is copied into its cache row "
             "as it is", kv_mistake(*args, v_normed=True)),
            ("K was normalized but not rotated: turn each pair by positions[token] * "
             "inv_freq[lane] after the norm", kv_mistake(*args, rotate=False)),
            ("K was rotated but not normalized: divide the head by its rms, sqrt(mean(x**2) "
             "+ eps), the mean over all 64 floats (the butterfly's sum / 64)",
             kv_mistake(*args, norm=False)),
            ("the sum of squares was divided by the 32 lanes: the mean is over the head's 64 "
             "floats, two a lane", kv_mistake(*args, floats=32)),
            ("K was not multiplied by k_weight: the norm is x / rms * k_weight",
             kv_mistake(*args, weigh=False)),
            ("a padding token was written: its slot is -1, and a negative index wraps around "
             "to the end of the cache; a warp whose token has a negative slot stores nothing",
             kv_mistake(*args, wrap=True)),
            ("K and V were written at row `token`: the token's row in each cache is its slot, "
             "slot_mapping[token]", kv_mistake(qkv, k_weight, b.positions,
                                               np.where(b.slots >= 0, np.arange(b.tokens), -1),
                                               inv_freq, b.num_slots)),
        ]
    angles = max_angle(b.positions, inv_freq.astype(np.float64))
    return Case(
        label=b.label(), inputs={"qkv": qkv.ravel(), "k_weight": k_weight,
                                 "slot_mapping": b.slots, "inv_freq": inv_freq},
        grid=(blocks(b.tokens, WARPS_PER_BLOCK),), block=(32 * WARPS_PER_BLOCK,),
        expected=expected,
        tol=tolerance(float(np.nanmax(np.abs(expected))) * 2, angles),
        locate=lambda e, n=b.num_slots: (f"{'K' if e // HEAD_DIM < n else 'V'} cache, slot "
                                         f"{(e // HEAD_DIM) % n}, float {e % HEAD_DIM}"),
        unit=lambda e: [e - e % 2, e - e % 2 + 1], alternatives=alternatives,
        bytes_moved=qkv.nbytes // 2 + 2 * b.tokens * HEAD_DIM * 4 + b.slots.nbytes)


def kv_owner(slots, num_slots: int) -> np.ndarray:
    """Lane ``l`` of token ``t``'s warp writes floats 2l and 2l + 1 of its K row and V row."""
    owner = np.full((2, num_slots, HEAD_DIM), -1, np.int64)
    for t, s in enumerate(slots):
        if s >= 0:
            owner[:, s] = t * 32 + np.arange(HEAD_DIM) // 2
    return owner.ravel()


KV_BATCHES = (((3,), (0,), 0), ((2, 1, 3), (0, 9, 4), 1), ((4, 1, 1, 2), (3, 14, 6, 0), 2))
BIG_BATCH = ((256,) * 4, (0,) * 4)  # timing on a GPU: 1024 tokens of prefill


def kv_cases(big: bool) -> list[Case]:
    rng = rng_for("10.3")
    cases = []
    for query, context, pad in ((*BIG_BATCH, 0),) if big else KV_BATCHES:
        b = batch(rng, query, context, pad)
        case = kv_case(b, rng, big=big)
        case.inputs.update(positions=b.positions, tokens=np.int64(b.tokens),
                           num_slots=np.int64(b.num_slots))
        case.owner = kv_owner(b.slots, b.num_slots)
        cases.append(case)
    return cases


# Mixed batches: prefill (no context), decode (one new token after a long context), chunked
# prefill (several new tokens after some context).
RAGGED = (((3, 1, 1, 4), (0, 7, 12, 2)), ((5,), (0,)), ((1, 1, 1, 1, 1, 2), (3, 30, 9, 1, 17, 5)))


def within_requests(query_lens) -> np.ndarray:
    """Each token's place among its request's new tokens: 0, 1, ... from every request's first
    row (the rows where the prefix sum of the lengths says a request starts)."""
    starts = np.concatenate([[0], np.cumsum(query_lens)[:-1]])
    return (np.arange(sum(query_lens)) - np.repeat(starts, query_lens)).astype(np.int32)


def ragged_cases(big: bool) -> list[Case]:
    rng = rng_for("10.4")
    cases = []
    for query, context in (BIG_BATCH,) if big else RAGGED:
        b = batch(rng, query, context)

        def extra(qkv, w, positions, slots, inv_freq, n, query=query):
            rows = np.arange(positions.size, dtype=np.int32)
            return [
                ("rotated by the token's row in the batch: a token's position is its "
                 "request's context length plus its place among the request's new tokens",
                 kv_mistake(qkv, w, rows, slots, inv_freq, n)),
                ("positions restarted at 0 for every request: the new tokens come after the "
                 "context_lens[r] already cached, positions context_lens[r] + i",
                 kv_mistake(qkv, w, within_requests(query), slots, inv_freq, n)),
            ]

        case = kv_case(b, rng, big=big, extra=extra)
        case.inputs.update(query_lens=tuple(int(q) for q in query),
                           context_lens=tuple(int(c) for c in context),
                           num_slots=int(b.num_slots))
        cases.append(case)
    return cases
