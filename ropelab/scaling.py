"""Context-extension schemes for RoPE: they change the inverse frequencies, and YaRN also scales
cos and sin by an "attention factor".

One frozen dataclass per scheme, validated when it is built (bad parameters raise
:class:`ropelab.RopeInputError` before anything else happens):

* :class:`Linear` -- position interpolation (kaiokendev; Chen et al. 2023).
* :class:`NTK` -- "NTK-aware" base scaling (bloc97).
* :class:`YaRN` -- NTK-by-parts interpolation plus an attention factor (Peng et al. 2023), in
  Hugging Face's form or, through :meth:`YaRN.from_ramp`, SGLang's (the fused kernel's ``yarn``).
* :class:`Llama3` -- Llama 3.1's piecewise rescaling by wavelength.

``ropelab.rope(x, scaling=...)`` takes one of these objects, or a Hugging Face style dict such as
``{"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}`` (the older
key ``"type"`` works too).  Unknown scheme names and unknown keys are refused.

This module holds the user-facing objects and their validation; the float64 formulas they
evaluate, ``[rotary_dim // 2]`` frequencies with pair ``i`` rotating by ``position * freqs[i]``,
live in :mod:`ropelab.freqs`.  The kernels receive them already scaled (as a table, or as
the parameters of the same formula evaluated in-kernel, see ``ropelab.kernels.pair_sincos``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# The formulas (pure NumPy); callers reach some through this module (scaling.yarn_correction_range).
from .freqs import (  # noqa: F401
    inv_freq,
    linear_inv_freq,
    llama3_inv_freq,
    ntk_base,
    ntk_inv_freq,
    yarn_blend_inv_freq,
    yarn_correction_range,
    yarn_inv_freq,
    yarn_mscale,
)
from .errors import RopeInputError


def _fail(msg: str):
    raise RopeInputError(msg)


def _number(name: str, value, *, low=None, low_open=True, scheme: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        _fail(f"{scheme}: {name} must be a number, got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        _fail(f"{scheme}: {name} must be finite, got {value}")
    if low is not None and (value <= low if low_open else value < low):
        _fail(f"{scheme}: {name} must be {'>' if low_open else '>='} {low:g}, got {value:g}")
    return value


def _positive_int(name: str, value, *, scheme: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        _fail(f"{scheme}: {name} must be a positive int, got {value!r}")
    if value <= 0:
        _fail(f"{scheme}: {name} must be a positive int, got {value}")
    return int(value)


# --------------------------------------------------------------------------------------------
# Scheme objects
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Linear:
    """Linear position interpolation by ``factor`` (> 0; > 1 stretches the context)."""

    factor: float

    def __post_init__(self):
        object.__setattr__(self, "factor", _number("factor", self.factor, low=0.0, scheme="linear"))

    def compute(self, rotary_dim: int, base: float) -> tuple[np.ndarray, float]:
        return linear_inv_freq(rotary_dim, base, self.factor), 1.0


@dataclass(frozen=True)
class NTK:
    """NTK-aware base scaling by ``factor`` (> 0); see :func:`ntk_inv_freq`."""

    factor: float

    def __post_init__(self):
        object.__setattr__(self, "factor", _number("factor", self.factor, low=0.0, scheme="ntk"))

    def compute(self, rotary_dim: int, base: float) -> tuple[np.ndarray, float]:
        if rotary_dim < 4:
            _fail(f"ntk: rotary_dim must be at least 4 (the exponent is d / (d - 2)), got {rotary_dim}")
        new_base = ntk_base(rotary_dim, base, self.factor)
        if not (math.isfinite(new_base) and new_base > 1.0):
            _fail(f"ntk: factor {self.factor:g} turns base {base:g} into {new_base:g}; it must stay > 1")
        return ntk_inv_freq(rotary_dim, base, self.factor), 1.0


@dataclass(frozen=True)
class YaRN:
    """YaRN: frequencies ramped from kept (fast pairs) to divided by ``factor`` (slow pairs), and
    an attention factor that multiplies cos and sin.

    Two ways to say where the ramp lies, one class:

    * Hugging Face's: the pre-training context ``original_max_positions`` and the ramp bounds
      ``beta_fast > beta_slow > 0`` in turns over it (default 32 and 1), turned into pair
      indices by :func:`ropelab.freqs.yarn_correction_range` for each ``rotary_dim`` and base;
    * SGLang's (``fused_qknorm_rope``): the pair indices ``low <= high`` themselves, built with
      :meth:`from_ramp`.

    ``factor >= 1`` in both.  ``attention_factor`` (> 0) multiplies cos and sin;
    ``None`` means ``yarn_mscale(factor, mscale) / yarn_mscale(factor, mscale_all_dim)`` when both
    DeepSeek-style ``mscale`` and ``mscale_all_dim`` are given, else ``0.1 ln(factor) + 1``,
    exactly as Hugging Face ``_compute_yarn_parameters`` decides it (:meth:`from_ramp` defaults
    it to 1, as SGLang does).
    """

    factor: float
    original_max_positions: int | None = None
    beta_fast: float | None = None
    beta_slow: float | None = None
    attention_factor: float | None = None
    mscale: float | None = None
    mscale_all_dim: float | None = None
    truncate: bool = True
    low: float | None = None
    high: float | None = None

    @classmethod
    def from_ramp(cls, factor: float, low: float, high: float, attention_factor: float = 1.0) -> YaRN:
        """YaRN in SGLang's ``fused_qknorm_rope`` parameterization: ramp bounds as pair indices."""
        return cls(factor, attention_factor=attention_factor, low=low, high=high)

    def __post_init__(self):
        s = "yarn"
        set_ = object.__setattr__
        set_(self, "factor", _number("factor", self.factor, low=1.0, low_open=False, scheme=s))
        if self.low is not None or self.high is not None:
            self._check_ramp_form()
        else:
            self._check_hugging_face_form()
        if self.attention_factor is not None:
            set_(self, "attention_factor",
                 _number("attention_factor", self.attention_factor, low=0.0, scheme=s))
        for name in ("mscale", "mscale_all_dim"):
            if getattr(self, name) is not None:
                set_(self, name, _number(name, getattr(self, name), low=0.0, low_open=False, scheme=s))
        if not isinstance(self.truncate, (bool, np.bool_)):  # numpy bools are bools
            _fail(f"yarn: truncate must be True or False, got {self.truncate!r}")
        set_(self, "truncate", bool(self.truncate))

    def _check_hugging_face_form(self):
        s = "yarn"
        set_ = object.__setattr__
        if self.original_max_positions is None:
            _fail("yarn needs original_max_positions (Hugging Face's form) or the ramp's pair "
                  "bounds low and high (SGLang's form, YaRN.from_ramp)")
        set_(self, "original_max_positions",
             _positive_int("original_max_positions", self.original_max_positions, scheme=s))
        set_(self, "beta_fast", _number("beta_fast", 32.0 if self.beta_fast is None else self.beta_fast,
                                        low=0.0, scheme=s))
        set_(self, "beta_slow", _number("beta_slow", 1.0 if self.beta_slow is None else self.beta_slow,
                                        low=0.0, scheme=s))
        if self.beta_fast <= self.beta_slow:
            _fail(f"yarn: beta_fast ({self.beta_fast:g}) must be greater than beta_slow "
                  f"({self.beta_slow:g}): the ramp runs from fast-turning to slow-turning pairs")

    def _check_ramp_form(self):
        s = "yarn"
        set_ = object.__setattr__
        if self.low is None or self.high is None:
            _fail(f"yarn needs {sorted(k for k in ('low', 'high') if getattr(self, k) is None)} "
                  "with the other ramp bound")
        given = [k for k in ("original_max_positions", "beta_fast", "beta_slow")
                 if getattr(self, k) is not None]
        if given:
            _fail(f"yarn: give the ramp as low/high or as original_max_positions/beta_fast/"
                  f"beta_slow, not both (got low, high and {', '.join(given)})")
        set_(self, "low", _number("low", self.low, scheme=s))
        set_(self, "high", _number("high", self.high, scheme=s))
        if self.high < self.low:
            _fail(f"yarn: high ({self.high:g}) must not be below low ({self.low:g})")

    def ramp(self, rotary_dim: int, base: float) -> tuple[float, float]:
        """The ramp's pair bounds ``(low, high)`` for this ``rotary_dim`` and base (unguarded;
        :func:`ropelab.freqs.yarn_ramp_bounds` makes them safe to divide by)."""
        if self.low is not None:
            return self.low, self.high
        return yarn_correction_range(rotary_dim, base, self.original_max_positions, self.beta_fast,
                                     self.beta_slow, self.truncate)

    def resolved_attention_factor(self) -> float:
        if self.attention_factor is not None:
            return self.attention_factor
        if self.mscale and self.mscale_all_dim:
            return yarn_mscale(self.factor, self.mscale) / yarn_mscale(self.factor, self.mscale_all_dim)
        return yarn_mscale(self.factor)

    def compute(self, rotary_dim: int, base: float) -> tuple[np.ndarray, float]:
        low, high = self.ramp(rotary_dim, base)
        return yarn_blend_inv_freq(rotary_dim, base, self.factor, low, high), self.resolved_attention_factor()


