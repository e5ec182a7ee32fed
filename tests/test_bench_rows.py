"""The bench rows of the rope_rows path (ropelab.measure.bench.rope_rows) run on the simulator
with a fake timer: every entry applies where it should and none is skipped.  Budget: about 2 s."""

from ropelab.measure import bench
from ropelab.measure.bench import rope_rows as bench_rows


class FakeTimer:
    def __init__(self):
        self.calls = 0

    def time(self, launch, repeats=None):
        launch()
        self.calls += 1
        return [2.0, 2.0, 2.0]


def test_rows_group_holds_the_issue_shapes():
    shapes = {s.label: s for s in bench.shapes_for(["rows"])}
    target = shapes["rope16_32768x32x128"]
    assert (target.tokens, target.heads_q, target.heads_k, target.head_dim, target.dtype) == \
        (32768, 32, 0, 128, "bfloat16")
    assert target.copy_bytes == 32768 * 32 * 128 * 2
    assert (shapes["qwen3_8b_4096"].heads_q, shapes["qwen3_8b_4096"].heads_k) == (32, 8)


def test_rows_entries_run_and_qk_rows_skip_single_tensor_shapes():
    shapes = [bench.Shape("tiny_qk", 3, heads_q=2, heads_k=1, head_dim=64, dtype="bfloat16",
                          heads_v=1),
              bench.Shape("tiny_one", 2, heads_q=2, heads_k=0, head_dim=64, dtype="float16",
                          heads_v=0)]
    timer = FakeTimer()
    result = bench.sweep(shapes, [bench.copy_entry()] + bench_rows.entries(["rope_rows"]),
                         timer=timer, progress=False)
    assert not result.skipped, result.skipped
    got = {(r["variant"], r["shape"]) for r in result.rows}
    assert ("rope_rows:rope_qk", "tiny_qk") in got and ("rope_rows:two_calls", "tiny_qk") in got
    assert ("rope_rows:rope", "tiny_one") in got
    # The course's 16-bit builds, beside rope_rows on the same bytes.
    for variant in ("rope_rows:pair_sincos", "rope_rows:pack4"):
        assert (variant, "tiny_one") in got and (variant, "tiny_qk") in got
    assert ("rope_rows:rope_qk", "tiny_one") not in got  # no K heads: nothing to pair
    assert bench_rows.entries(["flat"]) == []
    assert [e.name for e in bench_rows.entries(["rope_rows:rope"])] == ["rope_rows:rope"]


def test_16bit_variant_entries_run_their_own_kernels(monkeypatch):
    """The pair_sincos / pack4 rows launch those variants' 16-bit builds, not rope_rows."""
    from types import SimpleNamespace

    from ropelab.kernels import pack4, pair_sincos
    from ropelab.ops import host_route

    launched = []
    real = host_route.launch

    def spy(plan, arrays):
        launched.append(plan.kernel)
        return real(plan, arrays)

    monkeypatch.setattr(host_route, "launch", spy)
    shape = bench.Shape("tiny_one", 2, heads_q=2, heads_k=0, head_dim=64, dtype="bfloat16",
                        heads_v=0)
    for entry in bench_rows.entries(["rope_rows:pair_sincos", "rope_rows:pack4"]):
        entry.make(SimpleNamespace(shape=shape))()
    # One launch when the maker validates, one when the returned call runs.
    assert launched == [pair_sincos.make_kernel("bfloat16", word_pairs=True)] * 2 + \
        [pack4.make_vector_kernel("bfloat16")] * 2
