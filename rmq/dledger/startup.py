"""A DLedger node on its own (DLedger's ``server`` command), for tests, soaks
and trying a group out without brokers:

    python -m rmq.dledger.startup --group g --id n0 \\
        --peers "n0-127.0.0.1:40911;n1-127.0.0.1:40912;n2-127.0.0.1:40913" --store-base-dir DIR

A bad peer list or setting is one line on stderr and exit 1.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from rmq.dledger.config import DLedgerConfig, DLedgerConfigError
from rmq.dledger.protocol import DLedgerError
from rmq.dledger.server import DLedgerServer


def parse_args(argv: list[str] | None) -> DLedgerConfig:
    p = argparse.ArgumentParser(prog="dledger", description="a DLedger group member")
    p.add_argument("--group", default="default")
    p.add_argument("--id", dest="self_id", default="n0")
    p.add_argument("--peers", default="n0-localhost:20911")
    p.add_argument("--store-base-dir", required=True)
    p.add_argument("--preferred-leader", dest="preferred_leader_ids")
    p.add_argument("--enable-batch-push", action="store_true")
    p.add_argument("--heartbeat-ms", type=int, default=2000)
    p.add_argument("--max-heartbeat-leak", type=int, default=3)
    p.add_argument("--min-vote-ms", type=int, default=300)
    p.add_argument("--max-vote-ms", type=int, default=1000)
    p.add_argument("--data-file-size", type=int, default=1024 * 1024 * 1024)
    p.add_argument("--index-file-size", type=int, default=32 * 5 * 1024 * 1024)
    ns = p.parse_args(argv)
    return DLedgerConfig(
        group=ns.group, self_id=ns.self_id, peers=ns.peers, store_base_dir=ns.store_base_dir,
        preferred_leader_ids=ns.preferred_leader_ids, enable_batch_push=ns.enable_batch_push,
        heart_beat_time_interval_ms=ns.heartbeat_ms, max_heart_beat_leak=ns.max_heartbeat_leak,
        min_vote_interval_ms=ns.min_vote_ms, max_vote_interval_ms=ns.max_vote_ms,
        mapped_file_size_for_entry_data=ns.data_file_size,
        mapped_file_size_for_entry_index=ns.index_file_size)


async def serve(config: DLedgerConfig) -> None:
    server = DLedgerServer(config)
    await server.start()
    print(f"dledger {config.self_id} of {config.group} on {config.self_addr}", flush=True)
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await server.shutdown()


def main(argv: list[str] | None = None) -> int:
    config = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    try:
        import uvloop  # the broker's loop: its transports write and read in C

        uvloop.run(serve(config))
    except (DLedgerConfigError, DLedgerError, OSError) as exc:
        print(f"dledger: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
