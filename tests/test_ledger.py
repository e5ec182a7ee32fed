"""The seed-claims ledger (notebook 07) and its summary in the README agree, and its computed
verdicts follow the records they read."""

import copy
import re
from pathlib import Path

import pytest

from ropelab.measure import records
from ropelab.lessons import ledger

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def items(census_doc):
    # claims() reads ptx.census(): the session's census_doc is in the user cache even when
    # data/census is stale, so this does not compile the same kernels a second time.
    return ledger.claims()


def _readme_verdicts() -> dict:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Seed claims"):]
    section = section[:section.index("\n## ", 1)]
    return {m.group(1): m.group(2) for m in
            re.finditer(r"^\| ([AB]\d+) \| .* \| ([a-z ]+) \|$", section, re.M)}


def test_every_claim_has_a_known_verdict_and_evidence(items):
    ids = [c.id for c in items]
    assert len(ids) == len(set(ids))
    assert {"A13", "A14", "B3", "B4", "B5"} <= set(ids)  # the four the issue asked for
    for c in items:
        assert c.verdict in ledger.VERDICTS, c
        assert c.claim and c.evidence, c


def test_readme_table_agrees_with_the_ledger(items):
    assert _readme_verdicts() == {c.id: c.verdict for c in items}


def test_the_per_pair_timing_claim_waits_for_its_record_or_reads_it(items):
    b4 = next(c for c in items if c.id == "B4")
    try:
        records.load("sincos_per_pair")
    except FileNotFoundError:
        assert b4.verdict == "not recorded yet" and "--record" in b4.evidence
    else:
        assert b4.verdict in ("confirmed", "refuted", "nuanced")


def _record(rows):
    meta = {"gpu": "Test GPU", "driver": "1", "numba_cuda": "0", "date": "2026-01-01T00:00:00Z"}
    return {"meta": meta, "rows": rows}


def _timing_rows(per_element_us, per_pair_us, spread=0.01):
    rows = []
    for shape in ("s1", "s2"):
        for family in ("cuda_cpp", "numba"):
            for kernel, t in (("per_element", per_element_us), ("per_pair", per_pair_us)):
                rows.append({"family": family, "kernel": kernel, "shape": shape, "median_us": t,
                             "p20_us": t * (1 - spread), "p80_us": t * (1 + spread)})
    return rows


@pytest.mark.parametrize("per_element_us, verdict", [(60.0, "confirmed"), (50.2, "refuted")])
def test_the_per_pair_verdict_follows_the_record(per_element_us, verdict):
    claim = ledger._per_pair_timing(_record(_timing_rows(per_element_us, 50.0)))
    assert claim.verdict == verdict


def test_the_135x_claim_reads_the_measured_factor(items):
    bench = records.load("bench")
    a13 = next(c for c in items if c.id == "A13")
    factors = [ledger._median(bench, "torch_complex_seed", s) / ledger._median(bench, "flat", s)
               for s in ledger.SEED_SHAPES + (ledger.BIG,)]
    assert f"{min(factors):.0f}x to {max(factors):.0f}x" in a13.evidence
    # A record where PyTorch is 10x slower everywhere changes the numbers the claim prints.
    fake = copy.deepcopy(bench)
    for r in fake["rows"]:
        if r["variant"] == "torch_complex_seed":
            r["median_us"] = 10 * ledger._median(bench, "flat", r["shape"])
    assert ledger._ratios(fake, "torch_complex_seed", "flat") == pytest.approx([10.0] * 5)


def test_the_ledger_prints_every_claim(items):
    text = ledger.format_ledger(items)
    for c in items:
        assert f"{c.id:<4} {c.verdict.upper()}" in text
    assert ledger.markdown_table(items).count("\n") == len(items) + 1
