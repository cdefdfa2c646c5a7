"""A DLedger follower's cost per pushed entry, in one process: a broker that
follows a three-node group (its peers are never started: no elector, no
sockets) is handed APPEND pushes of ``--batch`` entries each, as a leader
writes them (1 KiB bodies, the records of 8 queues, each push committing the
entries of the push before it), through a connection's protocol of its
DLedger remoting server as the event loop hands a read (``serving``: the
group's processor and push lane, as its endpoint serves): the push read
where it lies, the entries appended, the committed ones dispatched to the
consume queues (the reput), the answer's frame written to the connection.

``--instructions`` counts under valgrind's callgrind instead of timing: the
pushes alone run twice, with ``--pushes`` and with ``--pushes`` + ``--extra``
(both runs record the same pushes first), and the difference of the two
totals gives the instructions of one push and of one entry.  The count does
not move with the machine's load, so two trees can be compared while other
work runs.

    .venv/bin/python -m bench.dledger_follow [--pushes 3000] [--batch 4] [--repeats 5]
    .venv/bin/python -m bench.dledger_follow --instructions [--pushes 500] [--extra 3000] \
        [--batch 4]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import shutil
import socket
import statistics
import tempfile
import time
from pathlib import Path

from bench.callgrind import callgrind_total
from rmq.common.topic_config import TopicConfig
from rmq.dledger.entry import Entry
from rmq.dledger.messages import push_append_body
from rmq.dledger.mmap_store import write_entries
from rmq.dledger.protocol import RequestCode
from rmq.remoting.command import RemotingCommand
from rmq.store import message_codec as codec
from rmq.store.config import BrokerRole

TOPIC = "BenchTopic"
QUEUES = 8
GROUP, LEADER, SELF = "g", "n0", "n1"
TERM = 1


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def _follower(root: Path):
    """An initialized broker controller on a fresh store under ``root``,
    following ``LEADER`` in ``TERM`` (the DLedger endpoint not started)."""
    from rmq.broker.controller import BrokerController
    from rmq.broker.startup import parse, prepare_store_paths

    peers = ";".join(f"n{i}-127.0.0.1:{_port()}" for i in range(3))
    conf = root / "broker.conf"
    conf.write_text(f"brokerName=dledger-follow\nlistenPort={_port()}\n"
                    f"storePathRootDir={root}/store\nstorePathCommitLog={root}/store/commitlog\n"
                    "enableDLegerCommitLog=true\n"
                    f"dLegerGroup={GROUP}\ndLegerSelfId={SELF}\ndLegerPeers={peers}\n")
    _args, settings = parse(["-c", str(conf), "-n", "127.0.0.1:1"])
    prepare_store_paths(settings)
    controller = BrokerController(settings)
    if not await controller.initialize():
        raise RuntimeError("the broker did not initialize")
    controller.topic_config_manager.update_topic_config(TopicConfig(TOPIC, QUEUES, QUEUES))
    controller.message_store.start()
    controller.store_config.brokerRole = BrokerRole.SLAVE  # as a follower's role change sets
    server = controller.message_store.commit_log.server
    server.member_state.change_to_follower(TERM, LEADER)
    return controller, server


def serving(server):
    """A DLedger remoting server (not listening) serving ``server``'s
    requests as the group's endpoint does (``DLedgerServer.serve_on``)."""
    from rmq.remoting import RemotingServer
    from rmq.remoting.config import NettyServerConfig

    remoting = RemotingServer(NettyServerConfig(listenPort=0), None, name="dledger")
    server.serve_on(remoting)
    return remoting


