"""rmq.common.java: the Java-compatible helpers give what Java gives."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rmq.common import java
from rmq.common.codes import CURRENT_VERSION, LanguageCode

ascii_text = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=40)


def test_string_hash_is_java_string_hashcode():
    assert java.string_hash("") == 0
    assert java.string_hash("TagA") == 2598919
    assert java.string_hash("hello world") == 1794106052
    assert java.string_hash("polygenelubricants") == -(2**31)
    assert java.string_hash("\U0001F600") == 1772899  # two UTF-16 units


@settings(max_examples=200)
@given(ascii_text)
def test_ascii_update_is_the_string_hash_unsigned(text):
    assert java.signed32(java.ascii_hash_update(0, text.encode())) == java.string_hash(text)


def test_index_key_hash_is_abs_with_min_value_zero():
    assert java.index_key_hash("T#k1") == 2539445
    assert java.index_key_hash("polygenelubricants") == 0  # abs(Integer.MIN_VALUE)
    assert java.index_key_hash("hello world") == 1794106052
    assert all(java.index_key_hash(k) >= 0 for k in ("a", "TopicTest#KEY1", "zzzzzzzzzz"))


@settings(max_examples=200)
@given(ascii_text, ascii_text)
def test_index_key_hash_from_the_topic_hash(topic, key):
    topic_hash = java.ascii_hash_update(0, topic.encode())
    assert java.index_key_hash_ascii(topic_hash, key.encode()) == java.index_key_hash(f"{topic}#{key}")


def test_object_hash_of_selector_arguments():
    assert java.object_hash("TagA") == 2598919  # String
    assert java.object_hash(5) == 5 and java.object_hash(-7) == -7  # Integer
    assert java.object_hash(2**32) == 1  # Long: (int)(v ^ (v >>> 32))
    assert java.object_hash(-(2**40)) == -256  # 0xFFFFFF00FFFFFF00 as an int
    assert java.object_hash(True) == 1231 and java.object_hash(False) == 1237  # Boolean


def test_hashmap_order_follows_buckets_then_insertion():
    assert java.hashmap_order(("c", "a", "b")) == ("a", "b", "c")
    assert java.hashmap_order(("BB", "Aa")) == ("BB", "Aa")  # one bucket: insertion order
    assert java.hashmap_order(("Aa", "BB")) == ("Aa", "BB")
    assert java.hashmap_order(("%RETRY%groupA", "topicA")) == ("topicA", "%RETRY%groupA")
    assert java.hashmap_order(("b", None, "a")) == ("a", "b")


def test_hashmap_order_grows_the_table_past_three_quarters():
    keys = tuple(f"k{i}" for i in range(13))  # 13 > 12: 32 buckets
    got = java.hashmap_order(keys)
    assert sorted(got) == sorted(keys)
    assert [java.hashmap_hash(k) & 31 for k in got] == sorted(java.hashmap_hash(k) & 31 for k in keys)
    assert java.hashmap_hash("TAGS") == (java.string_hash("TAGS") ^ (java.string_hash("TAGS") >> 16))


def test_language_names_are_language_code():
    assert java.LANGUAGE_NAMES == tuple(c.name for c in LanguageCode)
    assert java.language_name(0) == "JAVA" and java.language_name(12) == "RUST"
    assert java.language_name(3) == "PYTHON"
    assert java.language_name(13) == "OTHER" and java.language_name(-1) == "OTHER"
    assert java.LANGUAGE_OTHER == 7 and type(java.LANGUAGE_OTHER) is int


def test_version_names_are_mqversion():
    assert java.version_desc(CURRENT_VERSION) == java.CURRENT_VERSION_DESC == "V4_9_8"
    assert java.version_desc(393) == "V4_9_0"
    assert java.version_desc(500) == "VERSION_500"
    assert java.version_desc(612) == "HIGHER_VERSION"


def test_system_groups_as_each_java_class_counts_them():
    assert java.is_sys_consumer_group("CID_RMQ_SYS_TRANS")
    assert not java.is_sys_consumer_group("TOOLS_CONSUMER")
    assert java.is_builtin_group("TOOLS_CONSUMER") and java.is_builtin_group("CID_RMQ_SYS_X")
    assert not java.is_builtin_group("DEFAULT_CONSUMER")
    assert java.is_admin_system_group("DEFAULT_CONSUMER") and java.is_admin_system_group("__MONITOR_CONSUMER")
    assert not java.is_admin_system_group("SCHEDULE_CONSUMER")
    assert java.is_dashboard_system_group("SCHEDULE_CONSUMER")
    assert not java.is_dashboard_system_group("DEFAULT_CONSUMER")
    assert not any(f(g) for g in ("orders", "CID_orders") for f in (
        java.is_sys_consumer_group, java.is_builtin_group, java.is_admin_system_group,
        java.is_dashboard_system_group))
    assert java.BUILTIN_GROUPS == ("TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "SELF_TEST_C_GROUP",
                                   "CID_ONS-HTTP-PROXY", "CID_ONSAPI_PULL", "CID_ONSAPI_PERMISSION",
                                   "CID_ONSAPI_OWNER")
