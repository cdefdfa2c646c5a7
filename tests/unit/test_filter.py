"""SQL92 selector parser and evaluator (rmq.filter) against RocketMQ 4.9.8's
semantics: every operator, precedence, NULL (three-valued) logic, Java number
types and conversions, string escapes, comments, and the compile errors with
their messages.  Contexts hold strings, as message properties do."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmq.filter import FILTERS, SQL92, FilterError, SqlFilter
from rmq.filter.java_values import (
    JavaEvalError,
    JLong,
    double_to_string,
    java_compare,
    parse_double,
    parse_integer,
)
from rmq.filter.parser import parse, tokenize


def match(selector: str, **props: str) -> bool:
    return parse(selector).matches(props)


def value(selector: str, **props: str):
    """The three-valued result (True, False or None for unknown)."""
    return parse(selector).evaluate(props)


# ---- operators ----------------------------------------------------------------------
@pytest.mark.parametrize(("selector", "props", "expected"), [
    ("a > 5", {"a": "10"}, True),
    ("a > 5", {"a": "5"}, False),
    ("a >= 5", {"a": "5"}, True),
    ("a < 5", {"a": "-7"}, True),
    ("a <= 5", {"a": "6"}, False),
    ("a = 5", {"a": "5"}, True),
    ("a = 5", {"a": "05"}, True),      # Integer.valueOf("05")
    ("a = 5", {"a": "+5"}, True),
    ("a <> 5", {"a": "6"}, True),
    ("a <> 5", {"a": "5"}, False),
    ("a = 'x'", {"a": "x"}, True),
    ("a = 'x'", {"a": "X"}, False),
    ("a <> 'x'", {"a": "y"}, True),
    ("a IN ('x', 'y')", {"a": "y"}, True),
    ("a IN ('x', 'y')", {"a": "z"}, False),
    ("a NOT IN ('x', 'y')", {"a": "z"}, True),
    ("a NOT IN ('x', 'y')", {"a": "x"}, False),
    ("a IN ('1', '2', '3', '4', '5', '6')", {"a": "6"}, True),
    ("a IS NULL", {}, True),
    ("a IS NULL", {"a": ""}, False),
    ("a IS NOT NULL", {"a": ""}, True),
    ("a IS NOT NULL", {}, False),
    ("a BETWEEN 1 AND 3", {"a": "1"}, True),
    ("a BETWEEN 1 AND 3", {"a": "3"}, True),
    ("a BETWEEN 1 AND 3", {"a": "4"}, False),
    ("a NOT BETWEEN 1 AND 3", {"a": "4"}, True),
    ("a NOT BETWEEN 1 AND 3", {"a": "2"}, False),
    ("a BETWEEN -3 AND -1", {"a": "-2"}, True),
    ("NOT (a > 1)", {"a": "0"}, True),
    ("NOT (a > 1)", {"a": "2"}, False),
    ("+a > 1", {"a": "2"}, True),
    ("a > -1", {"a": "0"}, True),
    ("a > - -1", {"a": "0"}, False),
    ("TRUE", {}, True),
    ("FALSE", {}, False),
    ("NOT FALSE", {}, True),
    ("1 < 2", {}, True),
    ("3000000000 > 5", {}, True),
    ("1.5 > 1", {}, True),
])
def test_operators(selector, props, expected):
    assert match(selector, **props) is expected


def test_keywords_are_case_insensitive_properties_are_not():
    assert match("a > 1 and b is not null or c in ('x')", a="2", b="")
    assert match("a between 1 and 2", a="2")
    assert not match("A = 'x'", a="x")
    assert match("A = 'x' AND a = 'y'", A="x", a="y")
    assert match("$x_1 = 'v' AND _ = 'w'", **{"$x_1": "v", "_": "w"})


# ---- NULL and three-valued logic ---------------------------------------------------------
@pytest.mark.parametrize(("selector", "props", "expected"), [
    ("a > 1", {}, None),
    ("a = 'x'", {}, None),
    ("a <> 'x'", {}, None),              # NOT unknown is unknown
    ("a IN ('x')", {}, None),
    ("a NOT IN ('x')", {}, None),
    ("a BETWEEN 1 AND 2", {}, None),
    ("NOT (a > 1)", {}, None),
    ("a > 1 AND b = 'x'", {"b": "x"}, None),
    ("a > 1 AND b = 'x'", {"b": "y"}, False),  # FALSE decides AND
    ("a > 1 OR b = 'x'", {"b": "x"}, True),    # TRUE decides OR
    ("a > 1 OR b = 'x'", {"b": "y"}, None),
    ("a IS NULL OR a > 1", {}, True),
    ("NULL", {}, None),
    ("NULL IS NULL", {}, True),
    ("NOT NULL", {}, None),
    ("'x' = a", {}, False),             # null on the right of = is FALSE, not unknown
    ("a = b", {}, True),                # two nulls are equal in 4.9.8
    ("a <> 'x' OR TRUE", {}, True),
])
def test_null_semantics(selector, props, expected):
    assert value(selector, **props) is expected
    assert match(selector, **props) is (expected is True)


# ---- Java types and conversions -------------------------------------------------------
@pytest.mark.parametrize(("selector", "props", "expected"), [
    # a property compared with an Integer is parsed by Integer.valueOf: no decimals,
    # no blanks, 32 bits; with a Long by Long.valueOf; with a Double by Double.valueOf
    ("a > 5", {"a": "10.5"}, False),
    ("a > 5", {"a": " 7"}, False),
    ("a > 5", {"a": "4000000000"}, False),
    ("a > 3000000000", {"a": "4000000000"}, True),
    ("a > 5L", {"a": "4000000000"}, False),  # 5L fits 32 bits: an Integer
    ("a > 5.5", {"a": "10"}, True),
    ("a > 5.5", {"a": " 7 "}, True),
    ("a > 5.5", {"a": "1e1"}, True),
    ("a > 5.5", {"a": "6d"}, True),
    ("a > 5.5", {"a": "0x1p3"}, True),
    ("a > 5.5", {"a": "Infinity"}, True),
    ("a > 5.5", {"a": "NaN"}, True),     # Double.compareTo puts NaN above everything
    ("a < 5.5", {"a": "NaN"}, False),
    ("a = 5.5", {"a": "NaN"}, False),
    ("a > 5.5", {"a": "inf"}, False),    # Python's spelling is not Java's
    ("a > 5.5", {"a": "1_0"}, False),
    ("a = 5", {"a": "5.0"}, False),
    ("a = 5.0", {"a": "5"}, True),
    ("a = 5", {"a": "x"}, False),
    # two properties: ordering compares them as doubles, equality as strings
    ("a > b", {"a": "2", "b": "1.5"}, True),
    ("a > b", {"a": "x", "b": "1.5"}, False),
    ("a = b", {"a": "1", "b": "1.0"}, False),
    ("a = b", {"a": "x", "b": "x"}, True),
    # booleans: Boolean.valueOf of the string, any case
    ("f = TRUE", {"f": "TRUE"}, True),
    ("f = TRUE", {"f": "yes"}, False),
    ("f = FALSE", {"f": "no"}, True),
    ("f <> TRUE", {"f": "true"}, False),
    # a bare property is a boolean cast: strings are never TRUE
    ("f", {"f": "true"}, False),
    ("NOT f", {"f": "true"}, True),
    ("f OR a = 1", {"f": "true", "a": "1"}, True),
    # unary minus of a string is null
    ("-a < 0", {"a": "5"}, False),
    ("1 = TRUE", {}, False),
])
def test_java_conversions(selector, props, expected):
    assert match(selector, **props) is expected


def test_evaluation_errors_do_not_match_and_stop_the_evaluation():
    # Java throws out of the whole selector; OR does not rescue a failed left side
    assert not match("a > 5 OR b = 'x'", a="abc", b="x")
    assert match("b = 'x' OR a > 5", a="abc", b="x")   # short-circuit before the error
    with pytest.raises(JavaEvalError):
        parse("a > 5").evaluate({"a": "abc"})
    with pytest.raises(JavaEvalError, match="illegal to compare string"):
        parse("a > b").evaluate({"a": "x", "b": "1"})
    # (NOT a) = 'x': a Boolean compared with a String is a ClassCastException
    assert not match("NOT a = 'x'", a="y")


# ---- precedence -------------------------------------------------------------------------
def test_and_binds_tighter_than_or():
    ctx = {"a": "1", "b": "0", "c": "0"}
    assert match("a = 1 OR b = 2 AND c = 3", **ctx)
    assert not match("(a = 1 OR b = 2) AND c = 3", **ctx)
    assert match("b = 2 AND c = 3 OR a = 1", **ctx)


def test_between_and_is_not_a_logical_and():
    assert match("a BETWEEN 1 AND 3 AND b = 'x'", a="2", b="x")
    assert not match("a BETWEEN 1 AND 3 AND b = 'x'", a="2", b="y")
    assert match("a NOT BETWEEN 1 AND 3 OR b IS NULL", a="2")


def test_not_is_unary_and_binds_to_its_operand():
    assert str(parse("NOT a = 'x'")) == "((NOT a) == 'x')"
    assert str(parse("NOT (a = 'x')")) == "(NOT (a == 'x'))"
    assert str(parse("NOT a IS NULL")) == "((NOT a) == NULL)"


def test_tree_rendering_follows_java_to_string():
    assert str(parse("a > 5 AND region = 'eu' OR b <> 1.5E10")) == \
        "(((a > 5) && (region == 'eu')) || (NOT (b == 1.5E10)))"
    assert str(parse("a NOT IN ('x', 'it''s') AND c IS NOT NULL")) == \
        "(a NOT IN ( x, it's ) && (NOT (c == NULL)))"
    assert str(parse("a BETWEEN -1 AND 2")) == "((a >= (- 1)) && (a <= 2))"


# ---- literals, strings and comments ------------------------------------------------------
def test_string_escapes():
    assert match("a = 'it''s'", a="it's")
    assert match("a = ''''", a="'")
    assert match("a = ''", a="")
    assert match("a IN ('x''y', 'z')", a="x'y")
    assert match("a = 'line\nbreak'", a="line\nbreak")
    assert match("a = '中文'", a="中文")


@pytest.mark.parametrize(("literal", "expected"), [
    ("5", 5), ("5L", 5), ("5l", 5), ("2147483647", 2147483647), ("2147483648L", JLong(1 << 31)),
    ("2147483648", JLong(2147483648)), ("9223372036854775807", JLong(9223372036854775807)),
    ("1.5", 1.5), ("5.", 5.0), (".5", 0.5), ("1e3", 1000.0), ("1.5E-1", 0.15), ("2E+2", 200.0),
])
def test_number_literals(literal, expected):
    const = parse(f"{literal} = a").left
    assert const.value == expected and type(const.value) is type(expected)


def test_comments_and_blanks():
    assert match("a = 1 -- the rest of the line\nAND b = 2", a="1", b="2")
    assert match("/* leading */ a = 1 /* inner ** stars */ AND\tb\r\n=\f2", a="1", b="2")
    with pytest.raises(FilterError):  # a line comment needs its line end
        parse("a = 1 -- trailing")


# ---- compile errors ------------------------------------------------------------------------
EXPECTING_OPERAND = ('Was expecting one of: <STRING>, <DECIMAL>, <FLOAT>, "TRUE", "FALSE", '
                     '"NULL", <ID>, "("')


@pytest.mark.parametrize(("selector", "message"), [
    ("", f'Encountered "<EOF>" at line 1, column 1. {EXPECTING_OPERAND}'),
    ("a >", f'Encountered "<EOF>" at line 1, column 4. {EXPECTING_OPERAND}'),
    ("a == 1", f'Encountered "=" at line 1, column 4. {EXPECTING_OPERAND}'),
    ("a = 1 AND", f'Encountered "<EOF>" at line 1, column 10. {EXPECTING_OPERAND}'),
    ("(a = 1", 'Encountered "<EOF>" at line 1, column 7. Was expecting one of: ")"'),
    ("a = 1 b", 'Encountered "b" at line 1, column 7. Was expecting one of: <EOF>, "AND", "OR"'),
    ("a IN ()", 'Encountered ")" at line 1, column 7. Was expecting one of: <STRING>'),
    ("a IN (1)", 'Encountered "1" at line 1, column 7. Was expecting one of: <STRING>'),
    ("a IS 1", 'Encountered "1" at line 1, column 6. Was expecting one of: "NULL"'),
    ("a = 0x10", 'Encountered "x10" at line 1, column 6. Was expecting one of: <EOF>, "AND", '
                 '"OR"'),
    ("a.b = 1", "Lexical error at line 1, column 2. Encountered: '.'"),
    ("a != 1", "Lexical error at line 1, column 3. Encountered: '!'"),
    ("a = 1\n  AND #", "Lexical error at line 2, column 7. Encountered: '#'"),
    ("a = \"x\"", "Lexical error at line 1, column 5. Encountered: '\"'"),
    ("a = 'open", "Lexical error at line 1, column 5. Encountered: \"'\""),
    ("5", "Expression will not result in a boolean value: 5"),
    ("'x'", "Expression will not result in a boolean value: 'x'"),
    ("-a", "Expression will not result in a boolean value: (- a)"),
    ("a = 1 AND 2", "Expression will not result in a boolean value: 2"),
    ("a = NULL", "'NULL' cannot be compared."),
    ("NULL = a", "'NULL' cannot be compared."),
    ("TRUE = 1", "'TRUE' cannot be compared with '1'"),
    ("a > 'x'", "Value ''x'' cannot be compared."),
    ("a > TRUE", "Value 'TRUE' cannot be compared."),
    ("(a > 1) > 2", "Value '(a > 1)' cannot be compared."),
    ("NOT a > 1", "Value '(NOT a)' cannot be compared."),
    ("1 IN ('a')", "Expected a property for In expression, got: 1"),
    ("a BETWEEN 3 AND 1", "Illegal values of between, left value(3) must less than or equal "
                          "to right value(1)"),
    ("a BETWEEN 2.5 AND 1", "Illegal values of between, left value(2.5) must less than or "
                            "equal to right value(1)"),
    ("a BETWEEN NULL AND 1", "Illegal values of between, values can not be null!"),
    ("a BETWEEN 'a' AND 'b'", "Value ''a'' cannot be compared."),
    ("a BETWEEN 1 AND 'x'", 'For input string: "x"'),
    ("0.0 < a", "0.0 is less than 4.9E-324"),
    ("1e400 > a", "1e400 is greater than 1.7976931348623157E308"),
    ("99999999999999999999 = a", 'For input string: "99999999999999999999"'),
])
def test_compile_errors(selector, message):
    with pytest.raises(FilterError) as info:
        parse(selector)
    assert str(info.value) == message


def test_tokens_use_the_longest_match():
    kinds = [t.kind for t in tokenize("a<>b<=c>=1.5e3 ANDY and 007 .5")]
    assert kinds == ["<ID>", "<>", "<ID>", "<=", "<ID>", ">=", "<FLOAT>", "<ID>", "AND",
                     "<DECIMAL>", "<DECIMAL>", "<DECIMAL>", "<FLOAT>", "<EOF>"]


# ---- factory and cache --------------------------------------------------------------------
def test_factory_compiles_sql92_only():
    assert FILTERS.compile(SQL92, "a > 1").matches({"a": "2"})
    with pytest.raises(FilterError, match="no filter for expression type TAG"):
        FILTERS.compile("TAG", "TagA")
    with pytest.raises(FilterError, match="Expression can't be null"):
        FILTERS.compile(SQL92, None)


def test_parse_cache_keeps_results_and_errors_bounded():
    f = SqlFilter(cache_size=2)
    first = f.compile("a > 1")
    assert f.compile("a > 1") is first
    for _ in range(2):
        with pytest.raises(FilterError, match="cannot be compared"):
            f.compile("a = NULL")
    f.compile("b > 1")  # evicts the least recently used ("a > 1")
    assert f.compile("a > 1") is not first


# ---- Java value helpers -------------------------------------------------------------------
def test_java_value_helpers():
    assert parse_integer("-2147483648") == -(1 << 31)
    with pytest.raises(JavaEvalError):
        parse_integer("2147483648")
    assert parse_integer("2147483648", long=True) == 1 << 31
    with pytest.raises(JavaEvalError):
        parse_integer("1 ")
    assert parse_double("\t-1.5f ") == -1.5 and parse_double("-0x1.8p1") == -3.0
    with pytest.raises(JavaEvalError):
        parse_double("")
    assert java_compare(JLong(9007199254740993), 9007199254740992.0) == 0  # via double
    assert java_compare(-0.0, 0.0) == -1
    assert java_compare("\uffff", "\U00010000") == 1  # UTF-16 order, not code points
    assert [double_to_string(v) for v in (1.0, 1e10, 1.5e-5, 123456789.0, 0.001, -2.5e300)] \
        == ["1.0", "1.0E10", "1.5E-5", "1.23456789E8", "0.001", "-2.5E300"]


# ---- properties: a reference evaluation ---------------------------------------------------------
class EvalFailed(Exception):
    """The reference's stand-in for a Java exception during evaluation."""


