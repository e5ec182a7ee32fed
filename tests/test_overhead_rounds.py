"""The launch-overhead bench takes its cases in turns (round by round), so a slow stretch of the
machine cannot land on the first cases of a run only; driven here with a fake clock."""

from ropelab.measure.bench.overhead import interleaved_rounds, overhead_method


class _Clock:
    """Each call to a case costs ``cost[name]`` microseconds, plus ``slow`` during round 0."""

    def __init__(self):
        self.now, self.round, self.calls = 0.0, 0, []

    def __call__(self):
        return self.now

    def case(self, name, cost, slow=0.0):
        def fn():
            self.calls.append(name)
            self.now += (cost + (slow if self.round == 0 else 0.0)) * 1e-6
        return fn


def test_cases_take_turns_and_the_median_round_ignores_a_slow_stretch():
    clock = _Clock()
    cases = [("first", 0, clock.case("first", 5.0, slow=40.0)),
             ("second", 6, clock.case("second", 2.0))]

    def synchronize():  # called around every block: the round number follows the call count
        clock.round = (len(clock.calls) - 6) // 8  # 6 warm-up calls, 8 calls per round

    rows = interleaved_rounds(cases, launches=20, warmup=3, rounds=5, clock=clock,
                              synchronize=synchronize)
    warm, runs = clock.calls[:6], clock.calls[6:]
    assert warm == ["first"] * 3 + ["second"] * 3
    assert runs == (["first"] * 4 + ["second"] * 4) * 5  # in turns, 4 launches per block
    by_name = {r["launcher"]: r for r in rows}
    assert by_name["first"]["us_per_launch"] == 5.0  # round 0's 45 us is the odd one out
    assert by_name["second"]["us_per_launch"] == 2.0
    assert by_name["second"]["kernel_args"] == 6 and by_name["first"]["launches"] == 20
    assert set(rows[0]) == {"launcher", "kernel_args", "launches", "us_per_launch",
                            "us_per_launch_synced"}  # the committed records' columns


def test_the_method_text_says_rounds_and_median():
    text = overhead_method(2000, warmup=100)
    assert "rounds" in text and "median" in text and "2000" in text and "100 warm-up" in text
