"""Numbers of notebook 09 (ropelab inside a real model), from ``data/real_model/``.

Until the GPU run of ``python -m ropelab.models.bench --record`` is committed, every entry
renders ``TODO(GPU data)`` and names the missing record, so the notebook builds and says what is
missing instead of showing a number nobody measured.
"""

from __future__ import annotations

from .numbers_core import Rendered, number, runs

KIND = "real_model"
MISSING = Rendered("TODO(GPU data)", "none yet: the GPU run python -m ropelab.models.bench "
                                     f"--record writes data/{KIND}/")


def _row(rec, model: str, mode: str, pass_name: str) -> dict:
    """The row, or a stand-in saying it was not recorded (a run cut short keeps its eager rows)."""
    key = (model, mode, pass_name)
    found = [r for r in rec["rows"] if (r["model"], r["mode"], r["pass"]) == key]
    if found:
        return found[0]
    return {"median_us": None, "vs_transformers": None, "note": "not recorded: run cut short"}


def _time(model: str, mode: str, pass_name: str) -> Rendered:
    found = runs(KIND)
    if not found:
        return MISSING
    path, rec = found[-1]
    row = _row(rec, model, mode, pass_name)
    if row["median_us"] is None:
        return Rendered(f"not run ({row['note'].split(':')[0]})", path)  # the note says why
    return Rendered(f"{row['median_us'] / 1e3:.2f} ms", path)


def _ratio(mode: str, pass_name: str) -> Rendered:
    found = runs(KIND)
    if not found:
        return MISSING
    path, rec = found[-1]
    ratio = _row(rec, "ropelab", mode, pass_name)["vs_transformers"]
    return Rendered("not run" if ratio is None else f"{ratio:.3f}", path)


for _mode in ("eager", "compiled"):
    for _pass in ("forward", "forward_backward"):
        for _model in ("transformers", "qkv_gemm", "ropelab"):
            number(f"real_model.{_model}_{_mode}_{_pass}_ms")(
                lambda m=_model, mo=_mode, p=_pass: _time(m, mo, p))
        number(f"real_model.ratio_{_mode}_{_pass}")(lambda mo=_mode, p=_pass: _ratio(mo, p))
