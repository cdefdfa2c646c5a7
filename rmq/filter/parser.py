"""SQL92 selector parser: the grammar of RocketMQ 4.9.8's ``SelectorParser.jj``
as a hand-written tokenizer and recursive-descent parser.

Grammar, lowest precedence first (every binary level is left-associative)::

    selector    := or_expr EOF                      (must be a condition)
    or_expr     := and_expr ( OR and_expr )*
    and_expr    := equality ( AND equality )*
    equality    := comparison ( '=' comparison | '<>' comparison
                                | IS NULL | IS NOT NULL )*
    comparison  := unary ( ('>' | '>=' | '<' | '<=') unary
                           | [NOT] BETWEEN unary AND unary
                           | [NOT] IN '(' string ( ',' string )* ')' )*
    unary       := '+' unary | '-' unary | NOT unary | primary
    primary     := literal | identifier | '(' or_expr ')'
    literal     := string | decimal | float | TRUE | FALSE | NULL

NOT is a unary operator binding tighter than comparisons, as in 4.9.8 (and
ActiveMQ): ``NOT a = 'x'`` means ``(NOT a) = 'x'``; write ``NOT (a = 'x')``.

Tokens (keywords and letters case-insensitive): blanks `` \\t\\n\\r\\f``;
comments ``-- ...`` up to a line end and ``/* ... */``; identifiers
``[A-Za-z_$][A-Za-z0-9_$]*``; decimals ``0`` or ``[1-9][0-9]*`` with an
optional ``L`` (Integer when it fits 32 bits, else Long); floats ``1.5``,
``1.``, ``.5``, ``1e3``, ``1.5E-3`` (Double; 0 and values beyond the double
range are refused as in 4.9.8); strings in single quotes with ``''`` for a
quote.  There are no hexadecimal or octal literals and no LIKE in 4.9.8.
"""

from __future__ import annotations

import re
from typing import NamedTuple, NoReturn

from rmq.filter import expression as E
from rmq.filter.expression import BooleanExpression, Expression, FilterError
from rmq.filter.java_values import DOUBLE_MAX, DOUBLE_MIN, INT_MAX, INT_MIN, JLong

KEYWORDS = frozenset(("NOT", "AND", "OR", "BETWEEN", "IN", "TRUE", "FALSE", "NULL", "IS"))

# Kinds of tokens besides keywords (whose kind is the upper-cased keyword)
# and operators (whose kind is their text).
ID, DECIMAL, FLOAT, STRING, EOF = "<ID>", "<DECIMAL>", "<FLOAT>", "<STRING>", "<EOF>"

