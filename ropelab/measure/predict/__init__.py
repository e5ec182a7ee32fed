"""A predicted H200 time for a kernel, from what a machine without a GPU can know.

``predict_h200(census, bytes_moved)`` is the grader's hook (``verdict.time()`` with no GPU):
the kernel's PTX census (a row of :mod:`ropelab.measure.census` or of the course's learner
census) and the bytes its problem moves give a time in microseconds::

    copy time of those bytes (recorded on the H200) * exp(intercept + sum(weight * feature))

The features (:mod:`.features`), the records they are fitted on (:mod:`.sources`), the fit and
its out-of-sample error against the trivial model (:mod:`.model`) and the record
``data/predict/`` (:mod:`.record`, ``python -m ropelab.measure.predict --record``) each have
their own module.  The constants are read from that record, so a prediction needs no fit.
"""

from __future__ import annotations

import json
import math
from functools import lru_cache

from . import features
from .record import KIND, predict_from_curve


@lru_cache(maxsize=1)
def recorded_fit() -> dict:
    """The newest ``data/predict/`` record (its meta holds the constants and the copy curve)."""
    from .. import records

    paths = sorted((records.DATA_DIR / KIND).glob(f"{KIND}-*.json"))
    if not paths:
        raise FileNotFoundError("no data/predict record: run python -m ropelab.measure.predict "
                                "--record")
    return records.validate(json.loads(paths[-1].read_text()))


def explain_h200(census: dict, bytes_moved: int, *, grid=None, block=None,
                 table_bytes: int = 0) -> dict:
    """The prediction taken apart: ``copy_us`` (a copy of the same bytes), ``factors`` (what
    each feature multiplies it by, the intercept as ``"base"``), ``features`` and ``us``."""
    meta = recorded_fit()["meta"]
    constants = meta["constants"]
    values = features.features(census, int(bytes_moved), grid, block, table_bytes)
    factors = {"base": math.exp(constants["intercept"])}
    factors.update({n: math.exp(w * values[n]) for n, w in constants["weights"].items()})
    copy_us = predict_from_curve(meta["copy_curve"], int(bytes_moved))
    return {"copy_us": copy_us, "factors": factors, "features": values,
            "us": copy_us * math.prod(factors.values())}


def predict_h200(census: dict, bytes_moved: int, *, grid=None, block=None,
                 table_bytes: int = 0) -> float:
    """Predicted H200 time in microseconds of a kernel with this census moving ``bytes_moved``.

    ``grid``/``block`` (the launch) and ``table_bytes`` (lookup tables read beyond
    ``bytes_moved``) sharpen it when known; without them the kernel is taken as 256-thread
    blocks, one loop pass per thread and no tables.  The record states the model's error; a
    learner kernel unlike the recorded ones may miss by more.
    """
    return explain_h200(census, bytes_moved, grid=grid, block=block,
                        table_bytes=table_bytes)["us"]


__all__ = ["explain_h200", "predict_h200", "recorded_fit"]
