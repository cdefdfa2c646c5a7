"""TopicConfig, TopicConfigSerializeWrapper and the REGISTER_BROKER body.

Mirrors ``TopicConfig``, ``TopicConfigSerializeWrapper`` and
``RegisterBrokerBody`` of RocketMQ 4.9.8.

TopicConfig JSON (fastjson, alphabetical; ``attributes`` is 5.x's)::

    {"attributes":{},"order":false,"perm":6,"readQueueNums":4,"topicFilterType":"SINGLE_TAG",
     "topicName":"TopicTest","topicSysFlag":0,"writeQueueNums":4}

RegisterBrokerBody, plain (``compressed=false``, what 4.9.8 brokers send)::

    {"filterServerList":[...],"topicConfigSerializeWrapper":
        {"dataVersion":{...},"topicConfigTable":{"<topic>":TopicConfig,...}}}

RegisterBrokerBody, compressed (``compressed=true``): one zlib stream (deflate
level 9, RFC 1950 wrapper) of, all integers big-endian int32::

    n1 | n1 bytes DataVersion JSON
    count
    count x ( n | n bytes "topicName readQueueNums writeQueueNums perm topicFilterType" )
    n2 | n2 bytes filterServerList JSON array

``order`` and ``topicSysFlag`` are not carried by the compressed form (0/false).
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field
from typing import Any

from rmq.common import fastjson
from rmq.common.data_version import DataVersion
from rmq.common.message import PERM_READ, PERM_WRITE, perm_to_string

SINGLE_TAG = "SINGLE_TAG"
MULTI_TAG = "MULTI_TAG"
TOPIC_FILTER_TYPES = (SINGLE_TAG, MULTI_TAG)  # ordinal order
DEFAULT_QUEUE_NUMS = 16

# A register body of 10,000 topics inflates to well under 1 MiB; anything past
# this is refused rather than inflated (a zip bomb must not exhaust memory).
MAX_INFLATED_REGISTER_BODY = 64 * 1024 * 1024

_INT = struct.Struct(">i")


class RegisterBodyError(ValueError):
    """A REGISTER_BROKER body (or topic config JSON) that cannot be decoded."""


def _int_prop(obj: dict, name: str, default: int) -> int:
    value = obj.get(name)
    if value is None:
        return default
    if isinstance(value, bool):
        raise RegisterBodyError(f"{name} is not a number: {value!r}")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise RegisterBodyError(f"{name} is not a number: {value!r}") from None


def _bool_prop(obj: dict, name: str) -> bool:
    value = obj.get(name)
    if isinstance(value, str):
        return value.lower() == "true"
    return bool(value) if value is not None else False


def _attributes(value: Any) -> dict[str, str]:
    """5.x ``attributes`` (a string map; absent in 4.9.8 files)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise RegisterBodyError(f"attributes is not a JSON object: {value!r}")
    return {str(k): str(v) for k, v in value.items()}


def _filter_type(value: Any) -> str:
    if value is None:
        return SINGLE_TAG
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2:
        return TOPIC_FILTER_TYPES[value]
    if value in TOPIC_FILTER_TYPES:
        return value
    raise RegisterBodyError(f"unknown topicFilterType {value!r}")


