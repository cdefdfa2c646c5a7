"""Frame and header codec of the remoting protocol (pure-Python twin of
``rmq._fast.remoting_codec``).

Frame (all integers big-endian)::

    int32  L  = 4 + H + B          length, not counting itself
    int32  M  = (serializeType << 24) | H
    H bytes   header: JSON (type 0) or ROCKETMQ binary (type 1)
    B bytes   body

JSON header: one object, keys in alphabetical order, no whitespace,
``extFields`` values always strings, ``language`` as the enum name,
``serializeTypeCurrentRPC`` informational.  On input any key order, unknown
keys, numbers/booleans as extFields values and the language as a number are
accepted (the C++ client sends them).

ROCKETMQ header::

    int16 code | int8 language | int16 version | int32 opaque | int32 flag
    int32 remarkLen | remark | int32 extLen | extLen bytes of
        { int16 keyLen | key | int32 valLen | val }*

A zero-length remark, key or value decodes as absent; a later duplicate key
wins.  Any length that points outside the header is a RemotingCommandError.

The ``py_*`` functions are the twins; ``encode``/``decode``/``frame_length``
are the compiled ones when built.  They work on plain values (no RemotingCommand objects) so the
compiled twin can implement exactly the same signatures:

* ``encode(code, language, version, opaque, flag, remark, ext_fields,
  serialize_type, body_len) -> bytes``: the 8-byte prefix plus the header;
  the caller appends the body.
* ``decode(frame) -> (code, language, version, opaque, flag, remark,
  ext_fields, serialize_type, body_offset)``: ``frame`` is the bytes after the
  length prefix; the body is ``frame[body_offset:]``.
* ``decode_frames(buf, pos, end, max_frame) -> (frames, pos, error)``: the
  splitting loop of a connection's receive buffer (see ``py_decode_frames``).
* ``frame_length(buf, pos, end, max_frame) -> int``: the L of the frame
  starting at ``pos`` when the whole frame is in ``buf[pos:end]``, else -1;
  raises RemotingCommandError for L < 4 or L > max_frame.
"""

from __future__ import annotations

import struct

import orjson

from rmq._fast import compiled
from rmq.common.java import LANGUAGE_NAMES, LANGUAGE_OTHER, language_name
from rmq.remoting.exceptions import RemotingCommandError

JSON = 0
ROCKETMQ = 1

_LANGUAGE_BY_NAME = {name: code for code, name in enumerate(LANGUAGE_NAMES)}

_PREFIX = struct.Struct(">ii")
_INT = struct.Struct(">i")
_SHORT = struct.Struct(">h")
_FIXED = struct.Struct(">HBHiii")
_FIXED_IN = struct.Struct(">hBhiii")
_FIXED_SIZE = 17  # up to and including remarkLen


def _stringify(value: object) -> str:
    """fastjson's view of a non-string extFields value as a Java String."""
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, (int, float, str)):
        return str(value)
    return orjson.dumps(value).decode()


def _string_ext(ext_fields: dict) -> dict:
    """The map with every value a str (None values dropped)."""
    for v in ext_fields.values():
        if type(v) is not str:
            break
    else:
        return ext_fields
    return {k: v if type(v) is str else _stringify(v)
            for k, v in ext_fields.items() if v is not None}


def _encode_json(code, language, version, opaque, flag, remark, ext_fields) -> bytes:
    obj: dict = {"code": code}
    if ext_fields is not None:
        obj["extFields"] = _string_ext(ext_fields)
    obj["flag"] = flag
    obj["language"] = language_name(language)
    obj["opaque"] = opaque
    if remark is not None:
        obj["remark"] = remark
    obj["serializeTypeCurrentRPC"] = "JSON"
    obj["version"] = version
    return orjson.dumps(obj)


