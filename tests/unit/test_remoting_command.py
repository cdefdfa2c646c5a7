"""RemotingCommand and the header codecs against the bytes 4.9.8 puts on the wire."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from rmq.common.protocol.header import CommandHeader, field_required
from rmq.remoting import RemotingCommand, SerializeType
from rmq.remoting.exceptions import RemotingCommandError

# PROTOCOL.md 1.3: GET_ROUTEINFO_BY_TOPIC from a 4.9.8 Java client, opaque 1.
JAVA_ROUTE_REQUEST = (
    bytes.fromhex("0000008700000083")
    + b'{"code":105,"extFields":{"topic":"TopicTest"},"flag":0,"language":"JAVA",'
    b'"opaque":1,"serializeTypeCurrentRPC":"JSON","version":409}'
)
# PROTOCOL.md 1.4: the same request in ROCKETMQ encoding.
JAVA_ROUTE_REQUEST_RMQ = bytes.fromhex(
    "0000002d01000029" "0069" "00" "0199" "00000001" "00000000" "00000000" "00000014"
    "0005") + b"topic" + bytes.fromhex("00000009") + b"TopicTest"


def route_request(stype: int) -> RemotingCommand:
    cmd = RemotingCommand.create_request(105, {"topic": "TopicTest"})
    cmd.opaque = 1
    cmd.serialize_type = stype
    return cmd


def test_json_request_matches_java_bytes():
    assert route_request(SerializeType.JSON).encode() == JAVA_ROUTE_REQUEST


def test_rocketmq_request_matches_java_bytes():
    assert route_request(SerializeType.ROCKETMQ).encode() == JAVA_ROUTE_REQUEST_RMQ


@pytest.mark.parametrize("frame", [JAVA_ROUTE_REQUEST, JAVA_ROUTE_REQUEST_RMQ])
def test_decode_java_frames(frame):
    cmd = RemotingCommand.decode(frame[4:])
    assert (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag) == (105, 0, 409, 1, 0)
    assert cmd.ext_fields == {"topic": "TopicTest"}
    assert cmd.body is None and cmd.remark is None


def test_error_response_json_matches_java():
    resp = RemotingCommand.create_response(
        17, "No topic route info in name server for the topic: TopicTest")
    resp.opaque = 1
    assert resp.encode()[8:] == (
        b'{"code":17,"flag":1,"language":"JAVA","opaque":1,"remark":"No topic route info in '
        b'name server for the topic: TopicTest","serializeTypeCurrentRPC":"JSON","version":409}')


def test_cpp_style_json_is_accepted():
    header = (b'{"code":11,"extFields":{"queueId":3,"maxMsgNums":32,"flag":true,"x":null,'
              b'"topic":"T"},"flag":0,"language":"CPP","opaque":0,"remark":"","version":63}\n')
    frame = len(header).to_bytes(4, "big") + header + b"body"
    cmd = RemotingCommand.decode(frame)
    assert cmd.ext_fields == {"queueId": "3", "maxMsgNums": "32", "flag": "true", "topic": "T"}
    assert (cmd.code, cmd.language, cmd.version, cmd.remark, cmd.body) == (11, 1, 63, "", b"body")


def test_language_as_number_and_unknown_name():
    for lang, expect in ((b"9", 9), (b'"KLINGON"', 7)):
        header = b'{"code":1,"language":' + lang + b',"opaque":5,"flag":0,"version":1}'
        cmd = RemotingCommand.decode(len(header).to_bytes(4, "big") + header)
        assert cmd.language == expect


def test_body_and_control_characters_round_trip():
    cmd = RemotingCommand.create_request(310, {"i": "UNIQ_KEY\x01ABC\x02TAGS\x01TagA"}, b"Hello")
    raw = cmd.encode()
    assert b"\\u0001" in raw
    back = RemotingCommand.decode(raw[4:])
    assert back.ext_fields == cmd.ext_fields and back.body == b"Hello"


@dataclass(slots=True)
class SampleHeader(CommandHeader):
    topic: str = field_required()
    queueId: int = field_required()
    unitMode: bool = False
    offset: int | None = None
    ratio: float | None = None


def test_header_round_trip_and_java_rules():
    h = SampleHeader(topic="T", queueId=3, unitMode=True, offset=None, ratio=0.5)
    assert h.to_ext_fields() == {"topic": "T", "queueId": "3", "unitMode": "true", "ratio": "0.5"}
    back = SampleHeader.from_ext_fields({"topic": "T", "queueId": "7", "unitMode": "TRUE",
                                         "offset": "abc", "bname": "ignored"})
    assert (back.topic, back.queueId, back.unitMode, back.offset) == ("T", 7, True, None)
    assert SampleHeader.from_ext_fields({"topic": "T", "queueId": "1",
                                         "unitMode": "1"}).unitMode is False


def test_missing_required_field_names_it():
    cmd = RemotingCommand.create_request(1, {"topic": "T"})
    with pytest.raises(RemotingCommandError, match="the custom field queueId is null"):
        cmd.decode_header(SampleHeader)


def test_required_field_that_does_not_parse_names_it():
    """Java would leave it null and fail later with an NPE: one clear error now."""
    cmd = RemotingCommand.create_request(1, {"topic": "T", "queueId": "x1"})
    with pytest.raises(RemotingCommandError, match="the custom field queueId is not a valid value: 'x1'"):
        cmd.decode_header(SampleHeader)


def test_request_opaques_are_fresh_and_response_flags():
    a, b = RemotingCommand.create_request(1), RemotingCommand.create_request(1)
    assert b.opaque > a.opaque >= 0
    r = RemotingCommand.create_response(0)
    assert r.is_response() and not r.is_oneway() and r.version == 409
    a.mark_oneway()
    assert a.is_oneway() and not a.is_response()


@pytest.mark.parametrize("frame", [
    b"", b"\x00\x00", b"\x00\x00\x00\x10{}", b"\x02\x00\x00\x00", b"\x00\x00\x00\x02[]",
    b"\x00\x00\x00\x04nope", b"\x01\x00\x00\x03abc",
    b"\x01\x00\x00\x15" + bytes(13) + b"\x7f\xff\xff\xff" + bytes(4),
])
def test_garbage_frames_raise_command_error(frame):
    with pytest.raises(RemotingCommandError):
        RemotingCommand.decode(frame)
