"""The wire format of every request and answer: a JSON header plus raw numeric buffers.

A message is ``MAGIC`` (8 bytes), the header's length (8 bytes, little-endian), the
header (UTF-8 JSON), then one payload buffer.  In the header an array is
``{"$a": [dtype, shape, offset, nbytes]}`` pointing into the payload and a byte string
(a ciphertext) is ``{"$b": [offset, nbytes]}``; everything else is plain JSON.

Why this and not pickle, ``.npz`` or another library: nothing in it can run code.  The
header is parsed by the standard library's JSON parser (NaN, Infinity and duplicate keys
refused); arrays are read with ``numpy.frombuffer`` in one of three fixed dtypes
(float64, int64, int32, little-endian), never object arrays, after checking that the
declared shape, dtype and byte count agree and lie inside the payload.  Numbers travel
as raw bytes, so a 5000-tree forest costs no text encoding (JSON with base64 was
measured slower), and no dependency beyond numpy is needed (``.npz`` adds a zip parser
and still needs a manifest for shapes; msgpack is not a declared dependency).  A pickle
sent where a message is expected fails the magic check and is never parsed.

A receiver bounds its work before it trusts anything: :func:`decode_header` reads only
the header (its length capped by ``max_header``, far below the message cap, so a huge
header costs nothing but the length check) and leaves the buffer references unresolved;
the receiver checks the method and the session on that plain JSON and only then calls
:func:`resolve` to make the arrays.  Buffer references must lie in the payload one after
another, in the order the header lists them, each byte used once (the layout
:func:`encode` writes): so the arrays and byte strings a message resolves to hold at most
its own size, and no reference can make a receiver copy or hash the same bytes many
times over.  Every walk over the header is bounded by ``MAX_DEPTH``, and every error,
whatever the input, is a :class:`WireError`.
"""

from __future__ import annotations

import json
import math
import struct
from typing import Any

import numpy as np

from raytune_fed.errors import BoundaryViolationError
from raytune_fed.models._records import DTYPES

MAGIC = b"RTFWIRE1"
_LEN = struct.Struct("<Q")
MAX_HEADER_BYTES = 1 << 24
MAX_DEPTH = 32


class WireError(BoundaryViolationError):
    """A message is not a well-formed wire message (the text never quotes the input)."""


