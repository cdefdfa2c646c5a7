"""``send_properties`` (what a single send stores: the map plus CLUSTER, the
stored string in HashMap order without WAIT, the tagsCode): the compiled
function and its twin agree on everything, key order of the map included,
and the twin equals the plain rule written out."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmq._fast import compiled_or_none
from rmq.common import message as mc
from rmq.store import message_codec as codec

_fast = compiled_or_none("send_fast")


def _compiled():
    assert _fast is not None, "rmq._fast.send_fast is not built (make ext)"
    _fast.bind(codec._hashmap_order)
    return _fast.send_properties


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


_key = st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "WAIT", "CLUSTER", "DELAY", "TRAN_MSG", "a",
                        "Aa", "BB", "MSG_REGION", "x" * 20, "é", "日本"]) | st.text(max_size=10)
_value = st.sampled_from(["true", "false", "TagA", "", "7F0000010B3C18B4AAC2A9F3E10000", "ü"]) | \
    st.text(max_size=12)
_texts = st.lists(st.tuples(_key, _value), max_size=80).map(
    lambda pairs: "\x02".join(f"{k}\x01{v}" for k, v in pairs)) | st.text(max_size=60) | \
    st.sampled_from(["", "\x02", "\x01", "WAIT\x01true", "A\x01\x01\x02B\x01x\x01y\x02"])
_clusters = st.sampled_from(["DefaultCluster", "c", "集群", ""])


def _same(a: tuple, b: tuple) -> None:
    assert a == b
    assert list(a[0]) == list(b[0])  # the map's key order too
    assert type(a[1]) is type(b[1]) is str


@settings(max_examples=400, deadline=None)
@given(_texts, _clusters)
def test_twin_equals_the_rule(text, cluster):
    for _ in range(2):  # the second call comes from the caches
        _same(codec._send_properties(text, cluster), _reference(text, cluster))


@pytest.mark.compiled_only
@settings(max_examples=600, deadline=None)
@given(_texts, _clusters)
def test_compiled_equals_twin(text, cluster):
    fast = _compiled()
    for _ in range(2):
        _same(fast(text, cluster), codec._send_properties(text, cluster))
    raw = text.encode("utf-8")  # bytes and memoryviews take the general path
    _same(fast(raw, cluster), codec._send_properties(raw, cluster))
    _same(fast(memoryview(raw), cluster), codec._send_properties(memoryview(raw), cluster))


@pytest.mark.compiled_only
def test_compiled_edge_cases():
    fast = _compiled()
    many = "\x02".join(f"k{i}\x01v{i}" for i in range(70)) + "\x02WAIT\x01true"
    for text in (None, "", many, "A\x01b\x02A\x01c", "CLUSTER\x01mine\x02TAGS\x01T",
                 "TAGS\x01T\x02WAIT\x01false\x02KEYS\x01k1 k2", "\x02\x02TAGS\x01\x02x\x01y"):
        for cluster in ("DefaultCluster", "集群"):
            _same(fast(text, cluster), codec._send_properties(text, cluster))


def test_typical_client_properties_golden():
    """What the C++/Java clients send for a tagged message with a key."""
    text = "UNIQ_KEY\x017F0000010B3C18B4AAC2A9F3E10000\x02WAIT\x01true\x02TAGS\x01TagA\x02KEYS\x01k1"
    props, stored, code = codec.send_properties(text, "DefaultCluster")
    assert stored == ("KEYS\x01k1\x02UNIQ_KEY\x017F0000010B3C18B4AAC2A9F3E10000\x02"
                      "CLUSTER\x01DefaultCluster\x02TAGS\x01TagA")
    assert props["WAIT"] == "true" and list(props)[-1] == "WAIT"
    assert code == mc.tags_string_to_code("TagA")