def _encode_rocketmq(code, language, version, opaque, flag, remark, ext_fields) -> bytes:
    rb = remark.encode() if remark else b""
    parts = [_FIXED.pack(code & 0xFFFF, language & 0xFF, version & 0xFFFF, opaque, flag,
                         len(rb)), rb]
    if ext_fields:
        entries = []
        for k, v in ext_fields.items():
            if v is None:
                continue
            kb = k.encode()
            if len(kb) > 32767:
                raise RemotingCommandError(f"extFields key of {len(kb)} bytes is too long")
            vb = (v if type(v) is str else _stringify(v)).encode()
            entries.append(_SHORT.pack(len(kb)) + kb + _INT.pack(len(vb)) + vb)
        ext = b"".join(entries)
        parts.append(_INT.pack(len(ext)))
        parts.append(ext)
    else:
        parts.append(b"\x00\x00\x00\x00")
    return b"".join(parts)


def _check_int32(name: str, value: int) -> None:
    if not -2147483648 <= value <= 2147483647:
        raise RemotingCommandError(f"{name} {value} is not an int32")


def py_encode(code: int, language: int, version: int, opaque: int, flag: int,
              remark: str | None, ext_fields: dict | None, serialize_type: int,
              body_len: int) -> bytes:
    """Length prefix, header-length word and header of one frame."""
    _check_int32("code", code)
    _check_int32("version", version)
    _check_int32("opaque", opaque)
    _check_int32("flag", flag)
    if remark is not None and type(remark) is not str:
        remark = _stringify(remark)
    if serialize_type == JSON:
        header = _encode_json(code, language, version, opaque, flag, remark, ext_fields)
    elif serialize_type == ROCKETMQ:
        header = _encode_rocketmq(code, language, version, opaque, flag, remark, ext_fields)
    else:
        raise RemotingCommandError(f"unknown serialize type {serialize_type}")
    hlen = len(header)
    if hlen > 0xFFFFFF or 4 + hlen + body_len > 2147483647:
        raise RemotingCommandError(f"header of {hlen} bytes is too long")
    return _PREFIX.pack(4 + hlen + body_len, (serialize_type << 24) | hlen) + header


def _json_int(obj: dict, key: str, default: int) -> int:
    value = obj.get(key)
    if value is None:
        return default
    if type(value) is int:
        if -2147483648 <= value <= 2147483647:
            return value
    elif type(value) is str:
        try:
            return int(value)
        except ValueError:
            pass
    raise RemotingCommandError(f"bad {key} in JSON header: {value!r}")


def _json_language(value: object) -> int:
    if value is None:
        return 0
    if type(value) is str:
        return _LANGUAGE_BY_NAME.get(value, LANGUAGE_OTHER)
    if type(value) is int:
        return value if 0 <= value < len(LANGUAGE_NAMES) else LANGUAGE_OTHER
    raise RemotingCommandError(f"bad language in JSON header: {value!r}")


def _decode_json(raw) -> tuple:
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise RemotingCommandError(f"bad JSON header: {e}") from None
    if type(obj) is not dict:
        raise RemotingCommandError("JSON header is not an object")
    remark = obj.get("remark")
    if remark is not None and type(remark) is not str:
        remark = _stringify(remark)
    ext = obj.get("extFields")
    if ext is not None:
        if type(ext) is not dict:
            raise RemotingCommandError("extFields is not an object")
        ext = _string_ext(ext)
    return (_json_int(obj, "code", 0), _json_language(obj.get("language")),
            _json_int(obj, "version", 0), _json_int(obj, "opaque", 0),
            _json_int(obj, "flag", 0), remark, ext)


def _text(raw, start: int, end: int) -> str:
    try:
        return str(raw[start:end], "utf-8")
    except UnicodeDecodeError as e:
        raise RemotingCommandError(f"bad UTF-8 in header: {e}") from None


