"""Notebook 00's primer: the sector count, the paper budget and the two pictures."""

import matplotlib

matplotlib.use("Agg")

import pytest

from ropelab.lessons import primer


@pytest.mark.parametrize("stride, first, sectors", [
    (1, 0, 4),  # 32 consecutive floats = 128 bytes = 4 sectors
    (1, 4, 5),  # the same 128 bytes starting mid-sector straddle one more
    (2, 0, 8),
    (8, 0, 32),  # one float per sector
    (64, 0, 32),  # further apart cannot touch more than one sector per lane
    (0, 0, 1),  # every lane reads the same float (a broadcast)
])
def test_sectors_touched(stride, first, sectors):
    assert primer.sectors_touched(stride, first=first) == sectors


def test_paper_budget_scales_with_the_machine():
    one = primer.paper_budget(100)
    two = primer.paper_budget(200)
    assert two["fp32_per_pair"] == pytest.approx(2 * one["fp32_per_pair"])
    # 128 FP32 lanes against 16 SFUs per SM: the ratio is the hardware's, whatever the clock.
    assert one["fp32_per_pair"] / one["sfu_per_pair"] == pytest.approx(8)
    faster_memory = primer.paper_budget(100, hbm_tbs=2 * primer.H200_HBM_TBS)
    assert faster_memory["sfu_per_pair"] == pytest.approx(one["sfu_per_pair"] / 2)


def test_the_pictures_draw_what_they_say():
    import matplotlib.pyplot as plt

    fig = primer.plot_execution_model(sm_count=7, l2_mib=12, blocks=2, threads=40)
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert len(fig.axes) == 3
    assert any("x 7 on this GPU" in t for t in texts)
    assert any("L2 cache: 12 MiB" in t for t in texts)
    assert any("kernel[2, 40]" in t and "= 4 warps" in t and "24 lanes" in t for t in texts)
    plt.close(fig)
    fig = primer.plot_compile_pipeline({"PTX": "k: 10 instructions"})
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert [s for s, _, _ in primer.PIPELINE] == [t for t in texts if t in dict(
        (s, 0) for s, _, _ in primer.PIPELINE)]
    assert "k: 10 instructions" in texts
    plt.close(fig)