def encode(obj: Any) -> bytes:
    """Serialise ``obj`` (JSON types, finite floats, numpy arrays of ``DTYPES``, bytes)."""
    chunks: list[bytes] = []
    offset = 0

    def walk(value: Any, depth: int) -> Any:
        nonlocal offset
        if depth > MAX_DEPTH:
            raise WireError(f"message nests deeper than {MAX_DEPTH} levels")
        if isinstance(value, np.ndarray):
            code = next((c for c, dt in DTYPES.items() if value.dtype == dt), None)
            if code is None:
                raise WireError(f"arrays must have dtype {sorted(DTYPES)}, got {value.dtype}")
            raw = np.ascontiguousarray(value, dtype=DTYPES[code]).tobytes()
            chunks.append(raw)
            offset += len(raw)
            return {"$a": [code, list(value.shape), offset - len(raw), len(raw)]}
        if isinstance(value, (bytes, bytearray)):
            chunks.append(bytes(value))
            offset += len(value)
            return {"$b": [offset - len(value), len(value)]}
        if isinstance(value, dict):
            if not all(isinstance(k, str) for k in value):
                raise WireError("message keys must be strings")
            return {k: walk(v, depth + 1) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [walk(v, depth + 1) for v in value]
        if isinstance(value, bool) or value is None or isinstance(value, str):
            return value
        if isinstance(value, (int, np.integer)):
            return int(value)
        if isinstance(value, (float, np.floating)):
            if not math.isfinite(float(value)):
                raise WireError("message numbers must be finite")
            return float(value)
        raise WireError(f"a message cannot carry a {type(value).__name__}")

    header = json.dumps(walk(obj, 0), separators=(",", ":"), allow_nan=False).encode()
    return b"".join([MAGIC, _LEN.pack(len(header)), header, *chunks])


def _no_constants(name: str) -> Any:
    raise WireError("message numbers must be finite (no NaN or Infinity)")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise WireError("message objects must not repeat a key")
    return out


def decode(message: Any, *, max_bytes: int, max_header: int = MAX_HEADER_BYTES) -> Any:
    """Parse a message; raise :class:`WireError` (a fixed text, never echoing input) if malformed.

    Arrays come back read-only and views of ``message`` (no copy).
    """
    header, payload = decode_header(message, max_bytes=max_bytes, max_header=max_header)
    return resolve(header, payload)


def decode_header(message: Any, *, max_bytes: int, max_header: int = MAX_HEADER_BYTES) -> tuple[Any, memoryview]:
    """The message's header as plain JSON (buffer references not yet resolved) and its payload.

    The header's declared length is checked against ``max_header`` before a byte of it is
    parsed.
    """
    if not isinstance(message, (bytes, bytearray, memoryview)):
        raise WireError("a message must be bytes")
    # a private copy unless immutable, so the sender cannot change what was checked
    data = memoryview(message if isinstance(message, bytes) else bytes(message)).cast("B")
    if len(data) > max_bytes:
        raise WireError(f"message exceeds {max_bytes} bytes")
    if len(data) < len(MAGIC) + _LEN.size or bytes(data[:len(MAGIC)]) != MAGIC:
        raise WireError("not a wire message (bad magic)")
    (n_header,) = _LEN.unpack_from(data, len(MAGIC))
    start = len(MAGIC) + _LEN.size
    if n_header > min(max_header, MAX_HEADER_BYTES) or start + n_header > len(data):
        raise WireError("message header length is out of range")
    try:
        header = json.loads(bytes(data[start:start + n_header]).decode("utf-8"),
                            parse_constant=_no_constants, object_pairs_hook=_unique_keys)
    except WireError:
        raise
    except (ValueError, RecursionError):
        raise WireError("message header is not valid JSON") from None
    return header, data[start + n_header:]


def resolve(header: Any, payload: memoryview) -> Any:
    """``header`` with its buffer references replaced by read-only arrays and bytes from ``payload``."""
    try:
        return _resolve(header, payload, 0, [0])
    except WireError:
        raise
    except (ValueError, TypeError, OverflowError, MemoryError, RecursionError):
        raise WireError("malformed buffer reference") from None


def _resolve(value: Any, payload: memoryview, depth: int, cursor: list[int]) -> Any:
    if depth > MAX_DEPTH:
        raise WireError(f"message nests deeper than {MAX_DEPTH} levels")
    if isinstance(value, list):
        return [_resolve(v, payload, depth + 1, cursor) for v in value]
    if not isinstance(value, dict):
        return value
    if set(value) == {"$a"}:
        return _array(value["$a"], payload, cursor)
    if set(value) == {"$b"}:
        offset, nbytes = _extent(value["$b"], 2, payload, cursor)
        return bytes(payload[offset:offset + nbytes])
    return {k: _resolve(v, payload, depth + 1, cursor) for k, v in value.items()}


def _extent(spec: Any, n: int, payload: memoryview, cursor: list[int]) -> tuple[int, int]:
    """The (offset, size) of a reference, which must start where the previous one ended."""
    if not isinstance(spec, list) or len(spec) != n:
        raise WireError("malformed buffer reference")
    offset, nbytes = spec[-2], spec[-1]
    if not all(type(v) is int and v >= 0 for v in (offset, nbytes)) or offset + nbytes > len(payload):
        raise WireError("buffer reference lies outside the payload")
    if offset != cursor[0]:
        raise WireError("buffer references must follow one another in the payload, each byte used once")
    cursor[0] = offset + nbytes
    return offset, nbytes


def _array(spec: Any, payload: memoryview, cursor: list[int]) -> np.ndarray:
    offset, nbytes = _extent(spec, 4, payload, cursor)
    code, shape = spec[0], spec[1]
    if code not in DTYPES or not isinstance(shape, list) or len(shape) > 8 \
            or not all(type(s) is int and s >= 0 for s in shape):
        raise WireError("malformed array reference")
    dtype = DTYPES[code]
    count = math.prod(shape)
    if count * dtype.itemsize != nbytes or any(s >= 1 << 62 for s in shape):  # (10**30, 0) holds 0 bytes
        raise WireError("array byte count does not match its shape and dtype")
    array = np.frombuffer(payload, dtype=dtype, count=count, offset=offset).reshape(shape)
    array.flags.writeable = False
    return array