NAMES = ("a", "b", "c")
WORDS = ("x", "y", "it's", "")
VALUES = st.one_of(st.none(), st.integers(-5, 5).map(str), st.sampled_from(WORDS))


def _number(props, name):
    v = props.get(name)
    if v is None:
        return None
    try:
        return int(v)
    except ValueError:
        raise EvalFailed from None


def _quote(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


@st.composite
def atoms(draw):
    """(selector text, reference function of the properties)."""
    name = draw(st.sampled_from(NAMES))
    kind = draw(st.sampled_from(["cmp", "str", "in", "null", "between"]))
    if kind == "cmp":
        op = draw(st.sampled_from([">", ">=", "<", "<=", "=", "<>"]))
        k = draw(st.integers(-5, 5))
        ops = {">": int.__gt__, ">=": int.__ge__, "<": int.__lt__, "<=": int.__le__,
               "=": int.__eq__, "<>": int.__ne__}

        def ref(p):
            n = _number(p, name)
            return None if n is None else ops[op](n, k)
        return f"{name} {op} {k}", ref
    if kind == "str":
        word, negated = draw(st.sampled_from(WORDS)), draw(st.booleans())

        def ref(p):
            v = p.get(name)
            return None if v is None else (v == word) != negated
        return f"{name} {'<>' if negated else '='} {_quote(word)}", ref
    if kind == "in":
        words = draw(st.lists(st.sampled_from(WORDS + ("1",)), min_size=1, max_size=6))
        negated = draw(st.booleans())

        def ref(p):
            v = p.get(name)
            return None if v is None else (v in words) != negated
        text = ", ".join(_quote(w) for w in words)
        return f"{name} {'NOT IN' if negated else 'IN'} ({text})", ref
    if kind == "null":
        negated = draw(st.booleans())
        return (f"{name} IS {'NOT ' if negated else ''}NULL",
                lambda p: (p.get(name) is None) != negated)
    low = draw(st.integers(-5, 5))
    high = draw(st.integers(low, 5))
    negated = draw(st.booleans())

    def ref(p):
        n = _number(p, name)
        if n is None:
            return None
        return (low <= n <= high) != negated
    return f"{name} {'NOT BETWEEN' if negated else 'BETWEEN'} {low} AND {high}", ref


def _and(left, right):
    def ref(p):
        lv = left[1](p)
        if lv is False:
            return False
        rv = right[1](p)
        if rv is False:
            return False
        return None if lv is None or rv is None else True
    lt = f"({left[0]})" if left[2] == "OR" else left[0]
    rt = f"({right[0]})" if right[2] in ("OR", "AND") else right[0]
    return f"{lt} AND {rt}", ref, "AND"


def _or(left, right):
    def ref(p):
        lv = left[1](p)
        if lv is True:
            return True
        rv = right[1](p)
        if rv is True:
            return True
        return None if lv is None or rv is None else False
    rt = f"({right[0]})" if right[2] == "OR" else right[0]
    return f"{left[0]} OR {rt}", ref, "OR"


def _not(inner):
    def ref(p):
        v = inner[1](p)
        return None if v is None else not v
    return f"NOT ({inner[0]})", ref, "NOT"


SELECTORS = st.recursive(
    atoms().map(lambda a: (a[0], a[1], "ATOM")),
    lambda children: st.one_of(
        st.tuples(children, children).map(lambda lr: _and(*lr)),
        st.tuples(children, children).map(lambda lr: _or(*lr)),
        children.map(_not),
    ),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(SELECTORS, st.fixed_dictionaries({n: VALUES for n in NAMES}))
def test_random_selectors_agree_with_a_reference_evaluation(selector, props):
    text, ref, _ = selector
    ctx = {k: v for k, v in props.items() if v is not None}
    try:
        expected = ref(ctx)
    except EvalFailed:
        with pytest.raises(JavaEvalError):
            parse(text).evaluate(ctx)
        assert not parse(text).matches(ctx)
        return
    assert parse(text).evaluate(ctx) is expected, text


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab1.5' ()=<>-+*/\nNOTANDORISNULLINBETWEENeE$_,", max_size=30))
def test_any_text_compiles_or_raises_filter_error(text):
    try:
        expr = parse(text)
    except FilterError as exc:
        assert str(exc)
        return
    try:
        expr.matches({"a": "1", "b": "x"})
    except JavaEvalError:  # matches() must absorb these
        raise AssertionError(text) from None