def _decode_rocketmq(raw, hlen: int) -> tuple:
    if hlen < _FIXED_SIZE + 4:
        raise RemotingCommandError(f"ROCKETMQ header too short: {hlen}")
    code, language, version, opaque, flag, rlen = _FIXED_IN.unpack_from(raw, 0)
    p = _FIXED_SIZE
    if rlen < 0 or p + rlen + 4 > hlen:
        raise RemotingCommandError(f"bad remark length {rlen}")
    remark = _text(raw, p, p + rlen) if rlen else None
    p += rlen
    (elen,) = _INT.unpack_from(raw, p)
    p += 4
    if elen < 0 or p + elen > hlen:
        raise RemotingCommandError(f"bad extFields length {elen}")
    ext = None
    if elen:
        ext = {}
        end = p + elen
        while p < end:
            if p + 2 > end:
                raise RemotingCommandError("truncated extFields key length")
            (klen,) = _SHORT.unpack_from(raw, p)
            p += 2
            if klen < 0 or p + klen + 4 > end:
                raise RemotingCommandError(f"bad extFields key length {klen}")
            key = _text(raw, p, p + klen)
            p += klen
            (vlen,) = _INT.unpack_from(raw, p)
            p += 4
            if vlen < 0 or p + vlen > end:
                raise RemotingCommandError(f"bad extFields value length {vlen}")
            if klen and vlen:
                ext[key] = _text(raw, p, p + vlen)
            p += vlen
    if language >= len(LANGUAGE_NAMES):
        language = LANGUAGE_OTHER
    return code, language, version, opaque, flag, remark, ext


def py_decode(frame) -> tuple:
    """Decode the header of one frame (the bytes after the length prefix)."""
    n = len(frame)
    if n < 4:
        raise RemotingCommandError(f"frame too short: {n} bytes")
    mark = int.from_bytes(frame[0:4], "big")
    stype = mark >> 24
    hlen = mark & 0xFFFFFF
    if hlen > n - 4:
        raise RemotingCommandError(f"header length {hlen} exceeds frame length {n}")
    raw = memoryview(frame)[4:4 + hlen]
    if stype == JSON:
        fields = _decode_json(raw)
    elif stype == ROCKETMQ:
        fields = _decode_rocketmq(raw, hlen)
    else:
        raise RemotingCommandError(f"unknown serialize type {stype}")
    return (*fields, stype, 4 + hlen)


def py_frame_length(buf, pos: int, end: int, max_frame: int) -> int:
    """L of the complete frame at ``pos``, or -1 while it is incomplete."""
    if end - pos < 4:
        return -1
    length = int.from_bytes(buf[pos:pos + 4], "big", signed=True)
    if length < 4 or length > max_frame:
        raise RemotingCommandError(f"frame length {length} out of range [4, {max_frame}]")
    if end - pos - 4 < length:
        return -1
    return length


def py_decode_frames(buf, pos: int, end: int, max_frame: int) -> tuple:
    """Decode every complete frame in ``buf[pos:end]``.

    Returns ``(frames, pos, error)``: one tuple per frame in
    ``RemotingCommand``'s argument order (code, language, version, opaque,
    flag, remark, ext_fields, body or None, serialize_type), the position after the last complete frame, and the
    RemotingCommandError that stopped the scan (None when the rest is just
    incomplete).  Frames before a bad one are still returned so they are
    served before the connection closes.
    """
    frames = []
    try:
        while True:
            length = py_frame_length(buf, pos, end, max_frame)
            if length < 0:
                break
            frame = buf[pos + 4:pos + 4 + length]
            fields = py_decode(frame)
            off = fields[8]
            body = bytes(frame[off:]) if off < length else None
            frames.append((*fields[:7], body, fields[7]))
            pos += 4 + length
    except RemotingCommandError as e:
        return frames, pos, e
    return frames, pos, None


def header_pieces(header: bytes, marks: list[bytes]) -> tuple[list[bytes], list[int]] | None:
    """``header`` (an encoded header written with placeholder values ``marks``)
    cut around them: the texts before, between and after the marks, and
    which mark each text is followed by, so that a lane writes the header of
    other values the way this encoder does; None unless every mark occurs
    exactly once."""
    if not all(header.count(m) == 1 for m in marks):
        return None
    pieces: list[bytes] = []
    order: list[int] = []
    pos = 0
    for start, i in sorted((header.index(m), i) for i, m in enumerate(marks)):
        if start < pos:
            return None  # marks that overlap
        pieces.append(header[pos:start])
        order.append(i)
        pos = start + len(marks[i])
    pieces.append(header[pos:])
    return pieces, order


encode = py_encode
decode = py_decode
frame_length = py_frame_length
decode_frames = py_decode_frames

_c = compiled("remoting_codec")
if _c is not None:
    encode = _c.encode
    decode = _c.decode
    frame_length = _c.frame_length
    decode_frames = _c.decode_frames
