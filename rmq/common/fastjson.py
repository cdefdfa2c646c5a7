"""The JSON dialect of fastjson 1.2.69, the serializer every RocketMQ 4.9.8 peer uses.

Writing (``dumps``), two modes, both compact (no whitespace) with keys sorted:

* legacy (``standard=False``, fastjson's default ``JSON.toJSONString``): maps with
  integer keys are written with **unquoted** keys (``{0:"127.0.0.1:10911"}``, not
  valid JSON but what Java clients before 4.9.4 and every ``ClusterInfo`` reader
  expect); non-ASCII characters raw (UTF-8).
* standard (``standard=True``, BrowserCompatible + QuoteFieldNames + MapSortField,
  what the 4.9.8 name server sends to clients of version >= V4_9_4): every key
  quoted, non-ASCII escaped as upper-case ``\\uXXXX``.

Bean properties are emitted in alphabetical order and ``None`` values are omitted,
as fastjson does (callers pass plain dicts whose keys are the Java property names;
sorting every dict gives the bean order and a stable order for maps).

Reading (``loads``) accepts what Java peers produce: standard JSON first (orjson,
fast), then a tolerant parser for unquoted numeric or bare-word keys, object keys
(``{{"brokerName":"b","queueId":1,"topic":"T"}:5}``, returned as the compact JSON
of the key object), single-quoted strings and trailing commas.  Keys always come
back as ``str`` (``{0:"a"}`` -> ``{"0": "a"}``); typed readers convert them.
"""

from __future__ import annotations

from typing import Any

import orjson

__all__ = ["FastjsonError", "dumps", "loads"]


class FastjsonError(ValueError):
    """Text that is not JSON even by fastjson's lenient rules."""


_SHORT_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}


def _needs_escape(c: str, standard: bool) -> bool:
    o = ord(c)
    return o < 0x20 or c in '"\\' or (standard and o > 0x7E)


def _escape_char(c: str) -> str:
    short = _SHORT_ESCAPES.get(c)
    if short is not None:
        return short
    o = ord(c)
    if o > 0xFFFF:  # a surrogate pair, as Java strings hold it
        o -= 0x10000
        return f"\\u{0xD800 + (o >> 10):04X}\\u{0xDC00 + (o & 0x3FF):04X}"
    return f"\\u{o:04X}"


def _quote(s: str, standard: bool) -> str:
    if s.isascii() and s.isprintable() and '"' not in s and "\\" not in s:
        return '"' + s + '"'
    return '"' + "".join(_escape_char(c) if _needs_escape(c, standard) else c for c in s) + '"'


def _sort_key(k: Any) -> tuple[int, Any]:
    # numeric keys numerically, strings lexically (a map never mixes them in Java)
    if isinstance(k, bool) or not isinstance(k, int):
        return (1, str(k))
    return (0, k)


def _write(obj: Any, out: list[str], standard: bool) -> None:
    if obj is None:
        out.append("null")
    elif obj is True:
        out.append("true")
    elif obj is False:
        out.append("false")
    elif isinstance(obj, str):
        out.append(_quote(obj, standard))
    elif isinstance(obj, int):
        out.append(str(obj))
    elif isinstance(obj, float):
        out.append(repr(obj))
    elif isinstance(obj, dict):
        _write_dict(obj, out, standard)
    elif isinstance(obj, (list, tuple, set, frozenset)):
        items = sorted(obj) if isinstance(obj, (set, frozenset)) else obj
        out.append("[")
        first = True
        for item in items:
            if not first:
                out.append(",")
            first = False
            _write(item, out, standard)
        out.append("]")
    else:
        to_json = getattr(obj, "to_json_obj", None)
        if to_json is None:
            raise TypeError(f"cannot write {type(obj).__name__} as JSON")
        _write(to_json(), out, standard)


def _write_dict(obj: dict, out: list[str], standard: bool) -> None:
    out.append("{")
    first = True
    for k in sorted(obj, key=_sort_key):
        v = obj[k]
        if v is None:
            continue
        if not first:
            out.append(",")
        first = False
        if isinstance(k, str):
            out.append(_quote(k, standard))
        elif isinstance(k, int) and not isinstance(k, bool):
            out.append(f'"{k}"' if standard else str(k))
        else:
            raise TypeError(f"unsupported map key {k!r}")
        out.append(":")
        _write(v, out, standard)
    out.append("}")


