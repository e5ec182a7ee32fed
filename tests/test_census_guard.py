"""The determinism guard catches a stale committed census (test_ptx runs it on the real one).

Here stale entries are planted in a copy of the committed census and the guard must name each:
counts the compiler no longer gives (caught by the sample, which is compiled every run), a row
whose code changed since it was saved (caught by its input digest, and compiled), a build
missing from the census, and a row of a build that no longer exists.  Nothing is compiled: the
"fresh" rows are the committed ones, as a compile that agrees would print them.
"""

import copy

import pytest

from ropelab.measure.census import engine, guard, registered


@pytest.fixture(scope="module")
def committed():
    doc = engine.read_json(registered.DATA_FILE)
    inputs = registered.row_inputs(False)
    return doc, inputs


def _as_compiled(doc, idents):
    """What the child would print for ``idents`` if it agreed with ``doc``."""
    rows = {registered.build_id(r): r for r in doc["rows"]}
    return {i: {k: v for k, v in rows[i].items() if k not in ("input", "f64_note")}
            for i in idents}


def test_the_committed_census_passes_when_the_compiler_agrees(committed):
    doc, inputs = committed
    sample = guard.sample(doc)
    assert guard.to_compile(doc, inputs, sample) == sample  # nothing stale: the sample alone
    assert {s[0] for s in sample} == {"VARIANTS", "FUSED", "ROWS", "BACKWARD", "SERVING"}
    assert guard.verify(doc, inputs, _as_compiled(doc, sample)) == []


def test_planted_counts_are_caught_by_the_sample(committed):
    doc, inputs = committed
    sample = guard.sample(doc)
    stale = copy.deepcopy(doc)
    row = next(r for r in stale["rows"] if registered.build_id(r) == sample[1])
    row["instructions"] += 10  # saved counts the compiler does not give
    problems = guard.verify(stale, inputs, _as_compiled(doc, sample))
    assert len(problems) == 1 and "instructions" in problems[0] and sample[1][2] in problems[0]


def test_a_planted_stale_input_is_compiled_and_reported(committed):
    doc, inputs = committed
    sample = guard.sample(doc)
    stale = copy.deepcopy(doc)
    row = next(r for r in stale["rows"] if registered.build_id(r) not in sample)
    row["input"] = "0" * 16  # saved from other code (or another compiler)
    ident = registered.build_id(row)
    todo = guard.to_compile(stale, inputs, sample)
    assert todo[0] == ident and todo[1:] == sample
    # Compiled: same counts, but the row must be saved again under today's input.
    problems = guard.verify(stale, inputs, _as_compiled(doc, todo))
    assert problems == [f"{'/'.join(map(str, ident))}: same counts, but saved under another "
                        "input: re-save"]
    # Not compiled (an install without the compiler): still reported.
    assert "changed since" in guard.verify(stale, inputs, _as_compiled(doc, sample))[0]
    # Compiled with other counts: the counts are named.
    fresh = _as_compiled(doc, todo)
    fresh[ident]["f64"] += 1
    assert "f64" in guard.verify(stale, inputs, fresh)[0]


def test_missing_and_vanished_builds_are_reported(committed):
    doc, inputs = committed
    sample = guard.sample(doc)
    stale = copy.deepcopy(doc)
    dropped = stale["rows"].pop(-1)
    extra = dict(stale["rows"][0], kernel="rope_that_was_deleted")
    stale["rows"].append(extra)
    problems = guard.verify(stale, inputs, _as_compiled(doc, sample))
    assert any(dropped["kernel"] in p and "missing" in p for p in problems)
    assert any("rope_that_was_deleted" in p and "no such build" in p for p in problems)
