"""fastjson dialect: what rmq writes and what it accepts from Java peers."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rmq.common import fastjson


def test_legacy_writes_unquoted_integer_keys_sorted_and_compact():
    obj = {"brokerName": "broker-a", "brokerAddrs": {1: "10.0.0.2:10911", 0: "10.0.0.1:10911"},
           "cluster": "DefaultCluster"}
    assert fastjson.dumps(obj) == (
        b'{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"},'
        b'"brokerName":"broker-a","cluster":"DefaultCluster"}')


def test_standard_quotes_integer_keys():
    assert fastjson.dumps({"m": {10: "b", 2: "a"}}, standard=True) == b'{"m":{"2":"a","10":"b"}}'


def test_none_values_are_omitted_like_fastjson():
    assert fastjson.dumps({"a": None, "b": 1, "c": {"x": None}}) == b'{"b":1,"c":{}}'


def test_strings_escapes_per_mode():
    s = 'a"b\\c\n\x01é中'
    assert fastjson.dumps(s) == '"a\\"b\\\\c\\n\\u0001é中"'.encode()
    assert fastjson.dumps(s, standard=True) == b'"a\\"b\\\\c\\n\\u0001\\u00E9\\u4E2D"'
    assert fastjson.dumps("\U0001F600", standard=True) == b'"\\uD83D\\uDE00"'


def test_scalars_and_sets():
    assert fastjson.dumps([True, False, 1, 1.5, 0.0, {"b", "a"}]) == b'[true,false,1,1.5,0.0,["a","b"]]'


def test_reads_unquoted_numeric_keys_as_strings():
    assert fastjson.loads(b'{"brokerAddrs":{0:"a:1",1:"b:2"}}') == {
        "brokerAddrs": {"0": "a:1", "1": "b:2"}}


def test_reads_object_keys_as_their_compact_json():
    text = b'{"offsetTable":{{"brokerName":"b","queueId":1,"topic":"T"}:42}}'
    key = '{"brokerName":"b","queueId":1,"topic":"T"}'
    assert fastjson.loads(text) == {"offsetTable": {key: 42}}


def test_reads_lenient_syntax():
    assert fastjson.loads("{'a':'x', b : [1, 2,], \"c\":\"\\u0041\\x42\",}") == {
        "a": "x", "b": [1, 2], "c": "AB"}
    assert fastjson.loads(" [ ] ") == []
    assert fastjson.loads('{"n":-1.5e3,"t":true,"f":false,"z":null}') == {
        "n": -1500.0, "t": True, "f": False, "z": None}


@pytest.mark.parametrize("bad", [b"", b"{", b'{"a" 1}', b'{"a":1', b"[1 2]", b'"abc', b"{a:}",
                                 b"\xff\xfe", b"nope", b'{"a":1} x', b'"\\u12"'])
def test_rejects_garbage_with_fastjson_error(bad):
    with pytest.raises(fastjson.FastjsonError):
        fastjson.loads(bad)


def test_unsupported_values_are_type_errors():
    with pytest.raises(TypeError):
        fastjson.dumps(object())
    with pytest.raises(TypeError):
        fastjson.dumps({(1, 2): "x"})


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20)


def _drop_none(v):
    if isinstance(v, dict):
        return {k: _drop_none(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [_drop_none(x) for x in v]
    return v


@given(_json, st.booleans())
def test_round_trip_both_modes(value, standard):
    assert fastjson.loads(fastjson.dumps(value, standard=standard)) == _drop_none(value)


@given(st.dictionaries(st.integers(0, 2**40), st.text(), max_size=5))
def test_legacy_integer_keys_round_trip_through_tolerant_reader(table):
    assert fastjson.loads(fastjson.dumps({"t": table})) == {"t": {str(k): v for k, v in table.items()}}
