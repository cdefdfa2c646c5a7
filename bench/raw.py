"""Hand-built RocketMQ request frames and the bare connection that sends them:
what a client must send, nothing more, so a load of them measures the broker
and not the client."""

from __future__ import annotations

import asyncio
import os
import struct
import time


class RawRequests:
    """SEND_MESSAGE_V2 (or SEND_BATCH_MESSAGE) request frames built by hand:
    what a client must send, nothing more, so a load of them measures the
    broker and not the client (no route lookups, no per-message id, header
    or command objects).

    Each queue's frame is encoded once, with a ten-digit opaque, a 13-digit
    bornTimestamp and (single sends) a UNIQ_KEY ending in twelve hex digits;
    every request is a copy of it with those three patched in place, so the
    wire bytes are those of a freshly encoded request.  Every single message
    carries a distinct UNIQ_KEY and WAIT=true like the SDK's; a batch body is
    encoded once and sent again and again, as a load generator does (its
    messages have distinct UNIQ_KEYs within the batch).

    ``stamp`` (single sends): the first 8 bytes of every body are the send's
    ``time.time_ns()``, big-endian (``last_stamp``), so a consumer can tell
    how long each message took from producer to consumer."""

    OPAQUE_BASE = 1_000_000_000  # opaques stay ten digits for 1.1 billion requests
    _TS = 1_700_000_000_000  # placeholder bornTimestamp (13 digits)

    def __init__(self, topic: str, body: bytes, batch: int = 1, queues: int = 8,
                 group: str = "bench_producer", broker_name: str = "",
                 stamp: bool = False, java: bool = False) -> None:
        from rmq.client.codec import encode_batch
        from rmq.client.message import Message

        if batch < 1 or queues < 1:
            raise ValueError(f"raw sends need batch >= 1 and queues >= 1 "
                             f"(got batch={batch}, queues={queues})")
        if stamp and (batch != 1 or len(body) < 8):
            raise ValueError("stamped bodies need single sends of at least 8 bytes")
        self.topic = topic
        self.batch = batch
        self.queues = queues
        self.stamp = stamp
        self.last_stamp = 0
        self.prefix = f"7F000001{os.getpid() & 0xFFFF:04X}{int(time.time()):08X}"
        self.seq = 0
        self.opaque = self.OPAQUE_BASE
        self.java = java
        if java and batch > 1:
            raise ValueError("the Java benchmark Producer sends single messages")
        if java:
            group = "benchmark_producer"
        if batch > 1:
            batch_body = encode_batch([
                Message(topic, body, properties={"UNIQ_KEY": self._uniq(), "WAIT": "true"})
                for _ in range(batch)])
            self._templates = [self._template(q, group, broker_name, batch_body) for q in range(queues)]
        else:
            self._templates = [self._template(q, group, broker_name, body) for q in range(queues)]

    def _uniq(self) -> str:
        self.seq += 1
        return f"{self.prefix}{self.seq:012X}"

    def _template(self, queue_id: int, group: str, broker_name: str, body: bytes) -> tuple:
        """(frame, opaque at, timestamp at, UNIQ_KEY counter at or -1) of a queue."""
        from rmq.client.headers import send_header_v2
        from rmq.common.codes import RequestCode
        from rmq.remoting import RemotingCommand

        single = self.batch == 1
        props = f"WAIT\x01true\x02UNIQ_KEY\x01{self.prefix}{0:012X}\x02" if single else ""
        if self.java:
            props = java_benchmark_properties(f"{self.prefix}{0:012X}")
        code = RequestCode.SEND_MESSAGE_V2 if single else RequestCode.SEND_BATCH_MESSAGE
        ext = send_header_v2(group, self.topic, "TBW102", 4, queue_id, 0, self._TS, 0, props,
                             not single, "" if self.java else broker_name)
        if self.java:
            ext = {k: v for k, v in ext.items() if k in "abcdefghijkm"}  # 4.9.8's V2 letters
        cmd = RemotingCommand(code, 0, 409, self.OPAQUE_BASE, 0, None, ext, body,
                              1 if self.java else 0)
        frame = bytes(cmd.encode_header()) + body
        head = frame[:len(frame) - len(body)]
        uniq_at = head.index(self.prefix.encode()) + len(self.prefix) if single else -1
        # the opaque: ten digits in a JSON header, an int32 at a fixed place in a binary one
        op_at = 13 if self.java else head.index(b'"opaque":%d' % self.OPAQUE_BASE) + 9
        ts_at = head.index(b"%d" % self._TS) if self.java else head.index(b'"%d"' % self._TS) + 1
        return (frame, op_at, ts_at, uniq_at, len(head))

    def frame(self, n: int) -> tuple[int, bytearray]:
        """(opaque, frame) of the ``n``-th request (queue ``n % queues``)."""
        frame, op_at, ts_at, uniq_at, body_at = self._templates[n % self.queues]
        self.opaque = opaque = self.opaque + 1
        out = bytearray(frame)
        if self.java:
            out[op_at:op_at + 4] = opaque.to_bytes(4, "big")
        else:
            out[op_at:op_at + 10] = b"%d" % opaque
        now = time.time_ns()
        out[ts_at:ts_at + 13] = b"%d" % (now // 1_000_000)
        if uniq_at >= 0:
            self.seq += 1
            out[uniq_at:uniq_at + 12] = b"%012X" % self.seq
        if self.stamp:
            self.last_stamp = now
            out[body_at:body_at + 8] = now.to_bytes(8, "big")
        return opaque, out


def java_benchmark_properties(uniq_key: str) -> str:
    """The properties string of a message of 4.9.8's benchmark Producer as its
    client writes it: ``new Message(topic, body)`` sets WAIT=true, the send
    sets UNIQ_KEY; ``messageProperties2String`` walks the HashMap (UNIQ_KEY's
    bucket comes first) and ends every pair with the separator."""
    return f"UNIQ_KEY\x01{uniq_key}\x02WAIT\x01true\x02"


class RawPulls:
    """PULL_MESSAGE request frames built by hand, the pull side of
    ``RawRequests``: the header of each queue is encoded once and every pull
    is that header with its queue offset and opaque filled in.

    The request carries its subscription ("*", sysFlag SUBSCRIPTION as a lite
    pull consumer sends it), so the broker needs no heartbeat of the group;
    ``suspend_ms`` > 0 adds sysFlag SUSPEND and suspendTimeoutMillis, the long
    polling of a push consumer: a pull that finds nothing new is held by the
    broker until a message arrives or the time is up."""

    OPAQUE_BASE = RawRequests.OPAQUE_BASE
    _OFFSET = "QUEUEOFFSET"  # placeholder of the queue offset in the header template

    def __init__(self, topic: str, group: str = "bench_consumer", queues: int = 8,
                 max_nums: int = 32, suspend_ms: int = 0, broker_name: str = "") -> None:
        from rmq.client import headers as h
        from rmq.common.codes import RequestCode
        from rmq.remoting import RemotingCommand

        flag = h.PULL_FLAG_SUBSCRIPTION | (h.PULL_FLAG_SUSPEND if suspend_ms > 0 else 0)
        self.opaque = self.OPAQUE_BASE
        self._formats: list[tuple[bytes, bool]] = []
        for q in range(queues):
            ext = h.pull_header(group, topic, q, 0, max_nums, flag, 0, suspend_ms, "*", 0,
                                "TAG", broker_name)
            ext["queueOffset"] = self._OFFSET
            cmd = RemotingCommand(RequestCode.PULL_MESSAGE, 0, 409, self.OPAQUE_BASE, 0, None,
                                  ext, None, 0)
            head = bytes(cmd.encode_header())
            if head[4] != 0:  # the top byte of the header-length word: JSON
                raise ValueError("pull templates expect a JSON header")
            text = head[8:].replace(b"%", b"%%")
            opaque = b'"opaque":%d' % self.OPAQUE_BASE
            offset_first = text.index(self._OFFSET.encode()) < text.index(opaque)
            text = text.replace(self._OFFSET.encode(), b"%d").replace(opaque, b'"opaque":%d')
            self._formats.append((text, offset_first))

    def frame(self, queue_id: int, offset: int) -> tuple[int, bytes]:
        """(opaque, frame) of a pull of ``queue_id`` from ``offset``."""
        text, offset_first = self._formats[queue_id]
        self.opaque = opaque = self.opaque + 1
        header = text % ((offset, opaque) if offset_first else (opaque, offset))
        n = len(header)
        return opaque, b"".join((_LENGTHS.pack(n + 4, n), header))


_LENGTHS = struct.Struct(">II")  # frame length, header length (serialize type 0: JSON)


class RawConnection(asyncio.Protocol):
    """One TCP connection for ``RawRequests`` frames: the frames written in
    one turn of the loop go out in one write (``write_each``: each at once),
    responses are matched to their requests by opaque.  A lost connection
    fails whatever is outstanding."""

    def __init__(self, write_each: bool = False) -> None:
        from rmq.remoting import RemotingCommand

        self._decode = RemotingCommand.decode
        self._transport: asyncio.Transport | None = None
        self._buf = bytearray()
        self._out: list[bytearray] = []
        self._pending: dict[int, asyncio.Future] = {}
        self._loop = asyncio.get_running_loop()
        self._write_each = write_each

    @classmethod
    async def open(cls, addr: str, write_each: bool = False) -> RawConnection:
        host, _, port = addr.rpartition(":")
        _t, conn = await asyncio.get_running_loop().create_connection(
            lambda: cls(write_each), host, int(port))
        return conn

    def connection_made(self, transport) -> None:
        self._transport = transport

    def connection_lost(self, exc) -> None:
        pending, self._pending = self._pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(ConnectionError(f"connection lost: {exc}"))

    def data_received(self, data: bytes) -> None:
        # frames are decoded where they lie (``data`` itself when nothing was
        # left over): large pull responses are copied once, into the body
        buf = self._buf
        if buf:
            buf += data
            data = buf
        pos, n = 0, len(data)
        with memoryview(data) as view:
            while n - pos >= 4:
                size = int.from_bytes(view[pos:pos + 4], "big")
                if n - pos - 4 < size:
                    break
                resp = self._decode(view[pos + 4:pos + 4 + size])
                pos += 4 + size
                fut = self._pending.pop(resp.opaque, None)
                if fut is not None and not fut.done():
                    fut.set_result(resp)
        if data is buf:
            del buf[:pos]
        elif pos < n:
            buf += data[pos:]

    async def send(self, opaque: int, frame: bytearray):
        """Write ``frame`` and wait for the response to ``opaque``."""
        if self._transport is None or self._transport.is_closing():
            raise ConnectionError("connection closed")
        fut = self._pending[opaque] = self._loop.create_future()
        if self._write_each:
            self._transport.write(frame)
            return await fut
        if not self._out:
            self._loop.call_soon(self._flush)
        self._out.append(frame)
        return await fut

    def _flush(self) -> None:
        out, self._out = self._out, []
        if self._transport is not None and not self._transport.is_closing():
            self._transport.writelines(out)

    async def close(self) -> None:
        if self._transport is not None:
            self._transport.close()


def read_frame(sock, buf: bytearray) -> bytes:
    """One length-prefixed frame (without its length) from a blocking socket;
    ``buf`` keeps what arrived after it."""
    while True:
        if len(buf) >= 4:
            n = int.from_bytes(buf[:4], "big")
            if len(buf) >= 4 + n:
                frame = bytes(buf[4:4 + n])
                del buf[:4 + n]
                return frame
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        buf += chunk