@dataclass(slots=True)
class TopicConfig:
    topicName: str | None = None
    readQueueNums: int = DEFAULT_QUEUE_NUMS
    writeQueueNums: int = DEFAULT_QUEUE_NUMS
    perm: int = PERM_READ | PERM_WRITE
    topicFilterType: str = SINGLE_TAG
    topicSysFlag: int = 0
    order: bool = False
    attributes: dict[str, str] = field(default_factory=dict)  # 5.x topic attributes

    def __str__(self) -> str:
        """Java's ``TopicConfig.toString``: remarks quote it (an illegal queue id)."""
        return (f"TopicConfig [topicName={self.topicName}, readQueueNums={self.readQueueNums}, "
                f"writeQueueNums={self.writeQueueNums}, perm={perm_to_string(self.perm)}, "
                f"topicFilterType={self.topicFilterType}, topicSysFlag={self.topicSysFlag}, "
                f"order={'true' if self.order else 'false'}]")

    def to_json_obj(self) -> dict[str, Any]:
        return {
            "attributes": dict(self.attributes),
            "order": self.order,
            "perm": self.perm,
            "readQueueNums": self.readQueueNums,
            "topicFilterType": self.topicFilterType,
            "topicName": self.topicName,
            "topicSysFlag": self.topicSysFlag,
            "writeQueueNums": self.writeQueueNums,
        }

    @classmethod
    def from_json_obj(cls, obj: Any) -> TopicConfig:
        if not isinstance(obj, dict):
            raise RegisterBodyError("topic config is not a JSON object")
        name = obj.get("topicName")
        if name is not None and not isinstance(name, str):
            raise RegisterBodyError(f"topicName is not a string: {name!r}")
        return cls(
            topicName=name,
            readQueueNums=_int_prop(obj, "readQueueNums", DEFAULT_QUEUE_NUMS),
            writeQueueNums=_int_prop(obj, "writeQueueNums", DEFAULT_QUEUE_NUMS),
            perm=_int_prop(obj, "perm", PERM_READ | PERM_WRITE),
            topicFilterType=_filter_type(obj.get("topicFilterType")),
            topicSysFlag=_int_prop(obj, "topicSysFlag", 0),
            order=_bool_prop(obj, "order"),
            attributes=_attributes(obj.get("attributes")),
        )

    def encode_line(self) -> str:
        """The compressed-register text form (``TopicConfig.encode``)."""
        return (f"{self.topicName} {self.readQueueNums} {self.writeQueueNums} "
                f"{self.perm} {self.topicFilterType}")

    @classmethod
    def decode_line(cls, line: str) -> TopicConfig:
        parts = line.split(" ")
        while parts and parts[-1] == "":  # Java's split drops trailing empties
            parts.pop()
        if len(parts) != 5:
            raise RegisterBodyError(f"bad topic config line {line!r}")
        try:
            read, write, perm = int(parts[1]), int(parts[2]), int(parts[3])
        except ValueError:
            raise RegisterBodyError(f"bad topic config line {line!r}") from None
        if parts[4] not in TOPIC_FILTER_TYPES:
            raise RegisterBodyError(f"bad topic filter type in {line!r}")
        return cls(parts[0], read, write, perm, parts[4])


@dataclass(slots=True)
class TopicConfigSerializeWrapper:
    topicConfigTable: dict[str, TopicConfig] = field(default_factory=dict)
    dataVersion: DataVersion = field(default_factory=DataVersion)

    def to_json_obj(self) -> dict[str, Any]:
        return {
            "dataVersion": self.dataVersion.to_json_obj(),
            "topicConfigTable": {k: v.to_json_obj() for k, v in self.topicConfigTable.items()},
        }

    @classmethod
    def from_json_obj(cls, obj: Any) -> TopicConfigSerializeWrapper:
        if not isinstance(obj, dict):
            raise RegisterBodyError("topic config wrapper is not a JSON object")
        try:
            dv = DataVersion.from_json_obj(obj.get("dataVersion"))
        except ValueError as exc:
            raise RegisterBodyError(str(exc)) from None
        table_obj = obj.get("topicConfigTable")
        if table_obj is None:
            table_obj = {}
        if not isinstance(table_obj, dict):
            raise RegisterBodyError("topicConfigTable is not a JSON object")
        table: dict[str, TopicConfig] = {}
        for key, value in table_obj.items():
            tc = TopicConfig.from_json_obj(value)
            if tc.topicName is None:
                tc.topicName = key
            table[key] = tc
        return cls(table, dv)

    def encode(self) -> bytes:
        return fastjson.dumps(self.to_json_obj())

    @classmethod
    def decode(cls, data: bytes | memoryview) -> TopicConfigSerializeWrapper:
        return cls.from_json_obj(_parse(data))