def pushes(count: int, batch: int, body_size: int = 1024) -> list[bytes]:
    """The frames of ``count`` APPEND pushes of ``batch`` entries from index
    0, their records written as a leader's lane writes them."""
    scratch = bytearray(64 << 10)
    index = bytearray(batch * 32)
    born = bytes([10, 0, 0, 1, 0, 0, 19, 136])
    host = bytes([127, 0, 0, 1, 0, 0, 42, 75])
    body = b"x" * body_size
    offsets = [0] * QUEUES
    frames, pos, idx = [], 0, 0
    topic = TOPIC.encode()
    for n in range(count):
        sends = []
        for _ in range(batch):
            qid = idx % QUEUES
            props = codec.message_properties_to_string(
                {"UNIQ_KEY": f"{idx:032X}", "WAIT": "true"}).encode()
            sends.append((topic, qid, 0, offsets[qid], 0, 1_700_000_000_000 + idx, 0, body,
                          props, codec.record_size(0, len(body), len(topic), len(props))))
            offsets[qid] += 1
            idx += 1
        entries, used, _ = write_entries(scratch, 0, pos, len(scratch), index, 0, len(index),
                                          idx - batch, TERM, born, host, 1_700_000_000_000,
                                          sends, Entry)
        pos += used
        first = entries[0].index
        cmd = RemotingCommand.create_request(RequestCode.PUSH, None)
        cmd.opaque = n + 1
        cmd.body = push_append_body(GROUP, LEADER, SELF, LEADER, TERM, first - 1, entries, True)
        frames.append(cmd.encode())
    return frames


async def run(count: int, batch: int, repeats: int, recorded: int = 0) -> list[float]:
    """CPU µs per entry of each repeat (a fresh follower each) of the first
    ``count`` of ``recorded`` pushes."""
    from bench.connection import Connection

    frames = pushes(max(count, recorded), batch)[:count]
    per_entry = []
    for _ in range(repeats):
        root = Path(tempfile.mkdtemp(prefix="dledger-follow-"))
        controller, server = await _follower(root)
        try:
            connection = Connection(serving(server))
            gc.collect()
            t0 = time.process_time_ns()
            for frame in frames:
                connection.serve(None, frame, 0, len(frame))
            spent = time.process_time_ns() - t0
            store = server.store
            last = connection.transport.last
            if store.ledger_end_index != count * batch - 1 or b'"code":200,' not in last:
                raise RuntimeError(f"end {store.ledger_end_index}, last answer {last[-200:]!r}")
            queued = sum(controller.message_store.get_max_offset_in_queue(TOPIC, q)
                         for q in range(QUEUES))
            if queued != (count - 1) * batch:  # the last push's entries are not committed
                raise RuntimeError(f"{queued} entries in the consume queues")
            per_entry.append(spent / (count * batch) / 1000)
        finally:
            await controller.shutdown()
            shutil.rmtree(root, ignore_errors=True)
    return per_entry


def _callgrind_total(count: int, batch: int, recorded: int) -> int:
    """Instructions of a whole run of the pushes under callgrind."""
    return callgrind_total("bench.dledger_follow", [
        "--pushes", str(count), "--batch", str(batch), "--repeats", "1",
        "--recorded", str(recorded)])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pushes", type=int, default=3000)
    ap.add_argument("--batch", type=int, default=4, help="entries a push")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--instructions", action="store_true",
                    help="count instructions per entry under callgrind instead of timing")
    ap.add_argument("--recorded", type=int, default=0,
                    help="pushes recorded before the run (at least --pushes)")
    ap.add_argument("--extra", type=int, default=3000,
                    help="pushes the second --instructions run adds")
    args = ap.parse_args(argv)
    if args.instructions:
        if shutil.which("valgrind") is None:
            raise SystemExit("--instructions needs valgrind")
        recorded = args.pushes + args.extra
        low = _callgrind_total(args.pushes, args.batch, recorded)
        high = _callgrind_total(args.pushes + args.extra, args.batch, recorded)
        per_push = (high - low) / args.extra
        print(f"instructions_per_push ({args.batch} entries a push): {per_push:,.0f}, "
              f"per entry {per_push / args.batch:,.0f}")
        return 0
    got = asyncio.run(run(args.pushes, args.batch, args.repeats, args.recorded))
    print(f"cpu_us_per_entry ({args.batch} entries a push): best {min(got):.2f}, median "
          f"{statistics.median(got):.2f} ({', '.join(f'{v:.2f}' for v in got)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
