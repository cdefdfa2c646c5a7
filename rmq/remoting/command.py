"""RemotingCommand: one request or response of the RocketMQ remoting protocol.

Mirrors ``org.apache.rocketmq.remoting.protocol.RemotingCommand``.  The byte
layout lives in ``rmq.remoting.codec`` (compiled twin in
``rmq._fast.remoting_codec``); this module holds the object and the rules
around it: opaque numbering, the RESPONSE/ONEWAY flag bits, the version every
rmq command carries (409, MQVersion V4_9_8) and typed custom headers.
"""

from __future__ import annotations

import itertools
from enum import IntEnum
from typing import TypeVar

from rmq.common.codes import CURRENT_VERSION, LanguageCode
from rmq.common.protocol.header import CommandHeader
from rmq.remoting import codec

H = TypeVar("H", bound=CommandHeader)

RPC_RESPONSE = 1  # flag bit 0
RPC_ONEWAY = 2  # flag bit 1

# the request ids' counter (``next_opaque``; the DLedger leader's compiled
# push round draws from it too)
OPAQUES = itertools.count(1)


class SerializeType(IntEnum):
    """Header serialization, the top byte of the header-length word."""

    JSON = 0
    ROCKETMQ = 1


def next_opaque() -> int:
    """Process-wide request id, always a non-negative int32 (Java wraps to
    negative; the C++ client masks the sign bit, so staying positive is safe)."""
    return next(OPAQUES) & 0x7FFFFFFF


def _ext(header: CommandHeader | dict | None) -> dict[str, str] | None:
    if header is None:
        return None
    if isinstance(header, CommandHeader):
        return header.to_ext_fields()
    return {k: v if type(v) is str else codec._stringify(v)
            for k, v in header.items() if v is not None}


class RemotingCommand:
    """A request or response; ``body`` may be bytes, a memoryview or a list of
    memoryviews (zero-copy responses written with ``writelines``)."""

    __slots__ = ("code", "language", "version", "opaque", "flag", "remark", "ext_fields",
                 "body", "serialize_type")

    def __init__(self, code: int = 0, language: int = LanguageCode.JAVA,
                 version: int = CURRENT_VERSION, opaque: int = 0, flag: int = 0,
                 remark: str | None = None, ext_fields: dict[str, str] | None = None,
                 body=None, serialize_type: int = SerializeType.JSON) -> None:
        self.code = code
        self.language = language
        self.version = version
        self.opaque = opaque
        self.flag = flag
        self.remark = remark
        self.ext_fields = ext_fields
        self.body = body
        self.serialize_type = serialize_type

    @classmethod
    def create_request(cls, code: int, header: CommandHeader | dict[str, str] | None = None,
                       body: bytes | None = None) -> RemotingCommand:
        """A request with a fresh opaque."""
        return cls(code, 0, CURRENT_VERSION, next_opaque(), 0, None, _ext(header), body, 0)

    @classmethod
    def create_response(cls, code: int, remark: str | None = None,
                        header: CommandHeader | dict | None = None,
                        body=None) -> RemotingCommand:
        """A response; the dispatcher stamps the request's opaque, the RESPONSE
        flag and the request's serialize type when the processor returns it."""
        return cls(code, 0, CURRENT_VERSION, 0, RPC_RESPONSE, remark, _ext(header), body, 0)

    def is_response(self) -> bool:
        return bool(self.flag & RPC_RESPONSE)

    def is_oneway(self) -> bool:
        return bool(self.flag & RPC_ONEWAY)

    def mark_oneway(self) -> None:
        self.flag |= RPC_ONEWAY

    def mark_response(self) -> None:
        self.flag |= RPC_RESPONSE

    def decode_header(self, cls: type[H]) -> H:
        """The typed custom header; RemotingCommandError for a missing required field."""
        return cls.from_ext_fields(self.ext_fields)

    def body_length(self) -> int:
        body = self.body
        if body is None:
            return 0
        if type(body) is list:
            return sum(len(b) for b in body)
        return len(body) if type(body) is bytes else memoryview(body).nbytes

    def encode_header(self) -> bytes:
        """Length prefix, header-length word and header (the body follows)."""
        return codec.encode(self.code, self.language, self.version, self.opaque, self.flag,
                            self.remark, self.ext_fields, self.serialize_type,
                            self.body_length())

    def encode(self) -> bytes:
        """The whole frame including the 4-byte length."""
        head = self.encode_header()
        body = self.body
        if not body:
            return head
        if type(body) is list:
            return b"".join([head, *body])
        return head + bytes(body)

    @staticmethod
    def decode(frame: bytes | memoryview) -> RemotingCommand:
        """Decode one frame (the bytes after the length prefix); the body is copied."""
        code, language, version, opaque, flag, remark, ext, stype, off = codec.decode(frame)
        body = bytes(frame[off:]) if len(frame) > off else None
        return RemotingCommand(code, language, version, opaque, flag, remark, ext, body, stype)

    def __repr__(self) -> str:
        return (f"RemotingCommand(code={self.code}, language={self.language}, "
                f"version={self.version}, opaque={self.opaque}, flag={self.flag}, "
                f"remark={self.remark!r}, ext_fields={self.ext_fields!r}, "
                f"serialize_type={self.serialize_type}, body_len={self.body_length()})")
