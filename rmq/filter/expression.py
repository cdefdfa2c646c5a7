"""Expression tree of a SQL92 selector (RocketMQ 4.9.8 ``filter.expression``).

Each node evaluates against an evaluation context, a mapping from property
name to value (the broker passes a message's properties, all strings); a
missing property is null.  Evaluation follows the JMS selector's
three-valued logic as 4.9.8 implements it: comparisons with null give null
(unknown), AND/OR/NOT propagate unknown, and only a result of exactly TRUE
matches.  Java exceptions during evaluation (a property that does not parse
as the number it is compared with, ...) surface as
:class:`~rmq.filter.java_values.JavaEvalError`; :meth:`BooleanExpression.matches`
turns them into "no match" as ``ExpressionMessageFilter`` does.

The factory functions (``create_*``) carry the checks 4.9.8 makes while
parsing; they raise :class:`FilterError` with Java's messages.  ``str(node)``
renders a node as Java's ``toString`` does, since those texts appear in the
messages.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rmq.filter.java_values import (
    JavaEvalError,
    JLong,
    double_to_string,
    java_compare,
    java_equals,
    parse_double,
    value_to_string,
)

Context = Mapping[str, Any]


class FilterError(Exception):
    """A selector that does not compile (syntax or semantic error)."""


class Expression:
    """A node; ``evaluate`` returns a Java value (None for null)."""

    __slots__ = ()

    def evaluate(self, ctx: Context) -> Any:
        raise NotImplementedError


class BooleanExpression(Expression):
    """A node whose value is TRUE, FALSE or null."""

    __slots__ = ()

    def matches(self, ctx: Context) -> bool:
        """True only when the value is TRUE; evaluation errors do not match."""
        try:
            return self.evaluate(ctx) is True
        except JavaEvalError:
            return False


# ---- leaves -------------------------------------------------------------------------
class ConstantExpression(Expression):
    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def evaluate(self, ctx: Context) -> Any:
        return self.value

    def __str__(self) -> str:
        value = self.value
        if value is None:
            return "NULL"
        if type(value) is bool:
            return "TRUE" if value else "FALSE"
        if type(value) is str:
            return encode_string(value)
        if type(value) is float:
            return double_to_string(value)
        return str(value)


class BooleanConstantExpression(ConstantExpression, BooleanExpression):
    """TRUE, FALSE and NULL literals (usable where a condition is expected)."""

    __slots__ = ()


TRUE = BooleanConstantExpression(True)
FALSE = BooleanConstantExpression(False)
NULL = BooleanConstantExpression(None)


class PropertyExpression(Expression):
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def evaluate(self, ctx: Context) -> Any:
        return ctx.get(self.name)

    def __str__(self) -> str:
        return self.name


def encode_string(s: str) -> str:
    """A string as it would be written in a selector (quotes doubled)."""
    return "'" + s.replace("'", "''") + "'"


# ---- comparisons ------------------------------------------------------------------------
class ComparisonExpression(BooleanExpression):
    """``>``, ``>=``, ``<``, ``<=``: numbers only; two strings are compared as
    doubles when both parse, else the evaluation fails."""

    __slots__ = ("left", "right", "symbol", "_accept")

    _ACCEPT = {">": lambda c: c > 0, ">=": lambda c: c >= 0,
               "<": lambda c: c < 0, "<=": lambda c: c <= 0}

    def __init__(self, left: Expression, right: Expression, symbol: str) -> None:
        self.left, self.right, self.symbol = left, right, symbol
        self._accept = self._ACCEPT[symbol]

    def evaluate(self, ctx: Context) -> bool | None:
        lv = self.left.evaluate(ctx)
        if lv is None:
            return None
        rv = self.right.evaluate(ctx)
        if rv is None:
            return None
        if type(lv) is str and type(rv) is str:
            try:
                return self._accept(java_compare(parse_double(lv), parse_double(rv)))
            except JavaEvalError:
                raise JavaEvalError("It's illegal to compare string by '>=', '>', '<', '<='. "
                                    f"lv={lv}, rv={rv}") from None
        return self._accept(java_compare(lv, rv))

    def __str__(self) -> str:
        return f"({self.left} {self.symbol} {self.right})"


class EqualExpression(BooleanExpression):
    """``=`` (and IS NULL): null on one side gives null when it is the left,
    FALSE when it is the right; equal values give TRUE; otherwise the values
    are compared after Java's type promotions."""

    __slots__ = ("left", "right")

    def __init__(self, left: Expression, right: Expression) -> None:
        self.left, self.right = left, right

    def evaluate(self, ctx: Context) -> bool | None:
        lv = self.left.evaluate(ctx)
        rv = self.right.evaluate(ctx)
        if (lv is None) != (rv is None):
            return None if lv is None else False
        if lv is rv or java_equals(lv, rv):
            return True
        return java_compare(lv, rv) == 0

    def __str__(self) -> str:
        return f"({self.left} == {self.right})"


class LogicExpression(BooleanExpression):
    """AND / OR with short-circuit and unknown (null) propagation."""

    __slots__ = ("left", "right", "is_and")

    def __init__(self, left: BooleanExpression, right: BooleanExpression, is_and: bool) -> None:
        self.left, self.right, self.is_and = left, right, is_and

    def evaluate(self, ctx: Context) -> bool | None:
        decisive = not self.is_and  # the value that decides alone: FALSE for AND
        lv = self.left.evaluate(ctx)
        if lv is decisive:
            return decisive
        rv = self.right.evaluate(ctx)
        if rv is decisive:
            return decisive
        if lv is None or rv is None:
            return None
        return not decisive

    def __str__(self) -> str:
        return f"({self.left} {'&&' if self.is_and else '||'} {self.right})"