_RAMP_KEYS = ("factor", "low", "high", "attention_factor")


def as_fused_yarn(yarn) -> YaRN | None:
    """What ``fused_qknorm_rope(yarn=...)`` takes: None, a :class:`YaRN`, or SGLang's mapping
    ``{"factor", "low", "high"[, "attention_factor"]}`` (-> :meth:`YaRN.from_ramp`)."""
    if yarn is None or isinstance(yarn, YaRN):
        return yarn
    if isinstance(yarn, dict):
        unknown = set(yarn) - set(_RAMP_KEYS)
        if unknown:
            _fail(f"yarn has unknown keys {sorted(unknown)}; expected factor, low, high, "
                  "attention_factor")
        missing = {"factor", "low", "high"} - set(yarn)
        if missing:
            _fail(f"yarn needs {sorted(missing)}")
        return YaRN.from_ramp(**yarn)
    raise TypeError(f"yarn must be None, ropelab.scaling.YaRN or a dict with factor, low, high "
                    f"[, attention_factor]; got {type(yarn).__name__}")


@dataclass(frozen=True)
class Llama3:
    """Llama 3.1 scaling: ``factor`` (>= 1), ``0 < low_freq_factor < high_freq_factor``, and the
    pre-training context ``original_max_positions`` (Llama 3.1: 8, 1, 4, 8192)."""

    factor: float
    low_freq_factor: float
    high_freq_factor: float
    original_max_positions: int

    def __post_init__(self):
        s = "llama3"
        set_ = object.__setattr__
        set_(self, "factor", _number("factor", self.factor, low=1.0, low_open=False, scheme=s))
        set_(self, "low_freq_factor", _number("low_freq_factor", self.low_freq_factor, low=0.0, scheme=s))
        set_(self, "high_freq_factor", _number("high_freq_factor", self.high_freq_factor, low=0.0, scheme=s))
        if self.low_freq_factor >= self.high_freq_factor:
            _fail(f"llama3: low_freq_factor ({self.low_freq_factor:g}) must be less than "
                  f"high_freq_factor ({self.high_freq_factor:g})")
        set_(self, "original_max_positions",
             _positive_int("original_max_positions", self.original_max_positions, scheme=s))

    def compute(self, rotary_dim: int, base: float) -> tuple[np.ndarray, float]:
        return llama3_inv_freq(rotary_dim, base, self.factor, self.low_freq_factor,
                               self.high_freq_factor, self.original_max_positions), 1.0


