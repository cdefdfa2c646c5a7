"""The send lane's cost per read, in one process: a broker controller is
initialized on a throw-away store (no sockets, no name server), a topic of 8
queues made and each queue given a message, then reads of ``--frames``
SEND_MESSAGE_V2 frames (1 KiB bodies, as ``bench.raw`` builds them) are
handed to the lane the broker installs on its main port, and the process
CPU time per read is taken, best and median of ``--repeats``.  Also timed:
the lane's per-read bracket alone, ``SendLaneSupport.begin`` then ``end``
with nothing stored.

A read of one frame is what a sender with one request in flight costs the
broker besides the socket calls and the event loop; the spread between
neighbouring runs on a shared machine is about 0.3 µs on the best figure.

``--calls`` counts the function calls of one read instead (``cProfile`` over
``--reads`` reads: calls per read, Python functions and built-ins, and the
functions called), as deterministic as the instructions and quick.

``--instructions`` counts instead of timing: the reads alone (no bracket) run
under valgrind's callgrind twice, with ``--reads`` and with ``--reads`` +
10,000, and the difference of the two totals gives the instructions of one
read.  The count does not move with the machine's load, so two trees can be
compared while other work runs (slow: a few minutes per tree).

``--protocol`` hands each read to a connection's ``RemotingProtocol`` (the
event loop's ``get_buffer`` then ``buffer_updated``, the answers to a
transport that keeps them) instead of to the lane: the counts and times then
cover the server's own per-read Python too (framing, the lanes' turn, the
answer's write); ``--calls`` also prints the transport's writes per read.

``--java`` sends the Java benchmark Producer's frames instead (the ROCKETMQ
binary header, its group and properties, ``bench.raw`` with ``java=True``)
round a topic of 1024 queues, as ``bench.java_frames`` does against a broker:
nearly every send of a read then meets a queue of its own.

``--gc-freeze`` collects and freezes the heap once the set-up is done, as a
broker does once started (``rmq.broker.startup.settle_gc``): the reads then
meet the collections a broker's reads meet, not full ones over everything
the set-up imported and built (which the difference of two instruction
counts otherwise catches or misses by chance).  ``--main-thread`` counts the
loop's thread alone: the store's threads that wake by the clock run the more
the longer a run takes under callgrind, which the machine's load sets.

``--dledger`` serves the reads to a DLedger leader's lane instead: the broker
leads a group of one (its quorum is its own log, so each read's entries are
committed, dispatched to the consume queues and answered within the read),
the bracket is not timed.  ``--extra`` sets the reads the instruction count
adds (fewer for many frames a read: each entry stays in the data files).

``--followers 2`` (with ``--dledger``) makes the group three: two DLedger
nodes (``rmq.dledger.startup``) run as processes of their own, never
candidates, so the broker in this process leads; each read then waits for its
answer, which the leader writes once a follower acknowledged the read's push.
A read's figures then hold the pushes to both followers, their answers, the
quorum wait and the commit besides the lane, the append and the reput (the
followers' CPU is not counted: valgrind does not follow them).

``--follower`` counts a DLedger follower's side instead: the broker here
follows n0 in term 1 of a group of three whose other members never start
(``bench.dledger_follow``: no elector, no timers of the group), and each read
is one APPEND push of ``--frames`` entries (records of 1 KiB sends round 8
queues, as a leader's lane writes them, framed as a leader frames them,
each push committing the entries of the push before it), handed to a
connection's protocol of the group's remoting server as the event loop
hands a read, then one loop turn.  A read's figures hold the follower's
framing, its push path, the append, the commit listener's reput and
dispatch of the previous push's entries and the answer (written to a
transport that keeps nothing), and the copy of the push into the receive
buffer (the kernel's, in a broker).  The pushes are made before the run
(with ``--instructions`` before both counted runs: ``--pushes-file``).

    .venv/bin/python -m bench.lane_reads [--reads 20000] [--frames 1] [--repeats 7]
    .venv/bin/python -m bench.lane_reads --instructions [--reads 2000] [--frames 1]
    .venv/bin/python -m bench.lane_reads --calls [--reads 2000] [--frames 1]
    .venv/bin/python -m bench.lane_reads --dledger --instructions --reads 200 --extra 1000 \
        --frames 16
    .venv/bin/python -m bench.lane_reads --dledger --followers 2 --instructions --reads 100 \
        --extra 500 --frames 4
    .venv/bin/python -m bench.lane_reads --follower --instructions --gc-freeze \
        --main-thread --reads 200 --extra 600 --frames 16
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from bench.callgrind import callgrind_total
from bench.connection import Connection
from bench.raw import RawRequests
from rmq.broker.startup import settle_gc
from rmq.common.topic_config import TopicConfig
from rmq.store.message import MessageExtBrokerInner
from rmq.store.message_codec import message_properties_to_string

TOPIC = "BenchTopic"
QUEUES = 8
# --java: the Java benchmark Producer's frames (ROCKETMQ header, its
# properties) going round its topic's 1024 queues, so nearly every message
# of a read meets a queue of its own, as against a broker
JAVA_TOPIC = "BenchmarkTest"
JAVA_QUEUES = 1024


class _Channel:
    """What the lane asks of a connection: its peer and its attributes."""

    def __init__(self) -> None:
        self.attrs: dict = {}
        self.remote_addr = "127.0.0.1:40000"
        self.answered: asyncio.Future | None = None  # set by a DLedger lane's answers

    def write_bytes(self, data: bytes, _more: bool = False) -> None:
        """A DLedger lane's answers, once the quorum holds a read's entries."""
        waiting = self.answered
        if waiting is not None and not waiting.done():
            waiting.set_result(data)


def _followers(root: Path, ids: list[str], peers: str) -> list:
    """DLedger nodes ``ids`` of group g as processes of their own, that never
    stand for election (the broker here is the only candidate)."""
    from rmq.testing.procs import RmqProcess

    procs = []
    for node in ids:
        port = int(peers.split(f"{node}-127.0.0.1:")[1].split(";")[0])
        procs.append(RmqProcess(
            "rmq.dledger.startup",
            ["--group", "g", "--id", node, "--peers", peers, "--store-base-dir",
             str(root / "followers"), "--enable-batch-push", "--heartbeat-ms", "2000",
             "--max-heartbeat-leak", "100000", "--min-vote-ms", "3600000", "--max-vote-ms",
             "3600001", "--data-file-size", str(256 * 1024 * 1024)],
            root / f"{node}.out").start(wait_for_port=port))
    return procs


async def _controller(root: Path, dledger: bool = False, followers: int = 0,
                      topic: str = TOPIC, queues: int = QUEUES):
    """An initialized broker controller on a fresh store under ``root``
    (``dledger``: leading a DLedger group of one, or of 1 + ``followers``
    whose follower processes it keeps in ``controller.bench_followers``),
    ``topic`` made with ``queues`` queues."""
    from rmq.broker.controller import BrokerController
    from rmq.broker.startup import parse, prepare_store_paths
    from rmq.testing.procs import free_port

    conf = root / "broker.conf"
    group = ""
    procs = []
    if dledger:
        ids = [f"n{i}" for i in range(1 + followers)]
        peers = ";".join(f"{node}-127.0.0.1:{free_port()}" for node in ids)
        procs = _followers(root, ids[1:], peers)
        group = ("enableDLegerCommitLog=true\ndLegerGroup=g\ndLegerSelfId=n0\n"
                 f"dLegerPeers={peers}\n")
    conf.write_text(f"brokerName=lane-reads\nlistenPort=40911\nstorePathRootDir={root}/store\n"
                    f"storePathCommitLog={root}/store/commitlog\n"
                    f"mappedFileSizeCommitLog=268435456\n{group}")
    _args, settings = parse(["-c", str(conf), "-n", "127.0.0.1:1"])
    prepare_store_paths(settings)
    controller = BrokerController(settings)
    controller.bench_followers = procs
    if not await controller.initialize():
        raise RuntimeError("the broker did not initialize")
    controller.topic_config_manager.update_topic_config(TopicConfig(topic, queues, queues))
    store = controller.message_store
    store.start()  # its services (the broker's own start would also open the ports)
    if dledger:  # the group's endpoint alone (no other ports): it elects itself; the
        # lane makes the queues
        from rmq.broker.dledger_role_change import DLedgerService

        for service in controller.services:
            if isinstance(service, DLedgerService):
                await service.start()
        return controller
    for qid in range(queues):  # the general put makes each consume queue
        props = {"UNIQ_KEY": f"{qid:032X}"}
        store.put_message(MessageExtBrokerInner(
            topic=topic, queue_id=qid, body=b"x", properties=props,
            properties_string=message_properties_to_string(props),
            born_timestamp=int(time.time() * 1000), born_host=("10.0.0.1", 5000)))
    while store.reput_from_offset < store.commit_log.get_max_offset():
        store.do_reput()
    return controller


def _shape(java: bool) -> tuple[str, int]:
    """The topic and its queue count the reads go to."""
    return (JAVA_TOPIC, JAVA_QUEUES) if java else (TOPIC, QUEUES)


WARM_PUSHES = 4 * QUEUES


def write_pushes(path: Path, count: int, entries: int) -> None:
    """``WARM_PUSHES`` + ``count`` APPEND pushes of ``entries`` entries
    (``bench.dledger_follow.pushes``: a leader's frames, each committing
    the push before it) into ``path``, one frame after another: the
    counted runs read them (``--pushes-file``) rather than make them."""
    from bench.dledger_follow import pushes

    path.write_bytes(b"".join(pushes(WARM_PUSHES + count, entries)))


class _Pushes:
    """``--follower``: the pushes of a file of them (``write_pushes``), each
    handed to a connection's protocol of the DLedger remoting server of a
    follower broker (``bench.dledger_follow``: it follows n0 in term 1 of a
    group of three whose other members never start)."""

    def __init__(self, server, entries: int, path: str) -> None:
        from bench.dledger_follow import serving

        self.server = server
        self.connection = Connection(serving(server))
        self.entries = entries  # a push's
        self.sent = 0  # the pushes handed over so far
        # (unbuffered: a push is read straight into its bytes)
        self.file = open(path, "rb", buffering=0)  # noqa: SIM115 - read while the run lasts
        self.channel = None

    def batch(self, reads: int, _frames: int) -> list[bytes]:
        """The next ``reads`` pushes of the file, each read whole into its
        bytes (by the kernel: no copy of it counted with the run's)."""
        out = []
        for _ in range(reads):
            head = self.file.read(4)
            if len(head) < 4:
                raise RuntimeError("the pushes file holds fewer pushes than the run reads")
            self.file.seek(-4, 1)
            out.append(self.file.read(4 + int.from_bytes(head, "big")))
        return out

    async def serve(self, pushes: list[bytes]) -> int:
        """Hand each push to the connection, then let the loop turn (the
        answer's flush when the general way answered); how many were not
        answered SUCCESS with the follower's end at the push's last entry."""
        connection, store = self.connection, self.server.store
        transport = connection.transport
        missed = 0
        for buf in pushes:
            writes = transport.writes
            connection.serve(None, buf, 0, len(buf))
            await asyncio.sleep(0)
            missed += transport.writes != writes + 1 or b'"code":200,' not in transport.last
        self.sent += len(pushes)
        if store.ledger_end_index != self.sent * self.entries - 1:
            raise RuntimeError(f"the follower's end is {store.ledger_end_index}, "
                               f"not {self.sent * self.entries - 1}")
        return missed

    async def warm(self) -> None:
        if await self.serve(self.batch(WARM_PUSHES, self.entries)):
            raise RuntimeError("the follower did not take the pushes")


async def _shutdown(controller) -> None:
    await controller.shutdown()
    for proc in getattr(controller, "bench_followers", []):
        proc.kill()


def _serve_all(lane, channel: _Channel, reads: list[bytes]) -> int:
    """Hand every read to the lane; how many it did not take whole."""
    missed = 0
    for buf in reads:
        pos, _out = lane.serve(channel, buf, 0, len(buf))
        missed += pos != len(buf)
    return missed


async def _serve_answered(lane, channel: _Channel, reads: list[bytes]) -> int:
    """``_serve_all`` of a DLedger leader with followers: each read once the
    one before it is answered (a quorum holds its entries)."""
    missed = 0
    loop = asyncio.get_running_loop()
    for buf in reads:
        answered = channel.answered = loop.create_future()
        pos, _out = lane.serve(channel, buf, 0, len(buf))
        missed += pos != len(buf)
        if pos:
            await asyncio.wait_for(answered, 30)
    return missed


async def _serve(lane, channel: _Channel, reads: list[bytes], answered: bool) -> int:
    if answered:
        return await _serve_answered(lane, channel, reads)
    return _serve_all(lane, channel, reads)


class _Reads:
    """The broker's lane, warmed up (its queues made, its first reads served),
    and the reads of 1 KiB SEND_MESSAGE_V2 frames handed to it."""

    def __init__(self, controller, protocol: bool = False, java: bool = False) -> None:
        self.lane = controller.remoting_server.lane
        self.connection = Connection(controller.remoting_server) if protocol else None
        self.queues = JAVA_QUEUES if java else QUEUES
        self.raw = RawRequests(JAVA_TOPIC if java else TOPIC, b"x" * 1024, queues=self.queues,
                               java=java)
        self.channel = _Channel()
        self.n = 0  # frames made so far
        self.answered = bool(getattr(controller, "bench_followers", None))

    async def warm(self) -> None:
        lane, channel, raw = self.lane, self.channel, self.raw
        # (a group's election under valgrind takes a while: up to a minute)
        for _ in range((6000 if self.answered else 2000) + 2 * self.queues):
            if await _serve(lane, channel, [bytes(raw.frame(self.n)[1])], self.answered) == 0:
                self.n += 1
                if self.n >= 2 * self.queues:
                    return
                if self.n % (self.queues // QUEUES):  # (--java: a pause per 128 frames)
                    continue
            await asyncio.sleep(0.01)
        raise RuntimeError("the send lane does not take the frames (store not writable?)")

    async def serve(self, batch: list[bytes]) -> int:
        """Hand each read to the lane (or the connection); how many it did
        not take whole."""
        lane = self.lane if self.connection is None else self.connection
        return await _serve(lane, self.channel, batch, self.answered)

    def batch(self, reads: int, frames: int) -> list[bytes]:
        batch = []
        for _ in range(reads):
            buf = bytearray()
            for _ in range(frames):
                buf += self.raw.frame(self.n)[1]
                self.n += 1
            batch.append(bytes(buf))
        return batch


async def _open(root: Path, dledger: bool, followers: int, java: bool, protocol: bool,
                follower: bool, frames: int, pushes_file: str | None, reads: int) -> tuple:
    """The broker of a run under ``root`` and its reads, warmed up: a
    follower's pushes of ``frames`` entries (``follower``; read from
    ``pushes_file``, else made for ``reads`` reads), else reads of send
    frames."""
    if follower:
        from bench.dledger_follow import _follower

        if pushes_file is None:
            pushes_file = str(root / "pushes")
            write_pushes(Path(pushes_file), reads, frames)
        controller, server = await _follower(root)
        r: _Reads | _Pushes = _Pushes(server, frames, pushes_file)
    else:
        controller = await _controller(root, dledger, followers, *_shape(java))
        r = _Reads(controller, protocol, java)
    try:
        await r.warm()
    except BaseException:
        await _shutdown(controller)
        raise
    return controller, r


async def calls(reads: int, frames: int, dledger: bool = False,
                protocol: bool = False,
                followers: int = 0, java: bool = False, follower: bool = False,
                pushes_file: str | None = None) -> tuple[float, list[tuple[float, str]], float]:
    """Function calls per read (``cProfile``): the total and, per function,
    its calls per read, most called first; and the transport's writes per
    read (``protocol`` or ``follower``; else 0)."""
    import cProfile
    import pstats

    root = Path(tempfile.mkdtemp(prefix="lane-reads-"))
    controller, r = await _open(root, dledger, followers, java, protocol, follower, frames,
                                pushes_file, reads)
    try:
        batch = r.batch(reads, frames)
        await asyncio.sleep(0.02)
        writes_before = 0 if r.connection is None else r.connection.transport.writes
        profile = cProfile.Profile()
        profile.enable()
        missed = await r.serve(batch)
        profile.disable()
        if missed:
            raise RuntimeError("the send lane did not take every read")
        stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
        rows = [(v[1] / reads, f"{Path(f).name}:{line} {name}" if line else name)
                for (f, line, name), v in stats.items()
                if name not in ("_serve_all", "_serve", "_serve_answered", "serve",
                                "<method 'disable' of '_lsprof.Profiler' objects>")]
        rows.sort(key=lambda row: -row[0])
        writes = 0.0 if r.connection is None else \
            (r.connection.transport.writes - writes_before) / reads
        return sum(row[0] for row in rows), rows, writes
    finally:
        await _shutdown(controller)
        shutil.rmtree(root, ignore_errors=True)


async def measure(reads: int, frames: int, repeats: int, bracket: bool = True,
                  dledger: bool = False, protocol: bool = False,
                  followers: int = 0, java: bool = False,
                  freeze: bool = False, follower: bool = False,
                  pushes_file: str | None = None) -> dict[str, list[float]]:
    root = Path(tempfile.mkdtemp(prefix="lane-reads-"))
    controller, r = await _open(root, dledger, followers, java, protocol, follower, frames,
                                pushes_file, reads * repeats)
    try:
        support = controller.send_lane_support
        if freeze:  # what a broker does once started (rmq.broker.startup.settle_gc)
            settle_gc()
        else:
            gc.collect()
        per_read, brackets = [], []
        for _ in range(repeats):
            batch = r.batch(reads, frames)
            await asyncio.sleep(0.02)  # the store's loop callbacks run between repeats
            t0 = time.process_time_ns()
            missed = await r.serve(batch)
            if not missed:
                per_read.append((time.process_time_ns() - t0) / reads / 1000)
            if not bracket:
                continue
            t0 = time.process_time_ns()
            channel = r.channel
            for _ in range(reads):
                ctx = support.begin(channel)
                support.end(ctx, ctx.run.wrote, 0, [], channel, None, 0)
            brackets.append((time.process_time_ns() - t0) / reads / 1000)
        return {"per_read_us": per_read, "begin_end_us": brackets}
    finally:
        await _shutdown(controller)
        shutil.rmtree(root, ignore_errors=True)


EXTRA_READS = 10_000  # what --instructions adds to the second run


def _callgrind_total(reads: int, frames: int, dledger: bool = False,
                     protocol: bool = False, followers: int = 0, java: bool = False,
                     freeze: bool = False, main_thread: bool = False,
                     pushes_file: str | None = None) -> int:
    """Instructions of a whole run of the reads alone under callgrind
    (``pushes_file``: a follower's, of the pushes in that file)."""
    return callgrind_total("bench.lane_reads", [
        "--reads", str(reads), "--frames", str(frames), "--repeats", "1", "--no-bracket",
        *(["--dledger"] if dledger else []), *(["--protocol"] if protocol else []),
        *(["--java"] if java else []), *(["--gc-freeze"] if freeze else []),
        *(["--follower", "--pushes-file", pushes_file] if pushes_file else []),
        "--followers", str(followers)], main_thread=main_thread)


def instructions(reads: int, frames: int, extra: int = EXTRA_READS,
                 dledger: bool = False, protocol: bool = False,
                 followers: int = 0, java: bool = False, freeze: bool = False,
                 main_thread: bool = False, follower: bool = False) -> float:
    """Instructions per read: the difference of two callgrind totals."""
    if shutil.which("valgrind") is None:
        raise SystemExit("--instructions needs valgrind (apt-get install valgrind)")
    with tempfile.TemporaryDirectory(prefix="lane-reads-pushes-") as tmp:
        pushes_file = None
        if follower:  # (made here: the counted runs read them)
            pushes_file = str(Path(tmp) / "pushes")
            write_pushes(Path(pushes_file), reads + extra, frames)
        low = _callgrind_total(reads, frames, dledger, protocol, followers, java, freeze,
                               main_thread, pushes_file)
        high = _callgrind_total(reads + extra, frames, dledger, protocol, followers, java, freeze,
                                main_thread, pushes_file)
    return (high - low) / extra


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reads", type=int, default=20000, help="reads per repeat")
    ap.add_argument("--frames", type=int, default=1, help="send frames per read")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--no-bracket", action="store_true", help="time the reads alone")
    ap.add_argument("--instructions", action="store_true",
                    help="count instructions per read under callgrind instead of timing")
    ap.add_argument("--calls", action="store_true",
                    help="count the function calls per read (cProfile) instead of timing")
    ap.add_argument("--dledger", action="store_true",
                    help="serve the reads to a DLedger leader's lane (a group of one)")
    ap.add_argument("--protocol", action="store_true",
                    help="hand the reads to a connection's protocol (the server's per-read "
                         "Python too), not to the lane")
    ap.add_argument("--java", action="store_true",
                    help="the Java benchmark Producer's frames (ROCKETMQ header) over a topic of "
                         f"{JAVA_QUEUES} queues, instead of JSON ones over {QUEUES}")
    ap.add_argument("--gc-freeze", action="store_true",
                    help="collect and freeze the heap after the set-up, as a started broker does "
                         "(timed and counted reads then meet only the collections a broker's do)")
    ap.add_argument("--main-thread", action="store_true",
                    help="with --instructions: count the loop's thread alone (the store's "
                         "clocked threads run the more the slower a run, so the machine's load "
                         "moves a count of all threads)")
    ap.add_argument("--extra", type=int, default=EXTRA_READS,
                    help="reads the second --instructions run adds")
    ap.add_argument("--followers", type=int, default=0,
                    help="with --dledger: follower processes in the group (each read then "
                    "waits for its answer)")
    ap.add_argument("--follower", action="store_true",
                    help="a DLedger follower's side: each read one APPEND push of --frames "
                    "entries to a follower broker, through a connection's protocol")
    ap.add_argument("--pushes-file", help=argparse.SUPPRESS)  # --follower's pushes, made before
    args = ap.parse_args(argv)
    if args.followers and not args.dledger:
        ap.error("--followers needs --dledger")
    if args.followers and args.protocol:
        ap.error("--followers answers through the bench's channel, not a protocol's")
    if args.follower and (args.dledger or args.protocol or args.java):
        ap.error("--follower takes pushes through the group's protocol: no --dledger, "
                 "--protocol or --java")
    if args.followers or args.follower:  # a group member's loop
        import uvloop

        uvloop.install()
    if args.calls:
        total, rows, writes = asyncio.run(calls(args.reads, args.frames, args.dledger,
                                                args.protocol, args.followers, args.java,
                                                args.follower, args.pushes_file))
        python = sum(c for c, name in rows if ".py:" in name)
        print(f"calls_per_read ({args.frames} frame(s) a read): {total:.1f}, "
              f"Python functions {python:.1f}"
              + (f", transport writes {writes:.2f}" if args.protocol or args.follower else ""))
        for c, name in rows:
            if c >= 0.5:
                print(f"  {c:6.2f} {name}")
        return 0
    if args.instructions:
        per_read = instructions(args.reads, args.frames, args.extra, args.dledger, args.protocol,
                                args.followers, args.java, args.gc_freeze, args.main_thread,
                                args.follower)
        print(f"instructions_per_read ({args.frames} frame(s) a read): {per_read:,.0f}")
        return 0
    import uvloop

    uvloop.install()
    got = asyncio.run(measure(args.reads, args.frames, args.repeats,
                              not args.no_bracket and not args.dledger and not args.follower,
                              args.dledger, args.protocol, args.followers, args.java,
                              args.gc_freeze, args.follower, args.pushes_file))
    for key, values in got.items():
        if not values and key == "begin_end_us" and (args.no_bracket or args.dledger or
                                                     args.follower):
            continue
        if not values:
            print(f"{key}: no repeat was taken whole by the lane")
            continue
        print(f"{key} ({args.frames} frame(s) a read): best {min(values):.2f}, median "
              f"{statistics.median(values):.2f} ({', '.join(f'{v:.2f}' for v in values)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