# ---- unary --------------------------------------------------------------------------
class NegateExpression(Expression):
    """Unary minus: numbers are negated, anything else gives null."""

    __slots__ = ("right",)

    def __init__(self, right: Expression) -> None:
        self.right = right

    def evaluate(self, ctx: Context) -> Any:
        value = self.right.evaluate(ctx)
        if value is None or type(value) not in (int, JLong, float):
            return None
        return -value

    def __str__(self) -> str:
        return f"(- {self.right})"


class NotExpression(BooleanExpression):
    __slots__ = ("right",)

    def __init__(self, right: BooleanExpression) -> None:
        self.right = right

    def evaluate(self, ctx: Context) -> bool | None:
        value = self.right.evaluate(ctx)
        return None if value is None else not value

    def __str__(self) -> str:
        return f"(NOT {self.right})"


class BooleanCastExpression(BooleanExpression):
    """A bare property used as a condition: TRUE only for a Boolean TRUE
    (message properties are strings, so a present property gives FALSE)."""

    __slots__ = ("right",)

    def __init__(self, right: Expression) -> None:
        self.right = right

    def evaluate(self, ctx: Context) -> bool | None:
        value = self.right.evaluate(ctx)
        if value is None:
            return None
        return value if type(value) is bool else False

    def __str__(self) -> str:
        return str(self.right)


class InExpression(BooleanExpression):
    """``prop [NOT] IN ('a', 'b')``: null for a missing or non-string value."""

    __slots__ = ("right", "values", "negated", "_set")

    def __init__(self, right: PropertyExpression, values: list[str], negated: bool) -> None:
        self.right, self.values, self.negated = right, values, negated
        self._set = frozenset(values)

    def evaluate(self, ctx: Context) -> bool | None:
        value = self.right.evaluate(ctx)
        if type(value) is not str:
            return None
        return (value in self._set) != self.negated

    def __str__(self) -> str:
        return f"{self.right} {'NOT IN' if self.negated else 'IN'} ( {', '.join(self.values)} )"


# ---- factories with 4.9.8's parse-time checks --------------------------------------------
def as_boolean(expr: Expression) -> BooleanExpression:
    """A condition from an operand: booleans as they are, a bare property
    through a boolean cast, anything else is an error."""
    if isinstance(expr, BooleanExpression):
        return expr
    if isinstance(expr, PropertyExpression):
        return BooleanCastExpression(expr)
    raise FilterError(f"Expression will not result in a boolean value: {expr}")


def _check_less_than_operand(expr: Expression) -> None:
    """Only numbers (constants) and non-boolean expressions can be ordered."""
    if isinstance(expr, ConstantExpression):
        if type(expr.value) in (int, JLong, float):
            return
        raise FilterError(f"Value '{expr}' cannot be compared.")
    if isinstance(expr, BooleanExpression):
        raise FilterError(f"Value '{expr}' cannot be compared.")


def _check_equal_operand(expr: Expression) -> None:
    if isinstance(expr, ConstantExpression) and expr.value is None:
        raise FilterError(f"'{expr}' cannot be compared.")


def create_ordering(left: Expression, right: Expression, symbol: str) -> BooleanExpression:
    _check_less_than_operand(left)
    _check_less_than_operand(right)
    return ComparisonExpression(left, right, symbol)


def create_equal(left: Expression, right: Expression) -> BooleanExpression:
    _check_equal_operand(left)
    _check_equal_operand(right)
    if isinstance(left, ConstantExpression) and isinstance(right, ConstantExpression) \
            and isinstance(left, BooleanExpression) and not isinstance(right, BooleanExpression):
        raise FilterError(f"'{left}' cannot be compared with '{right}'")
    return EqualExpression(left, right)


def create_not_equal(left: Expression, right: Expression) -> BooleanExpression:
    return NotExpression(create_equal(left, right))


def create_is_null(left: Expression) -> BooleanExpression:
    return EqualExpression(left, NULL)


def create_is_not_null(left: Expression) -> BooleanExpression:
    return NotExpression(EqualExpression(left, NULL))


def create_between(value: Expression, low: Expression, high: Expression) -> BooleanExpression:
    """``value >= low AND value <= high``; constant bounds must be non-null
    and in order."""
    if isinstance(low, ConstantExpression) and isinstance(high, ConstantExpression):
        lv, rv = low.value, high.value
        if lv is None or rv is None:
            raise FilterError("Illegal values of between, values can not be null!")
        try:
            out_of_order = java_compare(rv, lv) < 0
        except JavaEvalError as exc:
            raise FilterError(str(exc)) from None
        if out_of_order:
            raise FilterError(
                f"Illegal values of between, left value({value_to_string(lv)}) must less "
                f"than or equal to right value({value_to_string(rv)})")
    return LogicExpression(create_ordering(value, low, ">="),
                           create_ordering(value, high, "<="), True)


def create_not_between(value: Expression, low: Expression, high: Expression) -> BooleanExpression:
    return LogicExpression(create_ordering(value, low, "<"),
                           create_ordering(value, high, ">"), False)


def create_in(left: Expression, values: list[str], negated: bool) -> BooleanExpression:
    if not isinstance(left, PropertyExpression):
        raise FilterError(f"Expected a property for In expression, got: {left}")
    return InExpression(left, values, negated)


def create_and(left: Expression, right: Expression) -> BooleanExpression:
    return LogicExpression(as_boolean(left), as_boolean(right), True)


def create_or(left: Expression, right: Expression) -> BooleanExpression:
    return LogicExpression(as_boolean(left), as_boolean(right), False)


def create_not(operand: Expression) -> BooleanExpression:
    return NotExpression(as_boolean(operand))


def create_negate(operand: Expression) -> Expression:
    return NegateExpression(operand)
