"""Pure helpers of rmq.common: properties files, property strings, hashes."""

from dataclasses import dataclass

from hypothesis import given
from hypothesis import strategies as st

from rmq.common import message, topics
from rmq.common.properties import (
    apply_properties,
    format_properties,
    parse_properties,
    unknown_keys,
)


def test_properties_parse_like_java():
    text = "a=1\n# comment\n! other\nb : x y \nc\\\n   d=2\nlistenPort=10911 \nu=\\u0041\n"
    assert parse_properties(text) == {
        "a": "1", "b": "x y ", "cd": "2", "listenPort": "10911 ", "u": "A",
    }


@given(st.dictionaries(st.text(min_size=1).filter(lambda s: s.strip() == s and "\x00" not in s),
                       st.text()))
def test_properties_round_trip(props):
    assert parse_properties(format_properties(props)) == props


@dataclass
class _Cfg:
    listenPort: int = 8888
    autoCreateTopicEnable: bool = True
    ratio: float = 0.5
    brokerName: str = "b"


def test_apply_properties_java_conversion():
    cfg = _Cfg()
    applied, invalid = apply_properties(cfg, {
        "listenPort": "10911 ", "autoCreateTopicEnable": "yes", "ratio": "0.75",
        "brokerName": "broker-a", "nope": "1",
    })
    assert cfg.listenPort == 8888 and invalid == ["listenPort"]
    assert cfg.autoCreateTopicEnable is False
    assert cfg.ratio == 0.75 and cfg.brokerName == "broker-a"
    assert set(applied) == {"autoCreateTopicEnable", "ratio", "brokerName"}
    assert unknown_keys({"nope": "1", "listenPort": "1"}, cfg) == ["nope"]


def test_java_string_hash_matches_java():
    # values computed by java.lang.String.hashCode
    assert message.java_string_hash("") == 0
    assert message.java_string_hash("TagA") == 2598919
    assert message.java_string_hash("hello world") == 1794106052
    assert message.java_string_hash("\U0001F600") == 1772899
    assert message.tags_string_to_code(None) == 0


def test_topic_validation():
    assert topics.validate_topic("TopicTest") is None
    assert topics.validate_topic("%RETRY%g") is None
    assert topics.validate_topic("bad topic") is not None
    assert topics.validate_topic("x" * 128) is not None
    assert topics.retry_topic("g") == "%RETRY%g" and topics.is_retry_topic("%RETRY%g")
    assert message.perm_to_string(6) == "RW-"