SCHEMES = (Linear, NTK, YaRN, Llama3)

# Hugging Face ``rope_scaling`` keys -> (scheme, {hf key: field}); "rope_type"/"type" aside.
_HF = {
    "linear": (Linear, {"factor": "factor"}),
    "ntk": (NTK, {"factor": "factor"}),
    "yarn": (YaRN, {"factor": "factor", "original_max_position_embeddings": "original_max_positions",
                    "beta_fast": "beta_fast", "beta_slow": "beta_slow",
                    "attention_factor": "attention_factor", "mscale": "mscale",
                    "mscale_all_dim": "mscale_all_dim", "truncate": "truncate"}),
    "llama3": (Llama3, {"factor": "factor", "low_freq_factor": "low_freq_factor",
                        "high_freq_factor": "high_freq_factor",
                        "original_max_position_embeddings": "original_max_positions"}),
}
_HINTS = {
    "dynamic": "dynamic NTK depends on the running sequence length; use 'ntk' with the effective "
               "factor (factor * seq_len / max_position_embeddings - (factor - 1))",
    "longrope": "LongRoPE is not implemented in ropelab",
}


def from_dict(config: dict):
    """Build a scheme from a Hugging Face ``rope_scaling`` dict, or None for ``"default"``."""
    cfg = dict(config)
    name = cfg.pop("rope_type", None)
    legacy = cfg.pop("type", None)
    name = name if name is not None else legacy
    if name is None:
        _fail(f"a scaling dict needs 'rope_type' (one of {', '.join(['default', *_HF])}), got {config!r}")
    if not isinstance(name, str):
        _fail(f"rope_type must be a string, got {name!r}")
    if name == "default":
        if cfg:
            _fail(f"rope_type 'default' takes no parameters, got {sorted(cfg)}")
        return None
    if name not in _HF:
        hint = f" ({_HINTS[name]})" if name in _HINTS else ""
        _fail(f"unknown RoPE scaling scheme {name!r}{hint}; known: {', '.join(['default', *_HF])}")
    cls, keys = _HF[name]
    unknown = sorted(set(cfg) - set(keys))
    if unknown:
        _fail(f"{name}: unknown key(s) {unknown}; accepted: {sorted(keys)}")
    # None means "use the default", as in Hugging Face's ``.get(key) or default``.
    kwargs = {keys[k]: v for k, v in cfg.items() if v is not None}
    try:
        return cls(**kwargs)
    except TypeError as exc:  # a required key is missing
        missing = [k for k, f in keys.items() if f not in kwargs]
        raise RopeInputError(f"{name}: missing key(s) among {missing}: {exc}") from None


