"""Target selection, tested in fresh interpreters (the choice is made once per process)."""

import os
import subprocess
import sys

import pytest

import ropelab


def run(code: str, **env):
    full = {k: v for k, v in os.environ.items()
            if k not in ("NUMBA_ENABLE_CUDASIM", "ROPELAB_TARGET", "ROPELAB_QUIET")}
    full.update(env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full,
                          timeout=120)


def test_describe_reports_target_and_versions():
    info = ropelab.describe()
    assert info["target"] in ("gpu", "simulator")
    for key in ("numba", "numba_cuda", "numpy", "python"):
        assert info[key]
    if info["target"] == "gpu":
        assert info["gpu"] and info["compute_capability"] and info["cuda_driver_api"]
    assert info["target"] in ropelab.format_description(info)


def test_forcing_the_simulator():
    r = run("import ropelab; from numba import cuda; print(ropelab.TARGET, cuda.jit.__module__)",
            ROPELAB_TARGET="simulator")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["simulator", "numba.cuda.simulator.api"]
    assert "forced by ROPELAB_TARGET" in r.stderr


def test_notice_is_one_short_warning_that_can_be_silenced():
    code = "import ropelab, importlib; import ropelab.target; print('ok')"
    r = run(code, ROPELAB_TARGET="simulator")
    assert r.stderr.count("Numba CUDA simulator") == 1
    assert "SimulatorWarning" in r.stderr and len(r.stderr) < 400, r.stderr
    # The long statement of what simulated numbers are worth is in describe(), not on stderr.
    assert ropelab.sim.ARITHMETIC not in r.stderr
    assert ropelab.describe()["simulator"] == ropelab.sim.ARITHMETIC
    assert "float64" not in ropelab.sim.ARITHMETIC  # it once claimed "the simulator computes in float64"
    r = run(code, ROPELAB_TARGET="simulator", ROPELAB_QUIET="1")
    assert r.stderr == "" and r.stdout.strip() == "ok"
    # A user's warnings filter, by ropelab's category, silences it too.
    r = run("import warnings; warnings.filterwarnings('error'); "
            "warnings.filterwarnings('ignore', category=Warning, module='ropelab'); "
            "import ropelab; print(ropelab.SimulatorWarning.__mro__[1].__name__)",
            ROPELAB_TARGET="simulator")
    assert r.returncode == 0 and r.stderr == "" and r.stdout.strip() == "RopelabWarning", r.stderr


def test_import_leaves_numbas_settings_alone():
    # Only the target switch is set; numba's low-occupancy warning stays the user's to choose.
    code = ("import os, ropelab; from numba.cuda.core import config; "
            "print(os.environ.get('NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS'), config.CUDA_LOW_OCCUPANCY_WARNINGS)")
    r = run(code, ROPELAB_TARGET="simulator", ROPELAB_QUIET="1")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["None", "1"]


def test_small_grids_quiet_silences_only_the_low_occupancy_warning_inside_its_block():
    import warnings

    from ropelab.target import small_grids_quiet

    message = "Grid size 1 will likely result in GPU under-utilization due to low occupancy."
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with small_grids_quiet():
            warnings.warn(message, RuntimeWarning)
            warnings.warn("something else", RuntimeWarning)
        warnings.warn(message, RuntimeWarning)
    assert [str(w.message) for w in seen] == ["something else", message]


def test_unknown_target_name_is_a_clear_error():
    r = run("import ropelab", ROPELAB_TARGET="tpu")
    assert r.returncode != 0 and "ROPELAB_TARGET='tpu' is not understood" in r.stderr


def test_numba_imported_first_still_gets_the_simulator():
    r = run("import numba; import ropelab; from numba import cuda; print(cuda.jit.__module__)",
            ROPELAB_TARGET="simulator")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "numba.cuda.simulator.api"


@pytest.mark.skipif(not ropelab.SIMULATED, reason="needs a machine without a GPU")
def test_numba_cuda_imported_first_on_the_wrong_target_is_a_clear_error():
    r = run("from numba import cuda; import ropelab", NUMBA_ENABLE_CUDASIM="0", ROPELAB_TARGET="simulator")
    assert r.returncode != 0
    assert "numba.cuda was imported before ropelab" in r.stderr
    assert "import ropelab before numba.cuda" in r.stderr


def test_numba_cuda_imported_first_on_the_right_target_is_fine():
    r = run("from numba import cuda; import ropelab; print(ropelab.TARGET)", NUMBA_ENABLE_CUDASIM="1")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "simulator"


@pytest.mark.skipif(not ropelab.SIMULATED, reason="needs a machine without a GPU")
def test_auto_selection_without_a_gpu_says_why():
    r = run("import ropelab; print(ropelab.describe()['reason'])")
    assert r.returncode == 0, r.stderr
    assert "simulator" in r.stderr
    assert r.stdout.strip()  # the probe's reason, e.g. no libcuda or no device
