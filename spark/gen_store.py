"""Synthetic broker stores for tests and demos, written by rmq's own store.

    python -m spark.gen_store DIR [--messages N] [--hours H] [--seed S]
                              [--commitlog-file-size BYTES] [--truth FILE.parquet]

Several topics with different weights and body sizes, skewed queues, a daily
rate curve with one peak hour, a retry topic with reconsume times, consumer
groups at different lag (one consuming, one stalled, one caught up, one that
never committed), and the broker's config JSON files in their 4.9.8 shapes.
Messages are appended through ``rmq.store.DefaultMessageStore`` (batches of
one topic-queue, like SEND_BATCH_MESSAGE), so every byte on disk is what the
broker itself would write.  The store stamps its own store time; to spread a
few seconds of generation over hours, the generator drives the commit log's
clock (see ``_store_clock``).

``generate`` returns the ground truth: one row per message as the store
reported it (topic, queue, queue offset, physical offset, record size, store
and born time, reconsume times) plus the committed offsets it wrote.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import struct
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from rmq.common import fastjson
from rmq.common.message import PROPERTY_TAGS, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
from rmq.store import commit_log as _commit_log
from rmq.store.config import MessageStoreConfig
from rmq.store.default_message_store import DefaultMessageStore
from rmq.store.message import MessageExtBatch
from rmq.store.message_codec import message_properties_to_string

HOUR_MS = 3_600_000


@dataclass(slots=True)
class TopicSpec:
    name: str
    queues: int
    weight: float
    body_min: int
    body_max: int
    skew: float = 0.0  # 0 = uniform queues; larger = first queues busier
    reconsume: bool = False


@dataclass(slots=True)
class GroupSpec:
    name: str
    topic: str
    consumed: float  # fraction of each queue consumed
    progress: int  # messages per queue consumed between the .bak and the current file (0 = stalled)


@dataclass(slots=True)
class GenSpec:
    messages: int = 20000
    hours: float = 6.0
    start_ms: int = 1_700_000_000_000 - 1_700_000_000_000 % HOUR_MS
    seed: int = 7
    batch: int = 32
    broker_name: str = "broker-a"
    store_host: tuple[str, int] = ("10.0.0.2", 10911)
    commitlog_file_size: int = 4 * 1024 * 1024
    cq_file_size: int = 60_000
    index_slots: int = 5_000
    index_entries: int = 20_000
    peak_hour: int = 2
    file_reserved_time: int = 48
    flush_consumer_offset_interval: int = 5000
    topics: list[TopicSpec] = field(default_factory=lambda: [
        TopicSpec("OrderEvents", 8, 0.5, 200, 1200, skew=1.0),
        TopicSpec("Payments", 4, 0.3, 80, 300),
        TopicSpec("Audit", 2, 0.15, 1000, 4000, skew=0.3),
        TopicSpec("%RETRY%billing", 1, 0.05, 200, 400, reconsume=True),
    ])
    groups: list[GroupSpec] = field(default_factory=lambda: [
        GroupSpec("billing", "OrderEvents", 0.6, 25),
        GroupSpec("billing", "%RETRY%billing", 1.0, 0),
        GroupSpec("analytics", "Payments", 0.3, 0),
        GroupSpec("archiver", "Audit", 1.0, 0),
    ])
    idle_groups: list[str] = field(default_factory=lambda: ["reporting"])


@dataclass(slots=True)
class Truth:
    """What the generator wrote, as the store reported it."""

    messages: pd.DataFrame
    offsets: pd.DataFrame  # topic, group, queueId, offset, previousOffset
    spec: GenSpec


@contextlib.contextmanager
def _store_clock(now: list[int]) -> Iterator[None]:
    """Make the commit log stamp ``now[0]`` as store time while generating.

    rmq.store has no injectable clock yet; the commit log takes its store
    timestamp from its module-level ``_now_ms``.  Swapping that function for
    the duration of the generation is the smallest hook that works today.
    """
    saved = _commit_log._now_ms
    _commit_log._now_ms = lambda: now[0]
    try:
        yield
    finally:
        _commit_log._now_ms = saved


def _rate_curve(spec: GenSpec, rng: np.random.Generator) -> np.ndarray:
    """Store timestamps (sorted) of ``spec.messages`` messages over ``spec.hours``."""
    n_hours = max(1, int(np.ceil(spec.hours)))
    weights = 1.0 + 0.5 * np.sin(np.arange(n_hours) / max(1, n_hours) * 2 * np.pi)
    weights[min(spec.peak_hour, n_hours - 1)] *= 3.0
    per_hour = rng.multinomial(spec.messages, weights / weights.sum())
    span = int(spec.hours * HOUR_MS)
    ts = [spec.start_ms + h * HOUR_MS + rng.integers(0, min(HOUR_MS, span - h * HOUR_MS), k)
          for h, k in enumerate(per_hour)]
    return np.sort(np.concatenate(ts)) if ts else np.empty(0, np.int64)


def _wire_batch(bodies: list[bytes], props: list[bytes]) -> bytes:
    """SEND_BATCH_MESSAGE body: per message size, magic 0, crc 0, flag, body, properties."""
    out = bytearray()
    for body, prop in zip(bodies, props, strict=True):
        size = 20 + len(body) + 2 + len(prop)
        out += struct.pack(">iiiii", size, 0, 0, 0, len(body)) + body + struct.pack(">h", len(prop)) + prop
    return bytes(out)


def store_config(root: str, spec: GenSpec) -> MessageStoreConfig:
    return MessageStoreConfig(
        storePathRootDir=root, mappedFileSizeCommitLog=spec.commitlog_file_size,
        mappedFileSizeConsumeQueue=spec.cq_file_size, maxHashSlotNum=spec.index_slots,
        maxIndexNum=spec.index_entries, fileReservedTime=spec.file_reserved_time,
    )


def generate(root: str, spec: GenSpec | None = None, keep_truth: bool = True) -> Truth:
    """Write a store under ``root`` (which must not hold one yet) and its config files."""
    spec = spec or GenSpec()
    rng = np.random.default_rng(spec.seed)
    os.makedirs(root, exist_ok=True)
    times = _rate_curve(spec, rng)
    weights = np.array([t.weight for t in spec.topics])
    store = DefaultMessageStore(store_config(root, spec), store_host=spec.store_host)
    if not store.load():
        raise RuntimeError(f"store under {root} failed to load")
    now = [int(times[0]) if times.size else spec.start_ms]
    max_offsets: dict[tuple[str, int], int] = {}
    cols: dict[str, list] = {k: [] for k in ("topic", "queueId", "queueOffset", "physicalOffset", "size",
                                             "storeTimestamp", "bornTimestamp", "reconsumeTimes")}
    with _store_clock(now):
        store.start()
        try:
            i = 0
            counter = 0
            while i < times.size:
                k = min(int(rng.integers(1, spec.batch + 1)), times.size - i)
                t = spec.topics[int(rng.choice(len(spec.topics), p=weights / weights.sum()))]
                qw = np.exp(-t.skew * np.arange(t.queues) / max(1, t.queues - 1))
                qid = int(rng.choice(t.queues, p=qw / qw.sum()))
                now[0] = int(times[i + k - 1])
                born = now[0] - int(rng.integers(0, 50))
                reconsume = int(rng.integers(1, 4)) if t.reconsume else 0
                bodies = [rng.bytes(int(n)) for n in rng.integers(t.body_min, t.body_max + 1, k)]
                props = []
                for _ in range(k):
                    counter += 1
                    props.append(message_properties_to_string({
                        PROPERTY_TAGS: f"tag{counter % 3}",
                        PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: f"0A000001{counter:024X}",
                    }).encode())
                batch = MessageExtBatch(
                    topic=t.name, queue_id=qid, body=_wire_batch(bodies, props), born_timestamp=born,
                    born_host=("10.0.0.1", 50000), store_host=spec.store_host, reconsume_times=reconsume,
                    properties={"CLUSTER": "DefaultCluster"}, properties_string="CLUSTER\x01DefaultCluster")
                res = store.put_messages(batch)
                if not res.is_ok():
                    raise RuntimeError(f"store refused a batch: {res.status}")
                ar = res.append_result
                max_offsets[(t.name, qid)] = ar.logics_offset + k
                if keep_truth:
                    sizes = np.asarray(ar.sizes if ar.sizes is not None else [ar.wrote_bytes], np.int64)
                    cols["topic"] += [t.name] * k
                    cols["queueId"] += [qid] * k
                    cols["queueOffset"] += range(ar.logics_offset, ar.logics_offset + k)
                    cols["physicalOffset"] += list(ar.wrote_offset + np.concatenate([[0], np.cumsum(sizes)[:-1]]))
                    cols["size"] += list(sizes)
                    cols["storeTimestamp"] += [ar.store_timestamp] * k
                    cols["bornTimestamp"] += [born] * k
                    cols["reconsumeTimes"] += [reconsume] * k
                i += k
        finally:
            store.shutdown()
    messages = pd.DataFrame(cols).astype({"queueId": "int32", "queueOffset": "int64", "physicalOffset": "int64",
                                          "size": "int64", "storeTimestamp": "int64", "bornTimestamp": "int64"})
    offsets = write_configs(root, spec, max_offsets)
    return Truth(messages, offsets, spec)


def write_configs(root: str, spec: GenSpec, max_offsets: dict[tuple[str, int], int]) -> pd.DataFrame:
    """topics.json, subscriptionGroup.json, consumerOffset.json (+ .bak), delayOffset.json
    and config/broker.properties, in the shapes the 4.9.8 broker writes."""
    cfg = os.path.join(root, "config")
    os.makedirs(cfg, exist_ok=True)
    version = {"counter": 1, "timestamp": spec.start_ms}
    topics = {t.name: {"order": False, "perm": 6, "readQueueNums": t.queues, "topicFilterType": "SINGLE_TAG",
                       "topicName": t.name, "topicSysFlag": 0, "writeQueueNums": t.queues} for t in spec.topics}
    groups = sorted({g.name for g in spec.groups} | set(spec.idle_groups))
    subs = {g: {"brokerId": 0, "consumeBroadcastEnable": True, "consumeEnable": True, "consumeFromMinEnable": True,
                "groupName": g, "notifyConsumerIdsChangedEnable": True, "retryMaxTimes": 16,
                "retryQueueNums": 1, "whichBrokerWhenConsumeSlowly": 1} for g in groups}
    rows, current, previous = [], {}, {}
    for g in spec.groups:
        t = next(t for t in spec.topics if t.name == g.topic)
        key = f"{g.topic}@{g.name}"
        current[key], previous[key] = {}, {}
        for q in range(t.queues):
            top = max_offsets.get((g.topic, q), 0)
            off = int(top * g.consumed)
            prev = max(0, off - g.progress)
            current[key][q], previous[key][q] = off, prev
            rows.append((g.topic, g.name, q, off, prev))
    files = {
        "topics.json": {"dataVersion": version, "topicConfigTable": topics},
        "subscriptionGroup.json": {"dataVersion": version, "subscriptionGroupTable": subs},
        "consumerOffset.json": {"offsetTable": current},
        "consumerOffset.json.bak": {"offsetTable": previous},
        "delayOffset.json": {"offsetTable": {}},
    }
    for name, obj in files.items():
        with open(os.path.join(cfg, name), "wb") as fh:
            fh.write(fastjson.dumps(obj))
    with open(os.path.join(cfg, "broker.properties"), "w", encoding="utf-8") as fh:
        fh.write(f"brokerName={spec.broker_name}\nmappedFileSizeCommitLog={spec.commitlog_file_size}\n"
                 f"mappedFileSizeConsumeQueue={spec.cq_file_size}\nmaxHashSlotNum={spec.index_slots}\n"
                 f"maxIndexNum={spec.index_entries}\nfileReservedTime={spec.file_reserved_time}\n"
                 f"flushConsumerOffsetInterval={spec.flush_consumer_offset_interval}\n")
    return pd.DataFrame(rows, columns=["topic", "group", "queueId", "offset", "previousOffset"])


def main(argv: list[str] | None = None) -> int:
    d = GenSpec()
    p = argparse.ArgumentParser(prog="python -m spark.gen_store", description=__doc__.split("\n\n")[0])
    p.add_argument("root", help="store root directory to create")
    p.add_argument("--messages", type=int, default=d.messages)
    p.add_argument("--hours", type=float, default=d.hours)
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--broker-name", default=d.broker_name)
    p.add_argument("--commitlog-file-size", type=int, default=d.commitlog_file_size)
    p.add_argument("--cq-file-size", type=int, default=d.cq_file_size)
    p.add_argument("--truth", help="write the ground truth messages to this Parquet file")
    args = p.parse_args(argv)
    if os.path.exists(os.path.join(args.root, "commitlog")):
        print(f"gen_store: {args.root} already holds a store", file=sys.stderr)
        return 2
    spec = GenSpec(messages=args.messages, hours=args.hours, seed=args.seed, broker_name=args.broker_name,
                   commitlog_file_size=args.commitlog_file_size, cq_file_size=args.cq_file_size)
    truth = generate(args.root, spec, keep_truth=True)
    if args.truth:
        truth.messages.to_parquet(args.truth, index=False)
    print(f"wrote {len(truth.messages)} messages to {args.root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