def parse(scaling):
    """A scheme object (or None for no scaling) from what a user passed as ``scaling``."""
    if scaling is None or isinstance(scaling, SCHEMES):
        return scaling
    if isinstance(scaling, dict):
        return from_dict(scaling)
    if isinstance(scaling, str):
        _fail(f"scaling must be a scheme object or a dict with parameters, got the bare name "
              f"{scaling!r}; e.g. ropelab.scaling.Linear(4.0) or {{'rope_type': 'linear', 'factor': 4.0}}")
    raise TypeError(f"scaling must be one of {', '.join(c.__name__ for c in SCHEMES)}, a Hugging Face "
                    f"rope_scaling dict, or None; got {type(scaling).__name__}")


def resolve(scaling, *, rotary_dim: int, base: float) -> tuple[np.ndarray, float]:
    """``(freqs, attention_factor)`` for ``scaling``: float64 ``[rotary_dim // 2]`` and a float."""
    scheme = parse(scaling)
    if scheme is None:
        return inv_freq(rotary_dim, base), 1.0
    freqs, attention_factor = scheme.compute(rotary_dim, base)
    freqs = np.asarray(freqs, dtype=np.float64)
    if not (np.all(np.isfinite(freqs)) and np.all(freqs > 0)):
        _fail(f"{scheme!r} gives non-finite or non-positive frequencies for rotary_dim={rotary_dim}, "
              f"base={base:g}")
    return freqs, float(attention_factor)