# One alternative per token; the tokenizer keeps the longest match (ties go
# to the earliest alternative), as JavaCC does.
_BLANK = re.compile(r"[ \t\n\r\f]+")
_LINE_COMMENT = re.compile(r"--[^\n\r]*(?:\r\n|\n|\r)")
_BLOCK_COMMENT = re.compile(r"/\*[^*]*\*+(?:[^*/][^*]*\*+)*/")
_TOKENS = (
    (DECIMAL, re.compile(r"(?:0|[1-9][0-9]*[lL]?)")),
    (FLOAT, re.compile(r"(?:[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?"
                       r"|[0-9]+[eE][+-]?[0-9]+)")),
    (STRING, re.compile(r"'(?:''|[^'])*'")),
    (ID, re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")),
    ("op", re.compile(r"<>|<=|>=|[=<>(),+-]")),
)


class Token(NamedTuple):
    kind: str
    image: str
    line: int
    column: int


def _position(text: str, pos: int) -> tuple[int, int]:
    """1-based line and column of ``pos`` (\\r\\n, \\n and \\r end lines)."""
    before = text[:pos].replace("\r\n", "\n").replace("\r", "\n")
    return before.count("\n") + 1, len(before) - before.rfind("\n")


def tokenize(text: str) -> list[Token]:
    """The tokens of ``text`` ending with an EOF token; FilterError on a
    character no token can start with."""
    tokens: list[Token] = []
    pos, n = 0, len(text)
    while True:
        while True:  # blanks and comments
            m = _BLANK.match(text, pos) or _LINE_COMMENT.match(text, pos) \
                or _BLOCK_COMMENT.match(text, pos)
            if m is None:
                break
            pos = m.end()
        if pos >= n:
            tokens.append(Token(EOF, "<EOF>", *_position(text, pos)))
            return tokens
        best_kind, best_end = None, pos
        for kind, pattern in _TOKENS:
            m = pattern.match(text, pos)
            if m is not None and m.end() > best_end:
                best_kind, best_end = kind, m.end()
        if best_kind is None:
            line, column = _position(text, pos)
            raise FilterError(f"Lexical error at line {line}, column {column}. "
                              f"Encountered: {text[pos]!r}")
        image = text[pos:best_end]
        if best_kind == ID and image.upper() in KEYWORDS:
            best_kind = image.upper()
        elif best_kind == "op":
            best_kind = image
        tokens.append(Token(best_kind, image, *_position(text, pos)))
        pos = best_end


# ---- literals ---------------------------------------------------------------------------
def decimal_value(image: str) -> int:
    """``ConstantExpression.createFromDecimal``: Integer when it fits, else Long."""
    digits = image[:-1] if image[-1] in "lL" else image
    value = int(digits)
    if value > (1 << 63) - 1:
        raise FilterError(f'For input string: "{digits}"')
    return value if INT_MIN <= value <= INT_MAX else JLong(value)


def float_value(image: str) -> float:
    """``ConstantExpression.createFloat``: positive, finite, not below the
    smallest double (so 0.0 is refused, as in 4.9.8)."""
    value = float(image)
    if value > DOUBLE_MAX:
        raise FilterError(f"{image} is greater than 1.7976931348623157E308")
    if value < DOUBLE_MIN:
        raise FilterError(f"{image} is less than 4.9E-324")
    return value


def string_value(image: str) -> str:
    return image[1:-1].replace("''", "'")


# ---- parser -----------------------------------------------------------------------------
_ORDERING = (">", ">=", "<", "<=")
_PRIMARY_STARTS = (STRING, DECIMAL, FLOAT, "TRUE", "FALSE", "NULL", ID, "(")


# Selectors deeper than this (operators applied to the results of operators:
# a chain of 150 ORs is 150 deep), or with more parentheses and unary operators
# open within each other than MAX_NESTING, are refused with a FilterError:
# compiling, printing and evaluating them recurse once per level.
MAX_DEPTH = 200
MAX_NESTING = 60


class SelectorParser:
    """Recursive descent over the token list; one instance per parse."""

    def __init__(self, text: str) -> None:
        self.tokens = tokenize(text)
        self.i = 0
        self._depths: dict[int, int] = {}  # id(node) -> depth of its subtree
        self._nesting = 0  # parentheses and unary operators open around the parse position

    def _node(self, node: Expression, *children: Expression) -> Expression:
        """Record the depth of a node made of ``children``; too deep is an error."""
        depth = 1 + max((self._depths.get(id(c), 1) for c in children), default=0)
        if depth > MAX_DEPTH:
            self._too_deep()
        self._depths[id(node)] = depth
        return node

    def _enter(self) -> None:
        self._nesting += 1
        if self._nesting > MAX_NESTING:
            self._too_deep(f"more than {MAX_NESTING} parentheses and unary operators nested")

    def _too_deep(self, what: str = f"nested deeper than {MAX_DEPTH} operators") -> NoReturn:
        tok = self.tokens[self.i]
        raise FilterError(f"Expression {what} at line {tok.line}, column {tok.column}")

    # token helpers
    def _peek(self, ahead: int = 0) -> str:
        return self.tokens[min(self.i + ahead, len(self.tokens) - 1)].kind

    def _next(self) -> Token:
        tok = self.tokens[self.i]
        if tok.kind != EOF:
            self.i += 1
        return tok

    def _expect(self, kind: str) -> Token:
        if self._peek() != kind:
            self._fail((kind,))
        return self._next()

    def _fail(self, expected: tuple[str, ...]) -> NoReturn:
        tok = self.tokens[self.i]
        shown = ", ".join(f'"{k}"' if not k.startswith("<") else k for k in expected)
        raise FilterError(f'Encountered "{tok.image}" at line {tok.line}, column {tok.column}. '
                          f"Was expecting one of: {shown}")

    # grammar
    def parse(self) -> BooleanExpression:
        expr = self._or()
        if self._peek() != EOF:
            self._fail((EOF, "AND", "OR"))
        return E.as_boolean(expr)

    def _or(self) -> Expression:
        left = self._and()
        while self._peek() == "OR":
            self._next()
            right = self._and()
            left = self._node(E.create_or(left, right), left, right)
        return left

    def _and(self) -> Expression:
        left = self._equality()
        while self._peek() == "AND":
            self._next()
            right = self._equality()
            left = self._node(E.create_and(left, right), left, right)
        return left

    def _equality(self) -> Expression:
        left = self._comparison()
        while True:
            kind = self._peek()
            if kind == "=":
                self._next()
                right = self._comparison()
                left = self._node(E.create_equal(left, right), left, right)
            elif kind == "<>":
                self._next()
                right = self._comparison()
                left = self._node(E.create_not_equal(left, right), left, right)
            elif kind == "IS":
                self._next()
                negated = self._peek() == "NOT"
                if negated:
                    self._next()
                self._expect("NULL")
                left = self._node(E.create_is_not_null(left) if negated else E.create_is_null(left),
                                  left)
            else:
                return left

    def _comparison(self) -> Expression:
        left = self._unary()
        while True:
            kind = self._peek()
            negated = kind == "NOT" and self._peek(1) in ("BETWEEN", "IN")
            if negated:
                self._next()
                kind = self._peek()
            if kind in _ORDERING:
                self._next()
                right = self._unary()
                left = self._node(E.create_ordering(left, right, kind), left, right)
            elif kind == "BETWEEN":
                self._next()
                low = self._unary()
                self._expect("AND")
                high = self._unary()
                left = self._node((E.create_not_between if negated else E.create_between)(
                    left, low, high), left, low, high)
            elif kind == "IN":
                self._next()
                left = self._node(E.create_in(left, self._string_list(), negated), left)
            else:
                return left

    def _string_list(self) -> list[str]:
        self._expect("(")
        values = [string_value(self._expect(STRING).image)]
        while self._peek() == ",":
            self._next()
            values.append(string_value(self._expect(STRING).image))
        self._expect(")")
        return values

    def _unary(self) -> Expression:
        kind = self._peek()
        if kind not in ("+", "-", "NOT"):
            return self._primary()
        self._next()
        self._enter()
        operand = self._unary()
        self._nesting -= 1
        if kind == "+":
            return operand
        made = E.create_negate(operand) if kind == "-" else E.create_not(operand)
        return self._node(made, operand)

    def _primary(self) -> Expression:
        kind = self._peek()
        if kind not in _PRIMARY_STARTS:
            self._fail(_PRIMARY_STARTS)
        tok = self._next()
        if kind == STRING:
            return E.ConstantExpression(string_value(tok.image))
        if kind == DECIMAL:
            return E.ConstantExpression(decimal_value(tok.image))
        if kind == FLOAT:
            return E.ConstantExpression(float_value(tok.image))
        if kind == "TRUE":
            return E.TRUE
        if kind == "FALSE":
            return E.FALSE
        if kind == "NULL":
            return E.NULL
        if kind == ID:
            return E.PropertyExpression(tok.image)
        if kind == "(":
            self._enter()
            inner = self._or()
            self._expect(")")
            self._nesting -= 1
            return inner
        raise AssertionError(kind)  # _PRIMARY_STARTS lists every case above


def parse(text: str) -> BooleanExpression:
    """Compile a selector; FilterError (message as in 4.9.8 where it has one)
    for anything invalid."""
    if text is None:
        raise FilterError("Expression can't be null!")
    return SelectorParser(text).parse()
