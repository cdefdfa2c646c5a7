"""The machine's floor under a send load: what a server that stores nothing
costs per message, alone and as a three-node group's leader.

    .venv/bin/python -m bench.floor [--inflight 16] [--seconds 5] [--size 1024]
        [--java-frames] [--followers 2] [--dledger-pushes] [--rounds 3] [--json]

A broker's CPU per message is bounded below by what its event loop and the
kernel cost for the traffic alone: the wake-ups, the reads and the writes.
Two servers of a few lines on uvloop, each pinned where a broker runs
(CPU 0; the load and the followers on CPU 1, as ``bench.dledger_broker
--pin`` places them), take the same raw load a broker's benches send
(``bench.load``, ``bench.raw.RawRequests`` frames):

* ``single``: reads the request frames and answers each with a send answer
  carrying its opaque, in the request's serialization (``answer_server``):
  rmq's send lane without the store;
* ``leader``: the same, but each read's complete request frames go first, as
  one frame, to every follower (``follower_server``: answers each pushed
  frame with a short one), and the read's answers are written once a quorum
  of the group (the leader and half the followers) holds them
  (``leader_server``): a DLedger leader's traffic without its store, its
  entries' encoding or its quorum bookkeeping.  With ``--dledger-pushes``
  each push is padded to the size of the entries an rmq DLedger leader
  pushes for those sends (JSON, each stored record in base64: ~1.24x a
  1 KiB send's frame), since on loopback the leader's CPU pays for the
  follower's receive of every pushed byte too.

Each server's CPU per message, of it system, and its reads and writes per
message are printed with the leader's ratio to the single one: no broker on
this loop and kernel gets below the first, nor a leader's ratio below the
second's by trimming its own code.  ``--java-frames`` sends the Java
benchmark Producer's frames each in its own write (``bench.java_frames``'s
load); the default is JSON frames, a turn's requests written together (the
rmq client's way, as ``bench.dledger_broker``'s producer writes them).

The single server can take a broker's read naps (``measure``'s ``nap_us``,
``bench.java_frames --floor`` when its brokers nap): its loop then sleeps
after a read of 2 to 15 frames as a broker's does (``rmq.remoting.read_nap``),
so that its row is the floor at the pacing a napping broker meets.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections import deque
from pathlib import Path

from bench.cpu import BROKER_CPUS, LOAD_CPU, can_pin
from bench.load import LoadSpec, load_in_subprocess
from bench.modes import ROOT, mode_env
from bench.raw import RawRequests
from rmq.dledger.entry import Entry
from rmq.remoting import RemotingCommand
from rmq.remoting.read_nap import ENOUGH_FRAMES, ReadNap
from rmq.store import message_codec as codec
from rmq.testing.procs import RmqProcess, free_port

ACK_SIZE = 128  # about an rmq follower's answer to an APPEND push
_LEN = 4
_ROCKETMQ = 1  # the serialize type in a frame's header-length field's first byte
_OPAQUE_AT = 13  # a ROCKETMQ header's opaque: length, type+header length, code, language, version


def _answer_template(serialize_type: int, marker: int) -> bytes:
    """A SEND_MESSAGE_V2 answer frame as rmq's send lane writes it, with
    ``marker`` as its opaque (replaced per request)."""
    ext = {"msgId": "7F00000100002A9F0000000000000000", "queueId": "0", "queueOffset": "0",
           "MSG_REGION": "DefaultRegion", "TRACE_ON": "true"}
    cmd = RemotingCommand(0, 0, 409, marker, 1, None, ext, None, serialize_type)
    return bytes(cmd.encode())


class Answers:
    """The answer frame to each request frame, made from a template by
    putting the request's opaque in (the ROCKETMQ header holds it at a
    fixed offset; the JSON one as digits, whose count sets the lengths)."""

    def __init__(self) -> None:
        rmq = _answer_template(_ROCKETMQ, 0x7A7A7A7A)
        self.rmq_head, self.rmq_tail = rmq[:_OPAQUE_AT], rmq[_OPAQUE_AT + 4:]
        self._json: dict[int, tuple[bytes, bytes]] = {}

    def _json_parts(self, digits: int) -> tuple[bytes, bytes]:
        parts = self._json.get(digits)
        if parts is None:
            marker = 10 ** (digits - 1) + 1 if digits > 1 else 7
            frame = _answer_template(0, marker)
            at = frame.index(b'"opaque":%d' % marker) + 9
            parts = self._json[digits] = (frame[:at], frame[at + digits:])
        return parts

    def of(self, buf: bytearray, pos: int, end: int) -> bytes:
        """The answer to the request frame at ``buf[pos:end]``."""
        if buf[pos + _LEN] == _ROCKETMQ:
            return self.rmq_head + buf[pos + _OPAQUE_AT:pos + _OPAQUE_AT + 4] + self.rmq_tail
        at = buf.index(b'"opaque":', pos, end) + 9
        stop = at
        while 48 <= buf[stop] <= 57:
            stop += 1
        head, tail = self._json_parts(stop - at)
        return head + buf[at:stop] + tail


class FrameReader(asyncio.BufferedProtocol):
    """Length-prefixed frames read into one growing buffer; each read's
    complete frames are handed to ``frames(buf, starts, end)`` and the rest
    kept for the next read.  ``nap``, when set (a ``ReadNap``), is told of
    every read's frames, as a broker's pacer is."""

    nap: ReadNap | None = None

    def __init__(self) -> None:
        self.buf = bytearray(1 << 18)
        self.filled = 0
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport) -> None:
        self.transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        if len(self.buf) - self.filled < 1 << 16:
            self.buf.extend(bytes(len(self.buf)))
        return memoryview(self.buf)[self.filled:]

    def buffer_updated(self, nbytes: int) -> None:
        buf, end, pos = self.buf, self.filled + nbytes, 0
        starts = []
        while end - pos >= _LEN:
            size = int.from_bytes(buf[pos:pos + _LEN], "big")
            if end - pos - _LEN < size:
                break
            starts.append(pos)
            pos += _LEN + size
        if self.nap is not None:  # the read's frames, a part of one counted whole
            self.nap.touch(min(len(starts) + (pos < end), ENOUGH_FRAMES))
        if starts:
            self.frames(buf, starts, pos)
        if pos:
            buf[:end - pos] = buf[pos:end]
        self.filled = end - pos

    def frames(self, buf: bytearray, starts: list[int], end: int) -> None:
        raise NotImplementedError


class SingleServer(FrameReader):
    """Answers every request frame of a read in one write."""

    answers = Answers()

    def frames(self, buf: bytearray, starts: list[int], end: int) -> None:
        self.transport.write(self.answer_all(buf, starts, end))

    def answer_all(self, buf: bytearray, starts: list[int], end: int) -> bytes:
        """The answers to a read's request frames (at ``starts``, the last
        ending at ``end``), in order."""
        of = self.answers.of
        return b"".join(of(buf, s, e) for s, e in zip(starts, starts[1:] + [end], strict=True))


class FollowerServer(FrameReader):
    """Answers every pushed frame with an ``ACK_SIZE`` frame."""

    ack = (ACK_SIZE - _LEN).to_bytes(_LEN, "big") + bytes(ACK_SIZE - _LEN)

    def frames(self, buf: bytearray, starts: list[int], end: int) -> None:
        self.transport.write(self.ack * len(starts))


class Quorum:
    """The leader's pushes in flight: each read's answers, written to the
    client once ``needed`` followers have acknowledged its push (each
    follower acknowledges its pushes in order)."""

    def __init__(self, needed: int) -> None:
        self.needed = needed
        self.client: asyncio.Transport | None = None
        self.acks: dict[int, list] = {}  # push number -> [acks, answers]
        self.sent = 0

    def pushed(self, answers: bytes) -> int:
        self.sent += 1
        self.acks[self.sent] = [0, answers]
        return self.sent

    def acked(self, push: int, followers: int) -> None:
        held = self.acks[push]
        held[0] += 1
        if held[0] == self.needed:
            self.client.write(held[1])
        if held[0] == followers:
            del self.acks[push]


class AckReader(FrameReader):
    """The leader's connection to one follower: each answer frame
    acknowledges the oldest push it has not answered."""

    def __init__(self, quorum: Quorum, followers: int) -> None:
        super().__init__()
        self.quorum, self.followers = quorum, followers
        self.waiting: deque[int] = deque()

    def frames(self, buf: bytearray, starts: list[int], end: int) -> None:
        for _ in starts:
            self.quorum.acked(self.waiting.popleft(), self.followers)


class LeaderServer(SingleServer):
    """Pushes each read's request frames to every follower, one frame a
    follower, and answers the read once a quorum holds them.  ``pad`` bytes
    a request frame are added to each push (zeros): a DLedger push carries
    each entry as JSON with its stored record in base64, ~1.24x the bytes of
    the request it came from, and on loopback a push's bytes cost the
    leader's CPU the follower's receive too."""

    def __init__(self, quorum: Quorum, peers: list[AckReader], pad: int = 0) -> None:
        super().__init__()
        self.quorum, self.peers, self.pad = quorum, peers, pad

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self.quorum.client = transport

    def frames(self, buf: bytearray, starts: list[int], end: int) -> None:
        push = self.quorum.pushed(self.answer_all(buf, starts, end))
        pad = self.pad * len(starts)
        frame = (end + pad).to_bytes(_LEN, "big") + buf[:end] + bytes(pad)
        for peer in self.peers:
            peer.waiting.append(push)
            peer.transport.write(frame)


def serve(kind: str, port: int, followers: list[int], pad: int = 0, nap_us: int = 0) -> None:
    """Run one floor server (``kind``: single, leader or follower) on
    ``port`` until killed; a leader first connects to its ``followers`` and
    pads its pushes by ``pad`` bytes a request frame; a single server naps
    ``nap_us`` after reads of a few frames, as a broker does."""
    import uvloop

    async def main() -> None:
        loop = asyncio.get_running_loop()
        if nap_us > 0 and kind == "single":
            FrameReader.nap = ReadNap(loop, nap_us)
        if kind == "leader":
            quorum = Quorum((len(followers) + 1) // 2)  # the followers a majority needs
            peers = []
            for p in followers:
                _, peer = await loop.create_connection(lambda: AckReader(quorum, len(followers)),
                                                       "127.0.0.1", p)
                peers.append(peer)
            server = await loop.create_server(lambda: LeaderServer(quorum, peers, pad),
                                              "127.0.0.1", port)
        else:
            protocol = SingleServer if kind == "single" else FollowerServer
            server = await loop.create_server(protocol, "127.0.0.1", port)
        await server.serve_forever()

    uvloop.run(main())


class Floor:
    """A floor server (with its followers for ``leader``) started in child
    processes (``RmqProcess``), pinned as a broker and its followers are;
    stopped on exit."""

    def __init__(self, kind: str, followers: int = 0, pin: bool = True, pad: int = 0,
                 nap_us: int = 0) -> None:
        self.kind, self.followers, self.pin, self.pad = kind, followers, pin, pad
        self.nap_us = nap_us
        self.procs: list[RmqProcess] = []
        self.logs = tempfile.TemporaryDirectory(prefix="rmq-floor-")
        self.port = 0
        self.pid = 0

    def _start(self, kind: str, cpus: set[int] | None, peers: list[int] = ()) -> int:
        port = free_port()
        proc = RmqProcess("bench.floor", ["--serve", kind, "--port", str(port),
                                          "--nap-us", str(self.nap_us),
                                          *(["--peers", ",".join(map(str, peers)),
                                             "--push-pad", str(self.pad)] if peers else [])],
                          Path(self.logs.name) / f"{kind}-{port}.log",
                          env=mode_env("compiled"), cwd=str(ROOT), cpus=cpus)
        self.procs.append(proc)
        proc.start(wait_for_port=port)
        return port

    def __enter__(self) -> Floor:
        pin = self.pin and can_pin()
        try:
            peers = [self._start("follower", {LOAD_CPU} if pin else None)
                     for _ in range(self.followers if self.kind == "leader" else 0)]
            self.port = self._start(self.kind, set(BROKER_CPUS) if pin else None, peers)
        except BaseException:
            self.__exit__()  # (those started are not left running)
            raise
        self.pid = self.procs[-1].pid
        return self

    def __exit__(self, *exc) -> None:
        for proc in self.procs:
            proc.kill()
        self.logs.cleanup()


def measure(kind: str, inflight: int, seconds: float, size: int = 1024,
            java_frames: bool = False, followers: int = 2, pad: int = 0,
            nap_us: int = 0) -> dict:
    """The raw load's figures against one floor server: JSON frames over 8
    queues, a turn's written together, or the Java benchmark Producer's over
    1024 queues, each written alone (``bench.java_frames``' load); a leader's
    pushes padded by ``pad`` bytes a frame; a single server napping
    ``nap_us`` as a broker does."""
    with Floor(kind, followers, pad=pad, nap_us=nap_us) as floor:
        spec = LoadSpec("send", "", "BenchTopic", seconds=seconds, warmup=1.0, size=size,
                        inflight=inflight, broker_pid=floor.pid,
                        broker_addr=f"127.0.0.1:{floor.port}", raw=True,
                        queues=1024 if java_frames else 8, write_each=java_frames,
                        java_frames=java_frames)
        return load_in_subprocess(spec, mode_env("compiled"),
                                  cpu=LOAD_CPU if can_pin() else None)


def dledger_pad(size: int, java_frames: bool = False) -> int:
    """The bytes a request frame of the raw load (``size``-byte bodies) is
    short of the entry an rmq DLedger leader pushes for it: the stored
    record (the send's properties as stored, CLUSTER added) as an entry's
    JSON with the record in base64, and the comma between entries."""
    requests = RawRequests("BenchTopic", bytes(size), queues=8, java=java_frames)
    frame = bytes(requests.frame(12345)[1])
    header = RemotingCommand.decode(frame[_LEN:]).ext_fields
    text = header.get("i") or header.get("properties") or ""
    stored = codec.send_properties(text, "DefaultCluster")[1].encode()
    record = codec.record_size(0, size, len(b"BenchTopic"), len(stored))
    entry = Entry(index=10 ** 7, term=1, body=bytes(record), pos=10 ** 10)
    return max(0, len(entry.json_bytes()) + 1 - len(frame))


class _Sink:
    """A transport that takes writes and drops them."""

    def write(self, data: bytes) -> None:
        pass


def python_cost(kind: str, size: int, java_frames: bool, msgs_per_read: float,
                reads: int = 20_000, followers: int = 2, pad: int = 0) -> float:
    """CPU µs per frame of a floor server's own Python at ``msgs_per_read``
    request frames a read (a load's measured figure, rounded to whole frames),
    in this process with no socket: the single server's
    read and answers; the leader's read, push and answers and its followers'
    acknowledgements.  The part of a floor figure that a compiled server
    would not pay."""
    frames = max(1, round(msgs_per_read))
    requests = RawRequests("BenchTopic", bytes(size), queues=8, java=java_frames)
    data = b"".join(bytes(requests.frame(i)[1]) for i in range(frames))
    peers: list[AckReader] = []
    if kind == "leader":
        quorum = Quorum((followers + 1) // 2)
        for _ in range(followers):
            peer = AckReader(quorum, followers)
            peer.connection_made(_Sink())
            peers.append(peer)
        server: SingleServer = LeaderServer(quorum, peers, pad)
    else:
        server = SingleServer()
    server.connection_made(_Sink())
    ack = FollowerServer.ack
    start = time.process_time()
    for _ in range(reads):
        server.get_buffer(-1)[:len(data)] = data
        server.buffer_updated(len(data))
        for peer in peers:
            peer.get_buffer(-1)[:len(ack)] = ack
            peer.buffer_updated(len(ack))
    return (time.process_time() - start) / reads / frames * 1e6


FIGURES = ("msgs_per_s", "broker_cpu_us_per_msg", "broker_system_us_per_msg",
           "broker_msgs_per_read", "broker_reads_per_msg", "broker_writes_per_msg")


def run_floors(inflight: int, seconds: float, size: int, java_frames: bool = False,
               followers: int = 2, pad: int = 0, rounds: int = 1) -> tuple[dict, dict]:
    """The single and the leader floor under the same load, ``rounds``
    alternated runs of each: their medians of ``FIGURES`` and their own
    Python per message at the messages a read they met (``python_cost``),
    each by server kind."""
    runs: dict[str, list[dict]] = {"single": [], "leader": []}
    for _ in range(rounds):
        for kind in runs:
            runs[kind].append(measure(kind, inflight, seconds, size, java_frames, followers,
                                      pad))
    med = {kind: {k: statistics.median(r.get(k, 0.0) for r in rs) for k in FIGURES}
           for kind, rs in runs.items()}
    python = {kind: python_cost(kind, size, java_frames, m["broker_msgs_per_read"],
                                followers=followers, pad=pad)
              for kind, m in med.items()}
    return med, python


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--inflight", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--followers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3, help="alternated runs of each server")
    ap.add_argument("--dledger-pushes", action="store_true",
                    help="the leader's pushes as large as an rmq DLedger leader's: each "
                         "request frame padded to its entry's size in JSON with the stored "
                         "record in base64 (dledger_pad)")
    ap.add_argument("--java-frames", action="store_true",
                    help="the Java benchmark Producer's frames, each in its own write")
    ap.add_argument("--json", action="store_true", help="print the medians as JSON")
    ap.add_argument("--serve", choices=("single", "leader", "follower"), help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--peers", default="", help=argparse.SUPPRESS)
    ap.add_argument("--push-pad", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--nap-us", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.serve:
        serve(args.serve, args.port, [int(p) for p in args.peers.split(",") if p], args.push_pad,
              args.nap_us)
        return 0
    if args.inflight < 1 or args.rounds < 1 or args.followers < 1:
        print("floor: --inflight, --rounds and --followers must be >= 1", file=sys.stderr)
        return 2
    pad = dledger_pad(args.size, args.java_frames) if args.dledger_pushes else 0
    med, python = run_floors(args.inflight, args.seconds, args.size, args.java_frames,
                             args.followers, pad, args.rounds)
    ratio = med["leader"]["broker_cpu_us_per_msg"] / med["single"]["broker_cpu_us_per_msg"]
    if args.json:
        print(json.dumps({"medians": med, "leader_over_single": ratio,
                          "python_us_per_msg": python}))
        return 0
    frames = "Java Producer's (ROCKETMQ, a write each)" if args.java_frames else \
        "JSON (a turn's together)"
    print(f"floor servers, {args.inflight} in flight, {args.size} B, {frames} frames, "
          f"{args.followers} followers, pushes padded {pad} B a frame, "
          f"{args.rounds} alternated rounds, medians")
    # the last column: the servers' own frame handling in Python at their
    # messages a read, which a compiled server would not pay
    print("| server | msgs/s | CPU µs/msg | of it system | msgs/read | reads/msg | writes/msg "
          "| of it the floor's Python µs/msg |")
    print("|---|---|---|---|---|---|---|---|")
    for kind, m in med.items():
        print(f"| {kind} | {m['msgs_per_s']:,.0f} | {m['broker_cpu_us_per_msg']:.2f} | "
              f"{m['broker_system_us_per_msg']:.2f} | {m['broker_msgs_per_read']:.1f} | "
              f"{m['broker_reads_per_msg']:.3f} | {m['broker_writes_per_msg']:.3f} | "
              f"{python[kind]:.2f} |")
    print(f"the leader floor over the single floor: {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