def dumps(obj: Any, standard: bool = False) -> bytes:
    """Serialize like fastjson (legacy by default, see the module docstring)."""
    out: list[str] = []
    _write(obj, out, standard)
    return "".join(out).encode("utf-8")


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Parse JSON as fastjson would accept it; raises FastjsonError."""
    if isinstance(data, memoryview):
        data = bytes(data)
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        pass
    if not isinstance(data, str):
        try:
            data = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FastjsonError("JSON text is not valid UTF-8") from exc
    parser = _Parser(data)
    value = parser.value()
    parser.skip_ws()
    if parser.pos != len(data):
        raise FastjsonError(f"unexpected text after JSON value at offset {parser.pos}")
    return value


_WS = " \t\r\n\f\b"
_BARE_END = set(_WS + ",:{}[]\"'")
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r",
            "t": "\t", "'": "'"}


_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


def _hex_value(digits: str, count: int) -> int | None:
    """The value of exactly ``count`` hex digits (int() would also take a sign,
    spaces or underscores), or None."""
    if len(digits) != count or not _HEX_DIGITS.issuperset(digits):
        return None
    return int(digits, 16)


# Objects and arrays nested deeper than this are refused (FastjsonError) rather
# than exhausting the interpreter's recursion limit; no RocketMQ body nests
# more than a handful of levels.
MAX_DEPTH = 200


class _Parser:
    """Recursive-descent reader for fastjson's lenient syntax."""

    __slots__ = ("text", "pos", "depth")

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.depth = 0

    def fail(self, what: str) -> FastjsonError:
        return FastjsonError(f"{what} at offset {self.pos}")

    def skip_ws(self) -> None:
        text, pos, n = self.text, self.pos, len(self.text)
        while pos < n and text[pos] in _WS:
            pos += 1
        self.pos = pos

    def peek(self) -> str:
        self.skip_ws()
        if self.pos >= len(self.text):
            raise self.fail("unexpected end of JSON")
        return self.text[self.pos]

    def value(self) -> Any:
        c = self.peek()
        if c == "{" or c == "[":
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise self.fail(f"objects and arrays nested deeper than {MAX_DEPTH}")
            result = self.obj() if c == "{" else self.array()
            self.depth -= 1
            return result
        if c in "\"'":
            return self.string()
        word = self.bare()
        if word == "true":
            return True
        if word == "false":
            return False
        if word == "null":
            return None
        return self.number(word)

    def number(self, word: str) -> int | float:
        try:
            if any(ch in word for ch in ".eE"):
                return float(word)
            return int(word)
        except ValueError:
            raise self.fail(f"bad value {word!r}") from None

    def bare(self) -> str:
        start = self.pos
        text, n = self.text, len(self.text)
        while self.pos < n and text[self.pos] not in _BARE_END:
            self.pos += 1
        if self.pos == start:
            raise self.fail(f"unexpected character {text[start]!r}")
        return text[start : self.pos]

    def string(self) -> str:
        text = self.text
        quote = text[self.pos]
        self.pos += 1
        out: list[str] = []
        n = len(text)
        while True:
            end = self.pos
            while end < n and text[end] != quote and text[end] != "\\":
                end += 1
            out.append(text[self.pos : end])
            if end >= n:
                self.pos = end
                raise self.fail("unterminated string")
            if text[end] == quote:
                self.pos = end + 1
                return "".join(out)
            self.pos = end + 1
            out.append(self.escape())

    def escape(self) -> str:
        text = self.text
        if self.pos >= len(text):
            raise self.fail("unterminated escape")
        c = text[self.pos]
        self.pos += 1
        if c == "u":
            code = _hex_value(text[self.pos : self.pos + 4], 4)
            if code is None:
                raise self.fail("bad \\u escape")
            self.pos += 4
            if 0xD800 <= code < 0xDC00 and text[self.pos : self.pos + 2] == "\\u":
                low = _hex_value(text[self.pos + 2 : self.pos + 6], 4) or 0
                if 0xDC00 <= low < 0xE000:
                    self.pos += 6
                    return chr(0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00))
            return chr(code)
        if c == "x":  # fastjson also reads \xNN
            code = _hex_value(text[self.pos : self.pos + 2], 2)
            if code is None:
                raise self.fail("bad \\x escape")
            self.pos += 2
            return chr(code)
        return _ESCAPES.get(c, c)

    def key(self) -> str:
        c = self.peek()
        if c in "\"'":
            return self.string()
        if c in "{[":
            # an object used as a map key (MessageQueue): keep its compact JSON text
            return dumps(self.value(), standard=True).decode("utf-8")
        return self.bare()

    def obj(self) -> dict[str, Any]:
        self.pos += 1
        result: dict[str, Any] = {}
        if self.peek() == "}":
            self.pos += 1
            return result
        while True:
            k = self.key()
            if self.peek() != ":":
                raise self.fail("expected ':'")
            self.pos += 1
            result[k] = self.value()
            c = self.peek()
            self.pos += 1
            if c == "}":
                return result
            if c != ",":
                raise self.fail("expected ',' or '}'")
            if self.peek() == "}":  # trailing comma
                self.pos += 1
                return result

    def array(self) -> list[Any]:
        self.pos += 1
        result: list[Any] = []
        if self.peek() == "]":
            self.pos += 1
            return result
        while True:
            result.append(self.value())
            c = self.peek()
            self.pos += 1
            if c == "]":
                return result
            if c != ",":
                raise self.fail("expected ',' or ']'")
            if self.peek() == "]":
                self.pos += 1
                return result
