"""Java value semantics the SQL92 filter of RocketMQ 4.9.8 depends on.

A selector is evaluated over Java objects: ``Integer``, ``Long``, ``Double``,
``Boolean``, ``String`` and null.  Python's ``int`` stands for ``Integer``,
:class:`JLong` (an ``int`` subclass) for ``Long``, ``float`` for ``Double``,
``bool`` for ``Boolean``, ``str`` for ``String`` and None for null.  The
Integer/Long distinction matters: comparing a property with an Integer
constant parses the property with ``Integer.valueOf``, which refuses values
outside 32 bits, while a Long constant uses ``Long.valueOf``.

This module holds the conversions (``Integer/Long/Double/Boolean.valueOf``
of a String), ``ComparisonExpression.__compare`` with its type promotions,
and the ``toString`` forms that appear in error messages.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal

INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1
LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1
DOUBLE_MAX = 1.7976931348623157e308
DOUBLE_MIN = 5e-324  # Double.MIN_VALUE: the smallest positive double


class JLong(int):
    """A Java ``Long`` (plain ``int`` is a Java ``Integer``)."""

    __slots__ = ()

    def __neg__(self) -> JLong:
        return JLong(-int(self))


class JavaEvalError(Exception):
    """What Java throws while evaluating (NumberFormatException,
    ClassCastException, an illegal string comparison): the message does not
    match."""


# Value kinds, in the order of the promotion table of __compare
BOOL, INT, LONG, DOUBLE, STR = range(5)
_KINDS = {bool: BOOL, int: INT, JLong: LONG, float: DOUBLE, str: STR}


def kind(value: object) -> int:
    """The Java class of a value (KeyError for anything else, a bug)."""
    return _KINDS[type(value)]


_INTEGER = re.compile(r"[+-]?\d+")
# Double.valueOf: decimal or hex float, optional exponent and f/d suffix,
# NaN/Infinity; surrounding characters <= ' ' are trimmed first
_DECIMAL = re.compile(
    r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?)")
_HEX_FLOAT = re.compile(
    r"([+-]?)0[xX]((?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?[0-9]+)[fFdD]?")


def _java_trim(text: str) -> str:
    """``String.trim``: strips characters up to U+0020 at both ends."""
    start, end = 0, len(text)
    while start < end and text[start] <= " ":
        start += 1
    while end > start and text[end - 1] <= " ":
        end -= 1
    return text[start:end]


def parse_integer(text: str, long: bool = False) -> int:
    """``Integer.valueOf`` / ``Long.valueOf``: sign and decimal digits, no
    blanks, in range."""
    if not _INTEGER.fullmatch(text):
        raise JavaEvalError(f'For input string: "{text}"')
    value = int(text)
    low, high = (LONG_MIN, LONG_MAX) if long else (INT_MIN, INT_MAX)
    if not low <= value <= high:
        raise JavaEvalError(f'For input string: "{text}"')
    return JLong(value) if long else value


def parse_double(text: str) -> float:
    """``Double.valueOf`` of a String (Java's grammar, not Python's)."""
    s = _java_trim(text)
    if _DECIMAL.fullmatch(s):
        if s.endswith(("f", "F", "d", "D")) and not s.endswith("Infinity"):
            s = s[:-1]
        return float(s)
    m = _HEX_FLOAT.fullmatch(s)
    if m:
        value = float.fromhex(m.group(2))
        return -value if m.group(1) == "-" else value
    raise JavaEvalError(f'For input string: "{text}"' if s else "empty String")


def parse_boolean(text: str) -> bool:
    """``Boolean.valueOf``: true only for "true" in any case."""
    return text.lower() == "true"


def compare_doubles(a: float, b: float) -> int:
    """``Double.compareTo``: NaN above everything and equal to itself,
    -0.0 below 0.0."""
    if a < b:
        return -1
    if a > b:
        return 1
    a_nan, b_nan = math.isnan(a), math.isnan(b)
    if a_nan or b_nan:
        return int(a_nan) - int(b_nan)
    return int(math.copysign(1, a) > 0) - int(math.copysign(1, b) > 0)


def compare_strings(a: str, b: str) -> int:
    """``String.compareTo``: UTF-16 code unit order."""
    if a == b:
        return 0
    ua, ub = a.encode("utf-16-be"), b.encode("utf-16-be")
    return -1 if ua < ub else 1


def _compare_same(k: int, lv, rv) -> int:
    if k == DOUBLE:
        return compare_doubles(lv, rv)
    if k == STR:
        return compare_strings(lv, rv)
    return (lv > rv) - (lv < rv)  # Integer, Long, Boolean (false < true)


def _promote(lk: int, rk: int, lv, rv) -> tuple[int, object, object] | None:
    """The conversions of ``__compare`` for two different classes (string
    conversion always on, as for every parsed selector).  None means Java
    returns -1 without comparing."""
    if lk == BOOL:
        if rk == STR:  # Java casts the Boolean itself to String
            raise JavaEvalError("java.lang.Boolean cannot be cast to java.lang.String")
        return None
    if lk == STR:
        if rk == BOOL:
            return BOOL, parse_boolean(lv), rv
        if rk == DOUBLE:
            return DOUBLE, parse_double(lv), rv
        return rk, parse_integer(lv, rk == LONG), rv
    if rk == BOOL:
        return None
    if rk == STR:
        if lk == DOUBLE:
            return DOUBLE, lv, parse_double(rv)
        return lk, lv, parse_integer(rv, lk == LONG)
    if lk == DOUBLE or rk == DOUBLE:
        return DOUBLE, float(lv), float(rv)
    return LONG, lv, rv  # Integer with Long


def java_compare(lv, rv) -> int:
    """``ComparisonExpression.__compare(lv, rv, true)`` of two non-null values."""
    lk, rk = _KINDS[type(lv)], _KINDS[type(rv)]
    if lk == rk:
        return _compare_same(lk, lv, rv)
    promoted = _promote(lk, rk, lv, rv)
    if promoted is None:
        return -1
    k, lv, rv = promoted
    return _compare_same(k, lv, rv)


def java_equals(lv, rv) -> bool:
    """``lv.equals(rv)``: same class and value (``Double.equals`` treats NaN
    as equal to itself and 0.0 as different from -0.0)."""
    if type(lv) is not type(rv):
        return False
    if type(lv) is float:
        return compare_doubles(lv, rv) == 0
    return lv == rv


def double_to_string(value: float) -> str:
    """``Double.toString``: plain notation for 1e-3 <= |v| < 1e7, else
    computerized scientific notation (``1.0E10``), shortest digits."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return repr(value)  # Python's plain form agrees in this range
    _sign, digits, exponent = Decimal(repr(abs(value))).normalize().as_tuple()
    text = "".join(map(str, digits))
    scientific = len(text) + exponent - 1
    mantissa = f"{text[0]}.{text[1:] or '0'}"
    return f"{'-' if value < 0 else ''}{mantissa}E{scientific}"


def value_to_string(value) -> str:
    """``String.valueOf`` of a value (what ``%s`` prints)."""
    if value is None:
        return "null"
    if type(value) is bool:
        return "true" if value else "false"
    if type(value) is float:
        return double_to_string(value)
    return str(value)
