"""Global access widths of the profiled kernels, from the instruction census (compiled, not
measured): the profile's ``ld_bits`` / ``st_bits`` columns."""

from __future__ import annotations




def _width_text(table: dict) -> str | None:
    if not table:
        return None
    return ",".join(f"{b}x{n}" for b, n in sorted(table.items(), key=lambda kv: -int(kv[0])))


def census_widths() -> tuple[dict, dict]:
    """({kernel: {"ld": "32x3", "st": "32x2"}}, {census: key}) from the PTX and controls censuses."""
    from .. import census as ptx
    from .. import controls

    widths, keys = {}, {}
    doc = ptx.census()
    keys["ptx"] = doc["key"]
    for r in doc["rows"]:
        if r["shipped"] and not r.get("error"):
            widths[r["kernel"]] = {"ld": _width_text(r["ld_global"]), "st": _width_text(r["st_global"])}
    doc = controls.census()
    keys["controls"] = doc["key"]
    for r in doc["rows"]:
        if not r.get("error"):
            widths.setdefault(r["kernel"], {"ld": _width_text(r["ld_global"]),
                                            "st": _width_text(r["st_global"])})
    return widths, keys
