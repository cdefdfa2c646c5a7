"""Plain ACL's pure pieces: request signatures (PROTOCOL.md 6.1, verified
against the Java hook) and the remote-address patterns of 4.9.8."""

from __future__ import annotations

import pytest

from rmq.acl import AclClientRPCHook, AclException, SessionCredentials
from rmq.acl.remote_address import expand_ip, peer_ip, remote_address_strategy
from rmq.acl.signer import cal_signature, java_sorted
from rmq.common.codes import RequestCode
from rmq.remoting import RemotingCommand


def test_signatures_match_the_java_hook_worked_examples():
    assert cal_signature({"AccessKey": "RocketMQ", "topic": "TopicTest"}, None,
                         "12345678") == "0jiwhsaYp5ObE5GObbZH1I8/FT4="
    assert cal_signature({"AccessKey": "RocketMQ"}, b'{"clientID":"x"}',
                         "12345678") == "SC9kzFTBVLXXAqxyRji08hY5LG4="


def test_body_in_parts_signs_like_one_body_and_signature_field_is_not_signed():
    one = cal_signature({"AccessKey": "ak", "a": "1"}, b"hello world", "secret1")
    parts = cal_signature({"AccessKey": "ak", "a": "1", "Signature": "x"},
                          [memoryview(b"hello "), memoryview(b"world")], "secret1")
    assert one == parts


def test_keys_sort_as_java_strings_utf16_code_units():
    # U+FF5E sorts after U+1F600 by code point but before it by UTF-16 unit
    assert java_sorted(["b", "\U0001F600", "\uFF5E", "A"]) == ["A", "b", "\U0001F600", "\uFF5E"]
    assert java_sorted(["topic", "AccessKey", "_UNIQUE_KEY_QUERY"]) == [
        "AccessKey", "_UNIQUE_KEY_QUERY", "topic"]


def test_client_hook_adds_access_key_token_and_signature_over_the_wire_values():
    req = RemotingCommand.create_request(RequestCode.QUERY_MESSAGE,
                                         {"topic": "T", "maxNum": 32, "flag": True})
    req.ext_fields["_UNIQUE_KEY_QUERY"] = "true"
    shared = req.ext_fields
    AclClientRPCHook(SessionCredentials("RocketMQ", "12345678", "tok")).do_before_request(
        None, req)
    ext = req.ext_fields
    assert ext is not shared and "Signature" not in shared  # the caller's map is untouched
    assert ext["AccessKey"] == "RocketMQ" and ext["SecurityToken"] == "tok"
    assert ext["maxNum"] == "32" and ext["flag"] == "true"
    # _UNIQUE_KEY_QUERY is left out, as the 4.9.8 broker leaves it out
    text = {k: v for k, v in ext.items() if k != "_UNIQUE_KEY_QUERY"}
    assert ext["Signature"] == cal_signature(text, None, "12345678")


@pytest.mark.parametrize("pattern,matching,other", [
    ("*", ["1.2.3.4", "::1"], []),
    ("*.*.*.*", ["10.0.0.1"], []),
    ("192.168.0.1", ["192.168.0.1"], ["192.168.0.2", "::1"]),
    ("192.168.0.{1,2}", ["192.168.0.1", "192.168.0.2"], ["192.168.0.3", "192.168.1.1"]),
    ("192.168.0.1,10.0.0.2", ["192.168.0.1", "10.0.0.2"], ["10.0.0.1"]),
    ("192.168.1.1-100", ["192.168.1.1", "192.168.1.100"], ["192.168.1.101", "192.168.2.50"]),
    ("192.168.1.*", ["192.168.1.0", "192.168.1.255"], ["192.168.2.1"]),
    ("192.168.*.*", ["192.168.77.3"], ["192.169.0.1"]),
    ("10.*.*.*", ["10.9.8.7"], ["11.1.1.1"]),
    ("10.1-9.*.*", ["10.5.0.1"], ["10.10.0.1"]),
    ("::1", ["::1", "0:0:0:0:0:0:0:1"], ["::2", "127.0.0.1"]),
    ("fe80::{a,b}", ["fe80::a", "FE80:0:0:0:0:0:0:B"], ["fe80::c"]),
    ("1050:0000:0000:0000:0005:0600:300c:*", ["1050::5:600:300c:1"], ["1050::5:600:300d:1"]),
    ("1050::0005:0600:300c:1-ff", ["1050::5:600:300c:ff"], ["1050::5:600:300c:100"]),
    ("", [], ["1.1.1.1"]),
    (None, [], ["1.1.1.1"]),
])
def test_address_patterns_match_as_4_9_8(pattern, matching, other):
    strategy = remote_address_strategy(pattern)
    assert [a for a in matching if not strategy.match(a)] == []
    assert [a for a in other if strategy.match(a)] == []


@pytest.mark.parametrize("pattern,message", [
    ("10.*", "Netaddress examine scope Exception netaddress is 10.*"),
    ("abc", "Netaddress examine Exception netaddress is abc"),
    ("1.2.3", "Netaddress examine Exception netaddress is 1.2.3"),
    ("192.168.1.300-400", "start is 300 , end is 400"),
    ("192.168.0.-1", "RangeRemoteAddressStrategy netaddress examine scope Exception value -1"),
    ("192.168.{1,2}", "MultipleRemoteAddressStrategy has got a/some wrong format IP(s)"),
    ("192.168.0.1,bad", "Netaddress examine Exception netaddress is bad"),
    ("1050::5:*:1", "Netaddress examine scope Exception netaddress is 1050::5:*:1"),
])
def test_bad_patterns_are_refused_with_4_9_8_messages(pattern, message):
    with pytest.raises(AclException) as info:
        remote_address_strategy(pattern)
    assert message in str(info.value)


def test_expand_ip_and_peer_ip():
    assert expand_ip("::1", 8) == "0000:0000:0000:0000:0000:0000:0000:0001"
    assert expand_ip("fe80::a:b", 8) == "FE80:0000:0000:0000:0000:0000:000A:000B"
    assert expand_ip("10.0.0.1", 8) == "10.0.0.1"
    assert peer_ip("127.0.0.1:5555") == "127.0.0.1"
    assert peer_ip("::1:5555") == "::1"
    assert peer_ip("[::1]:5555") == "::1"
    assert peer_ip("::ffff:10.1.2.3:80") == "10.1.2.3"  # what Java sees for a mapped address
    assert peer_ip(None) is None
