"""A closed, size-bounded encoding for what crosses the grader's process boundary.

The grading child runs the learner's code, so every byte it sends back may have been written by
that code.  The parent therefore never unpickles it (``pickle.loads`` runs whatever the bytes
say); it decodes this format instead, which can express only:

* ``None``, ``bool``, ``int`` (64-bit), ``float``, ``str`` and ``bytes``;
* ``tuple``, ``list`` and ``dict`` of those;
* NumPy arrays and scalars of a plain numeric dtype (rebuilt from their raw bytes, so never a
  subclass, a view of something else, an object array or a lazy value);
* instances of the record classes registered with :func:`register`, rebuilt field by field
  (no constructor, no ``__setstate__``, no other code of theirs runs).

Encoding takes exact types only: a subclass of ``ndarray`` or ``float`` (whose comparisons
could be rigged) is refused, not converted.  Decoding stops with :class:`WireError` on a tag it
does not know, a field a record does not declare, a truncated or trailing byte, nesting deeper
than :data:`MAX_DEPTH`, or a message longer than its limit.
"""

from __future__ import annotations

import dataclasses
import struct

import numpy as np

MAX_DEPTH = 24
_DTYPES = frozenset(np.dtype(t).str for t in (
    "?", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8"))
_RECORDS: dict[str, tuple[type, frozenset]] = {}  # name -> (class, its field names)


class WireError(ValueError):
    """Bytes that are not a message of this format, or a value it cannot carry."""


def register(cls: type, fields=None) -> type:
    """Let instances of ``cls`` cross: a dataclass's fields, or the attribute names given."""
    names = [f.name for f in dataclasses.fields(cls)] if fields is None else list(fields)
    _RECORDS[f"{cls.__module__}.{cls.__qualname__}"] = (cls, frozenset(names))
    return cls


def _record_name(obj) -> str | None:
    cls = type(obj)
    name = f"{cls.__module__}.{cls.__qualname__}"
    found = _RECORDS.get(name)
    return name if found is not None and found[0] is cls else None


# --------------------------------------------------------------------------------------------
# Encoding
# --------------------------------------------------------------------------------------------

def _put_size(out: list, n: int) -> None:
    out.append(struct.pack("<Q", n))


def _put_text(out: list, text: str) -> None:
    raw = text.encode("utf-8", "surrogatepass")
    _put_size(out, len(raw))
    out.append(raw)


def _encode(obj, out: list, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise WireError(f"nested deeper than {MAX_DEPTH}")
    kind = type(obj)
    if obj is None:
        out.append(b"N")
    elif kind is bool:
        out.append(b"T" if obj else b"F")
    elif kind is int:
        if not -2**63 <= obj < 2**63:
            raise WireError(f"an int outside 64 bits: {obj}")
        out.append(b"i" + struct.pack("<q", obj))
    elif kind is float:
        out.append(b"f" + struct.pack("<d", obj))
    elif kind is str:
        out.append(b"s")
        _put_text(out, obj)
    elif kind is bytes:
        out.append(b"b")
        _put_size(out, len(obj))
        out.append(obj)
    elif kind in (tuple, list):
        out.append(b"t" if kind is tuple else b"l")
        _put_size(out, len(obj))
        for item in obj:
            _encode(item, out, depth + 1)
    elif kind is dict:
        out.append(b"d")
        _put_size(out, len(obj))
        for key, value in obj.items():
            _encode(key, out, depth + 1)
            _encode(value, out, depth + 1)
    elif kind is np.ndarray or isinstance(obj, np.generic):
        _encode_numeric(obj, out)
    else:
        name = _record_name(obj)
        if name is None:
            raise WireError(f"cannot carry a {kind.__module__}.{kind.__qualname__}")
        _, fields = _RECORDS[name]
        out.append(b"r")
        _put_text(out, name)
        values = vars(obj)
        _put_size(out, len(fields))
        for field in sorted(fields):
            if field not in values:
                raise WireError(f"{name} has no attribute {field!r} set")
            _put_text(out, field)
            _encode(values[field], out, depth + 1)


def _encode_numeric(obj, out: list) -> None:
    dtype = obj.dtype.newbyteorder("<") if obj.dtype.byteorder == ">" else obj.dtype
    if dtype.str not in _DTYPES:
        raise WireError(f"cannot carry dtype {obj.dtype}")
    if isinstance(obj, np.generic):
        out.append(b"g")
        _put_text(out, dtype.str)
        out.append(np.asarray(obj, dtype=dtype).tobytes())
        return
    out.append(b"a")
    _put_text(out, dtype.str)
    _put_size(out, obj.ndim)
    for n in obj.shape:
        _put_size(out, n)
    raw = np.ascontiguousarray(obj, dtype=dtype).tobytes()
    _put_size(out, len(raw))
    out.append(raw)


def encode(obj) -> bytes:
    """``obj`` as bytes; :class:`WireError` if it holds anything this format cannot carry."""
    out: list = []
    _encode(obj, out, 0)
    return b"".join(out)


# --------------------------------------------------------------------------------------------
# Decoding
# --------------------------------------------------------------------------------------------

class _Reader:
    def __init__(self, data: bytes):
        self.data = memoryview(data)
        self.at = 0

    def take(self, n: int) -> memoryview:
        if n < 0 or self.at + n > len(self.data):
            raise WireError(f"truncated: {n} more bytes wanted at byte {self.at} of "
                            f"{len(self.data)}")
        piece = self.data[self.at:self.at + n]
        self.at += n
        return piece

    def size(self) -> int:
        return struct.unpack("<Q", self.take(8))[0]

    def text(self) -> str:
        try:
            return bytes(self.take(self.size())).decode("utf-8", "surrogatepass")
        except UnicodeDecodeError as exc:
            raise WireError(f"a string that is not UTF-8 ({exc.reason})") from None

    def dtype(self) -> np.dtype:
        name = self.text()
        if name not in _DTYPES:
            raise WireError(f"dtype {name!r} is not one this format carries")
        return np.dtype(name)


def _decode(r: _Reader, depth: int):
    if depth > MAX_DEPTH:
        raise WireError(f"nested deeper than {MAX_DEPTH}")
    tag = bytes(r.take(1))
    if tag == b"N":
        return None
    if tag in (b"T", b"F"):
        return tag == b"T"
    if tag == b"i":
        return struct.unpack("<q", r.take(8))[0]
    if tag == b"f":
        return struct.unpack("<d", r.take(8))[0]
    if tag == b"s":
        return r.text()
    if tag == b"b":
        return bytes(r.take(r.size()))
    if tag in (b"t", b"l"):
        items = [_decode(r, depth + 1) for _ in range(r.size())]
        return tuple(items) if tag == b"t" else items
    if tag == b"d":
        out = {}
        for _ in range(r.size()):
            key = _decode(r, depth + 1)
            try:
                out[key] = _decode(r, depth + 1)
            except TypeError:  # an unhashable key (a list)
                raise WireError(f"a dict key of type {type(key).__name__}") from None
        return out
    if tag == b"g":
        dtype = r.dtype()
        return np.frombuffer(r.take(dtype.itemsize), dtype=dtype)[0]
    if tag == b"a":
        dtype = r.dtype()
        ndim = r.size()
        if ndim > 32:
            raise WireError(f"an array of {ndim} dimensions")
        shape = tuple(r.size() for _ in range(ndim))
        raw = r.take(r.size())
        count = 1
        for n in shape:
            count *= n
        if count * dtype.itemsize != len(raw):
            raise WireError(f"an array of shape {shape} and dtype {dtype} with {len(raw)} bytes")
        return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()
    if tag == b"r":
        name = r.text()
        if name not in _RECORDS:
            raise WireError(f"record type {name!r} is not one this format carries")
        cls, fields = _RECORDS[name]
        values = {}
        for _ in range(r.size()):
            field = r.text()
            if field not in fields or field in values:
                raise WireError(f"{name} has no field {field!r} (or has it twice)")
            values[field] = _decode(r, depth + 1)
        if set(values) != fields:
            raise WireError(f"{name} lacks {', '.join(sorted(fields - set(values)))}")
        obj = object.__new__(cls)
        obj.__dict__.update(values)
        return obj
    raise WireError(f"unknown tag {tag!r} at byte {r.at - 1}")


def decode(data: bytes, limit: int):
    """The value ``data`` encodes; :class:`WireError` unless it is exactly one well-formed
    message of at most ``limit`` bytes."""
    if not isinstance(data, (bytes, bytearray)):
        raise WireError(f"not bytes: {type(data).__name__}")
    if len(data) > limit:
        raise WireError(f"{len(data)} bytes, over the limit of {limit}")
    reader = _Reader(bytes(data))
    value = _decode(reader, 0)
    if reader.at != len(reader.data):
        raise WireError(f"{len(reader.data) - reader.at} bytes after the message")
    return value
