"""The benches' commands as a user runs them here, with no GPU: each parses its arguments, then
refuses to time with exit status 2 and says why; the CPU harness runs."""

import pytest

import ropelab
from ropelab.measure.bench import backward, controls, host_path, torch_ops

pytestmark = pytest.mark.skipif(not ropelab.SIMULATED, reason="on a GPU they time")


@pytest.mark.parametrize("main", [backward.main, controls.main, torch_ops.main],
                         ids=["backward", "controls", "torch_ops"])
def test_a_bench_refuses_the_simulator_with_status_2(main, capsys, tmp_path):
    assert main(["--out", str(tmp_path)]) == 2  # each takes a data root for its record
    err = capsys.readouterr().err
    assert "python -m ropelab.measure.bench." in err and "simulator" in err
    assert not any(tmp_path.iterdir())  # refused before anything was measured or written


def test_a_wrong_argument_is_a_usage_error_before_anything_runs(capsys):
    with pytest.raises(SystemExit) as exc:
        backward.main(["--shapes", "flux_1024,nope"])
    assert exc.value.code == 2 and "unknown shape(s) ['nope']" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        controls.main(["--rounds", "many"])


def test_the_host_path_harness_prints_the_hit_and_its_parts(capsys):
    pytest.importorskip("torch")
    host_path.main(["--number", "5", "--repeat", "1", "--stub-launch"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith(" us  rope() hit, x/out/positions tensors")
    assert len(lines) == 6 and all(float(line.split()[0]) > 0 for line in lines)
