"""The property string of a single send.

``send_properties`` (the general path: the map plus CLUSTER, the stored
string in HashMap order without WAIT, the tagsCode) equals the plain rule
written out.  ``fast_send_properties`` (the fast path: stored string,
tagsCode, isWaitStoreMsgOK, DELAY/TRAN_MSG present, KEYS, UNIQ_KEY, no map)
gives what the general path decides, in its twin and in its compiled build,
over any input: non-ASCII, keys twice, empty keys and values, CLUSTER sent,
more segments than the compiled scan keeps, bytes."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from rmq._fast import compiled_or_none
from rmq.common import java
from rmq.common import message as mc
from rmq.store import MessageExtBrokerInner
from rmq.store import message_codec as codec
from rmq.store.message import wait_store_msg_ok

_fast = compiled_or_none("send_fast")


def _compiled():
    assert _fast is not None, "rmq._fast.send_fast is not built (make ext)"
    _fast.bind(java.hashmap_order, codec._fast_send_properties)
    return _fast.fast_send_properties


def _reference(text, cluster: str) -> tuple[dict, str, int]:
    """The rule written out: parse as string2messageProperties, add CLUSTER,
    store without WAIT in HashMap order (table sized by the stored keys)."""
    props: dict = {}
    for seg in (text or "").split("\x02"):
        i = seg.find("\x01")
        if 0 < i < len(seg) - 1:
            props[seg[:i]] = seg[i + 1:]
    props["CLUSTER"] = cluster
    wait = props.pop("WAIT", None)
    cap = 16
    while len(props) > cap * 3 // 4:
        cap *= 2

    def bucket(k: str) -> int:
        h = mc.java_string_hash(k) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (cap - 1)

    stored = "\x02".join(f"{k}\x01{v}" for k, v in sorted(props.items(), key=lambda kv: bucket(kv[0]))
                         if v is not None)
    if wait is not None:
        props["WAIT"] = wait
    tags = props.get("TAGS")
    return props, stored, mc.tags_string_to_code(tags) if tags else 0


def _fast_reference(text, cluster: str) -> tuple:
    """What the fast path needs, read off the general path's map (4.9.8's
    ``isWaitStoreMsgOK``: absent, or ``Boolean.parseBoolean``).  A delayed,
    transactional or timer send (any key starting ``TIMER_``, 5.3.3's timer
    properties among them) is marked for the general path."""
    props, stored, code = _reference(text, cluster)
    wait = props.get("WAIT")
    special = "DELAY" in props or "TRAN_MSG" in props or any(k.startswith("TIMER_") for k in props)
    return (stored, code, wait is None or wait.lower() == "true", special, props.get("KEYS"),
            props.get("UNIQ_KEY"))


_key = st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "WAIT", "CLUSTER", "DELAY", "TRAN_MSG", "a",
                        "Aa", "BB", "MSG_REGION", "TAG", "TAGSX", "x" * 20, "é", "日本", "TIMER_",
                        "TIMER_DELIVER_MS", "TIMER_DELAY_SEC", "TIMER", "TIMERX"]) | \
    st.text(max_size=10)
_value = st.sampled_from(["true", "false", "TRUE", "False", "yes", "TagA", "", "ü", "1",
                          "7F0000010B3C18B4AAC2A9F3E10000"]) | st.text(max_size=12)
_texts = st.lists(st.tuples(_key, _value), max_size=80).map(
    lambda pairs: "\x02".join(f"{k}\x01{v}" for k, v in pairs)) | st.text(max_size=60) | \
    st.sampled_from(["", "\x02", "\x01", "WAIT\x01true", "A\x01\x01\x02B\x01x\x01y\x02"])
_clusters = st.sampled_from(["DefaultCluster", "c", "集群", ""])


def _same(a: tuple, b: tuple) -> None:
    assert a == b
    assert list(a[0]) == list(b[0])  # the map's key order too
    assert type(a[1]) is type(b[1]) is str


def _same_fast(a: tuple, b: tuple) -> None:
    assert a == b
    assert [type(x) for x in a] == [type(x) for x in b]
    assert type(a[0]) is str and type(a[1]) is int and type(a[2]) is bool and type(a[3]) is bool


@settings(max_examples=400, deadline=None)
@given(_texts, _clusters)
@example("TIMER_\x01true", "DefaultCluster")  # a key of the prefix alone
def test_twin_equals_the_rule(text, cluster):
    for _ in range(2):  # the second call comes from the caches
        _same(codec._send_properties(text, cluster), _reference(text, cluster))
        _same_fast(codec._fast_send_properties(text, cluster), _fast_reference(text, cluster))


@settings(max_examples=200, deadline=None)
@given(_texts, _clusters)
def test_module_function_equals_the_rule(text, cluster):
    """Whichever build the module uses (compiled when built, else the twin)."""
    _same_fast(codec.fast_send_properties(text, cluster), _fast_reference(text, cluster))


@pytest.mark.compiled_only
@settings(max_examples=800, deadline=None)
@given(_texts, _clusters)
@example("TIMER_\x01true", "DefaultCluster")
@example("TIMER_DELIVER_MS\x011700000000000\x02TAGS\x01a", "DefaultCluster")
def test_compiled_equals_twin_and_general_path(text, cluster):
    fast = _compiled()
    props, stored, code = codec._send_properties(text, cluster)
    for _ in range(2):  # the second call finds the key order in the table
        got = fast(text, cluster)
        _same_fast(got, codec._fast_send_properties(text, cluster))
        assert got[:2] == (stored, code)
        assert got[2] == MessageExtBrokerInner(properties=props).is_wait_store_msg_ok()
    raw = text.encode("utf-8")  # bytes and memoryviews take the general route
    _same_fast(fast(raw, cluster), codec._fast_send_properties(raw, cluster))
    _same_fast(fast(memoryview(raw), cluster), codec._fast_send_properties(memoryview(raw), cluster))


_EDGES = (
    None, "", "\x02\x02", "TAGS\x01T", "A\x01b\x02A\x01c", "TAGS\x01x\x02TAGS\x01y",
    "WAIT\x01true\x02WAIT\x01false", "CLUSTER\x01mine\x02TAGS\x01T", "TAGS\x01é\x02KEYS\x01k",
    "TAGS\x01T\x02WAIT\x01false\x02KEYS\x01k1 k2", "\x02\x02TAGS\x01\x02x\x01y",
    "DELAY\x013\x02TAGS\x01T", "TRAN_MSG\x01true", "TRAN_MSG\x01false\x02DELAY\x010",
    "\x01x\x02y\x01\x02z", "UNIQ_KEY\x01\x01\x01", "KEYS\x01a\x01b",
    "\x02".join(f"k{i}\x01v{i}" for i in range(64)),
    "\x02".join(f"k{i}\x01v{i}" for i in range(63)) + "\x02WAIT\x01true",
    "\x02".join(f"k{i}\x01v{i}" for i in range(65)),
    "\x02".join(f"k{i}\x01v{i}" for i in range(70)) + "\x02WAIT\x01true",
)


@pytest.mark.compiled_only
def test_compiled_edge_cases():
    fast = _compiled()
    for text in _EDGES:
        for cluster in ("DefaultCluster", "集群", ""):
            for _ in range(2):
                _same_fast(fast(text, cluster), codec._fast_send_properties(text, cluster))
                _same_fast(fast(text, cluster), _fast_reference(text, cluster))


@pytest.mark.compiled_only
def test_compiled_key_order_table_under_churn():
    """More key sequences than the table has slots, revisited: every answer
    still equals the twin's (replaced slots are learnt again, a slot holding
    another sequence, even one with the same key bytes split differently,
    is never taken for this one)."""
    fast = _compiled()
    texts = ["\x02".join(f"k{j}{i}\x01v" for j in range(1 + i % 5)) + "\x02TAGS\x01t"
             for i in range(1000)]
    texts += ["ab\x01v\x02c\x01v", "a\x01v\x02bc\x01v", "abc\x01v", "a\x01v\x02b\x01v\x02c\x01v"]
    for _ in range(2):
        for text in texts:
            _same_fast(fast(text, "C"), codec._fast_send_properties(text, "C"))


@pytest.mark.parametrize(("wait", "expected"), [
    (None, True), ("true", True), ("TRUE", True), ("True", True), ("false", False),
    ("FALSE", False), ("yes", False), ("1", False), ("truex", False),
])
def test_wait_follows_boolean_parse_boolean(wait, expected):
    """isWaitStoreMsgOK of 4.9.8, the same on both paths and in both builds."""
    text = "TAGS\x01T" + ("" if wait is None else f"\x02WAIT\x01{wait}")
    props = codec._send_properties(text, "C")[0]
    assert wait_store_msg_ok(wait) is expected
    assert MessageExtBrokerInner(properties=props).is_wait_store_msg_ok() is expected
    assert codec._fast_send_properties(text, "C")[2] is expected
    assert codec.fast_send_properties(text, "C")[2] is expected


def test_typical_client_properties_golden():
    """What the C++/Java clients send for a tagged message with a key."""
    text = "UNIQ_KEY\x017F0000010B3C18B4AAC2A9F3E10000\x02WAIT\x01true\x02TAGS\x01TagA\x02KEYS\x01k1"
    props, stored, code = codec.send_properties(text, "DefaultCluster")
    assert stored == ("KEYS\x01k1\x02UNIQ_KEY\x017F0000010B3C18B4AAC2A9F3E10000\x02"
                      "CLUSTER\x01DefaultCluster\x02TAGS\x01TagA")
    assert props["WAIT"] == "true" and list(props)[-1] == "WAIT"
    assert code == mc.tags_string_to_code("TagA")
    assert codec.fast_send_properties(text, "DefaultCluster") == (
        stored, code, True, False, "k1", "7F0000010B3C18B4AAC2A9F3E10000")
