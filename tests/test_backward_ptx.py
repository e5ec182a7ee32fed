"""The backward kernel's PTX, as the census counts it (registry ``BACKWARD``, compiled for sm_90;
the committed data/census/census.json when current, so nothing is compiled here): every float is
float32 (no ``.f64``), the lane's values stay in registers (no local memory), only the atomic
build has atomics, and 16-bit storage moves 32-bit words (two at once where a group is four
neighbours, in the vector build)."""

import pytest

from ropelab import kernels


@pytest.fixture(scope="module")
def rows(census_doc):
    found = {r["kernel"]: r for r in census_doc["rows"]
             if r["registry"] == "BACKWARD" and r["fastmath"]}
    assert found, "the census has no BACKWARD rows"
    assert not [k for k, r in found.items() if r.get("error")], found
    return found


def _row(rows, suffix):
    (row,) = [r for k, r in rows.items() if k.endswith(suffix)]
    return row


def test_every_backward_build_is_in_the_census(rows):
    plans = kernels.BACKWARD["fused_qknorm_rope_backward"].census_plans()
    names = {getattr(p.kernel, "__qualname__", p.kernel.__name__).split(".")[-1] for p in plans}
    assert names == set(rows)
    assert "reduce_partials" in rows


def test_float32_only_and_no_local_memory(rows):
    for name, r in rows.items():
        assert r["f64"] == 0, name
        assert (r["ld_local"], r["st_local"], r["local_bytes"]) == (0, 0, 0), name


def test_atomics_only_in_the_atomic_build(rows):
    for name, r in rows.items():
        assert bool(r["atomics"].get("global")) == name.endswith("_atomic"), name


def test_sixteen_bit_storage_moves_words(rows):
    """GPT-J groups (four neighbours) move as one 64-bit access of two words; crossed NeoX
    groups as two 32-bit words; never 16 bits at a time; float32 GPT-J as 128-bit vectors."""
    gptj, neox = _row(rows, "_gptj_bfloat16_w8_v"), _row(rows, "_neox_bfloat16_w8_v")
    assert gptj["ld_global"].get("64") and gptj["st_global"].get("64")
    assert neox["ld_global"].get("32") and neox["st_global"].get("32")
    for name, r in rows.items():
        assert "16" not in r["ld_global"] and "16" not in r["st_global"], name
    assert _row(rows, "_gptj_float32_w8_v")["ld_global"].get("128")
    scalar = _row(rows, "_gptj_bfloat16_w8")  # unaligned: no vector access
    assert not scalar["ld_global"].get("64") and not scalar["ld_global"].get("128")
