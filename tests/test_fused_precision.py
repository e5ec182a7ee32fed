"""The fused kernel's precision-by-position measurement (recorded on a GPU), run small here.

Budget: about 12 s (two simulated runs of 35 tokens x 2 heads of 64).
"""

import numpy as np
import pytest

import ropelab
from ropelab.measure import fused_precision, records

SMALL = dict(max_position=2**17, samples_per_bucket=2, heads=(1, 1, 0), head_dim=64)


def test_cache_error_does_not_grow_with_the_position():
    rows = fused_precision.position_error(cache=True, **SMALL)
    assert [r["pos_lo"] for r in rows][:3] == [0, 1, 2] and rows[-1]["pos_hi"] == 2**17
    rel = np.array([r["max_rel_err"] for r in rows])
    assert rel.max() < 3e-6, rel  # float32 roundings only, at every position
    assert {r["path"] for r in rows} == {"cache"}


def test_sincos_error_grows_with_the_position():
    rows = fused_precision.position_error(cache=False, **SMALL)
    rel = {r["pos_hi"]: r["max_rel_err"] for r in rows}
    assert rel[2**17] > 1e-4 > rel[1]  # the float32 angle rounds more as it grows
    worst = fused_precision.worst_by_case(rows)
    assert len(worst) == 1 and worst[0]["max_rel_err"] == max(rel.values())


@pytest.mark.skipif(not ropelab.SIMULATED, reason="on a GPU this would record")
def test_record_refuses_the_simulator(tmp_path):
    with pytest.raises(records.RecordError, match="simulator"):
        fused_precision.record(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_yarn_case_labels_its_rows():
    # default_cases() has a YaRN case (SGLang's dict form); its rows name the factor.
    rows = fused_precision.position_error(cache=True, yarn=fused_precision.YARN, max_position=2**10,
                                          samples_per_bucket=2, heads=(1, 1, 0), head_dim=64)
    assert {r["yarn"] for r in rows} == {"factor=8"}
    assert max(r["max_rel_err"] for r in rows) < 3e-6