def _parse(data: bytes | memoryview) -> Any:
    try:
        return fastjson.loads(data)
    except fastjson.FastjsonError as exc:
        raise RegisterBodyError(f"bad JSON: {exc}") from None


@dataclass(slots=True)
class RegisterBrokerBody:
    topicConfigSerializeWrapper: TopicConfigSerializeWrapper = field(
        default_factory=TopicConfigSerializeWrapper)
    filterServerList: list[str] = field(default_factory=list)

    def to_json_obj(self) -> dict[str, Any]:
        return {
            "filterServerList": list(self.filterServerList),
            "topicConfigSerializeWrapper": self.topicConfigSerializeWrapper.to_json_obj(),
        }

    def encode(self, compress: bool = False) -> bytes:
        if not compress:
            return fastjson.dumps(self.to_json_obj())
        wrapper = self.topicConfigSerializeWrapper
        parts: list[bytes] = []
        _put_chunk(parts, wrapper.dataVersion.encode())
        parts.append(_INT.pack(len(wrapper.topicConfigTable)))
        for tc in wrapper.topicConfigTable.values():
            _put_chunk(parts, tc.encode_line().encode("utf-8"))
        _put_chunk(parts, fastjson.dumps(list(self.filterServerList)))
        return zlib.compress(b"".join(parts), 9)

    @classmethod
    def decode(cls, data: bytes | memoryview, compressed: bool) -> RegisterBrokerBody:
        """Decode either form; any defect raises RegisterBodyError."""
        if compressed:
            return cls._decode_compressed(data)
        obj = _parse(data)
        if not isinstance(obj, dict):
            raise RegisterBodyError("register body is not a JSON object")
        wrapper = TopicConfigSerializeWrapper.from_json_obj(
            obj.get("topicConfigSerializeWrapper") or {})
        return cls(wrapper, _filter_list(obj.get("filterServerList")))

    @classmethod
    def _decode_compressed(cls, data: bytes | memoryview) -> RegisterBrokerBody:
        inflater = zlib.decompressobj()
        try:
            raw = inflater.decompress(bytes(data), MAX_INFLATED_REGISTER_BODY)
        except zlib.error as exc:
            raise RegisterBodyError(f"bad compressed body: {exc}") from None
        if inflater.unconsumed_tail:
            raise RegisterBodyError("compressed body inflates past the size limit")
        reader = _Reader(raw)
        try:
            dv = DataVersion.decode(reader.chunk())
        except (ValueError, fastjson.FastjsonError) as exc:
            raise RegisterBodyError(f"bad data version: {exc}") from None
        count = reader.int()
        if count < 0:
            raise RegisterBodyError(f"negative topic count {count}")
        table: dict[str, TopicConfig] = {}
        for _ in range(count):
            try:
                line = reader.chunk().decode("utf-8")
            except UnicodeDecodeError:
                raise RegisterBodyError("topic config line is not UTF-8") from None
            tc = TopicConfig.decode_line(line)
            table[tc.topicName] = tc  # type: ignore[index]
        filters = _filter_list(_parse(reader.chunk()))
        return cls(TopicConfigSerializeWrapper(table, dv), filters)


def _filter_list(value: Any) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise RegisterBodyError("filterServerList is not a list of strings")
    return value


def _put_chunk(parts: list[bytes], chunk: bytes) -> None:
    parts.append(_INT.pack(len(chunk)))
    parts.append(chunk)


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0

    def int(self) -> int:
        if self.pos + 4 > len(self.buf):
            raise RegisterBodyError("compressed body ends early")
        (value,) = _INT.unpack_from(self.buf, self.pos)
        self.pos += 4
        return value

    def chunk(self) -> bytes:
        n = self.int()
        if n < 0 or self.pos + n > len(self.buf):
            raise RegisterBodyError("compressed body ends early")
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return out
