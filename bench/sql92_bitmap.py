"""SQL92 pulls with and without the consume queue's bloom-filter bitmaps
(enableConsumeQueueExt + enableCalcFilterBitMap), in the store, no network.

The same messages (1 KiB bodies, property ``a`` = 0..N-1) go into two stores:
a plain one, and one with ext files whose dispatch computes each message's
bitmap over ``--groups`` SQL92 groups.  Then one group, whose selector matches
``--match`` percent of the messages, drains the queue as the pull processor
does: ``get_message`` with the consume-queue filter (the bitmap filter, or
none), then the commit-log step (``filter_result``) on what comes back.

    .venv/bin/python bench/sql92_bitmap.py [--messages N] [--match PCT] [--groups G]

Prints puts/s of each store and, for the drain, messages read from the commit
log, pulls made and wall time; the figure that matters is the ratio.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time

HOST = ("127.0.0.1", 10911)


def _open_store(root: str, ext: bool, calc):
    from rmq.store import DefaultMessageStore, MessageStoreConfig

    cfg = MessageStoreConfig(storePathRootDir=root, mappedFileSizeCommitLog=256 * 1024 * 1024,
                             messageIndexEnable=False, enableConsumeQueueExt=ext)
    store = DefaultMessageStore(cfg, HOST)
    store.bitmap_calculator = calc
    assert store.load()
    store.start()
    return store


def _filter_manager(root: str, groups: int, match_below: int):
    from rmq.broker.config import BrokerConfig
    from rmq.broker.consumer_filter_manager import ConsumerFilterManager

    cfm = ConsumerFilterManager(BrokerConfig(enableCalcFilterBitMap=True), root)
    cfm.register("T", "g0", f"a < {match_below}", "SQL92", 1)
    for g in range(1, groups):  # the other groups match other slices
        cfm.register("T", f"g{g}", f"a >= {g * 1000} AND a < {g * 1000 + match_below}", "SQL92", 1)
    for groups_of_topic in cfm.filter_data_by_topic.values():
        for data in groups_of_topic.values():
            data.bornTime = 0
    return cfm


def _put_all(store, count: int) -> float:
    from rmq.store import MessageExtBrokerInner
    from rmq.store.message_codec import message_properties_to_string

    body = b"b" * 1024
    start = time.perf_counter()
    for i in range(count):
        props = {"UNIQ_KEY": f"{i:032X}", "a": str(i)}
        msg = MessageExtBrokerInner(topic="T", queue_id=0, body=body, properties=props,
                                    properties_string=message_properties_to_string(props),
                                    born_timestamp=0, born_host=("127.0.0.1", 5000))
        assert store.put_message(msg).status.name == "PUT_OK"
    return count / (time.perf_counter() - start)


def _drain(store, cq_filter, record_filter) -> dict:
    from rmq.filter.message_filter import filter_result
    from rmq.store.results import GetMessageStatus

    offset = pulls = read = kept = 0
    start = time.perf_counter()
    while True:
        g = store.get_message("g0", "T", 0, offset, 32, None, cq_filter)
        pulls += 1
        if g.status is GetMessageStatus.FOUND:
            read += g.message_count
            filter_result(g, record_filter)
            kept += g.message_count
        g.release()
        if g.next_begin_offset == offset or g.status is GetMessageStatus.OFFSET_OVERFLOW_ONE:
            break
        offset = g.next_begin_offset
    return {"seconds": time.perf_counter() - start, "pulls": pulls, "read": read, "kept": kept}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--match", type=float, default=1.0, help="percent of messages the group matches")
    ap.add_argument("--groups", type=int, default=8, help="SQL92 groups of the topic (bitmap work per put)")
    args = ap.parse_args()
    from rmq.client.heartbeat import build_subscription

    match_below = int(args.messages * args.match / 100)
    root = tempfile.mkdtemp(prefix="rmq-bitmap-")
    try:
        cfm = _filter_manager(root, args.groups, match_below)
        data = cfm.get("T", "g0")
        record_filter = data.compiled.matches
        sub = build_subscription("T", data.expression, "SQL92")
        plain = _open_store(root + "/plain", False, None)
        ext = _open_store(root + "/ext", True, cfm.calc_bitmap)
        try:
            rates = {"plain": _put_all(plain, args.messages), "ext": _put_all(ext, args.messages)}
            runs = {"plain": _drain(plain, None, record_filter),
                    "ext": _drain(ext, cfm.consume_queue_filter("T", "g0", sub, False), record_filter)}
        finally:
            plain.shutdown()
            ext.shutdown()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"{args.messages} messages of 1 KiB, group matches {match_below} ({args.match}%), "
          f"{args.groups} SQL92 groups on the topic")
    for name, label in (("plain", "no ext files"), ("ext", "ext + bitmaps")):
        r = runs[name]
        print(f"  {label:14s} puts {rates[name]:9,.0f}/s   drain {r['seconds'] * 1000:8.1f} ms, "
              f"{r['pulls']:6d} pulls, {r['read']:7d} records read, {r['kept']} kept")
    assert runs["plain"]["kept"] == runs["ext"]["kept"] == match_below
    print(f"  drain speed-up {runs['plain']['seconds'] / runs['ext']['seconds']:.1f}x, "
          f"put cost {rates['plain'] / rates['ext']:.2f}x")


if __name__ == "__main__":
    main()
