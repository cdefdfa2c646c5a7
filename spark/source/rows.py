"""The rows of the ``rmq`` data source: one per stored message, the same
columns whether it was read from store files or pulled from a broker.

Both paths decode records with :func:`rmq.client.codec.decode_messages`
(bodies inflated, ``msgId`` = the client's UNIQ_KEY or else the broker's
offset id, hosts as ``ip:port``), so a store read and a live read of the same
messages give equal rows.  Timestamps become Spark timestamps (UTC, the
record's milliseconds); the rest keeps RocketMQ's types.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from rmq.client.message import MessageExt
from rmq.common.message import (
    PROPERTY_KEYS,
    PROPERTY_MAX_OFFSET,
    PROPERTY_MIN_OFFSET,
    PROPERTY_TAGS,
)

SCHEMA_DDL = (
    "topic string, brokerName string, queueId int, queueOffset long, commitLogOffset long, "
    "bornTimestamp timestamp, storeTimestamp timestamp, bornHost string, storeHost string, "
    "tags string, keys string, msgId string, reconsumeTimes int, "
    "properties map<string,string>, body binary"
)
_TS = pa.timestamp("us", tz="UTC")
ARROW_SCHEMA = pa.schema([
    ("topic", pa.string()), ("brokerName", pa.string()), ("queueId", pa.int32()),
    ("queueOffset", pa.int64()), ("commitLogOffset", pa.int64()),
    ("bornTimestamp", _TS), ("storeTimestamp", _TS), ("bornHost", pa.string()),
    ("storeHost", pa.string()), ("tags", pa.string()), ("keys", pa.string()),
    ("msgId", pa.string()), ("reconsumeTimes", pa.int32()),
    ("properties", pa.map_(pa.string(), pa.string())), ("body", pa.binary()),
])
# what a pull response adds to every message's properties (the Java client
# does the same); not part of the stored message, so not part of a row
PULL_ONLY_PROPERTIES = (PROPERTY_MIN_OFFSET, PROPERTY_MAX_OFFSET)
BATCH_ROWS = 4096  # rows per Arrow batch handed to Spark


def to_batch(msgs: Sequence[MessageExt], broker_name: str) -> pa.RecordBatch:
    """One Arrow batch of ``msgs`` (all from the broker ``broker_name``)."""
    n = len(msgs)
    props = [m.properties for m in msgs]
    columns = [
        pa.array([m.topic for m in msgs], pa.string()),
        pa.array([broker_name] * n, pa.string()),
        pa.array([m.queue_id for m in msgs], pa.int32()),
        pa.array([m.queue_offset for m in msgs], pa.int64()),
        pa.array([m.commit_log_offset for m in msgs], pa.int64()),
        pa.array([m.born_timestamp * 1000 for m in msgs], _TS),
        pa.array([m.store_timestamp * 1000 for m in msgs], _TS),
        pa.array([m.born_host for m in msgs], pa.string()),
        pa.array([m.store_host for m in msgs], pa.string()),
        pa.array([p.get(PROPERTY_TAGS) for p in props], pa.string()),
        pa.array([p.get(PROPERTY_KEYS) for p in props], pa.string()),
        pa.array([m.msg_id for m in msgs], pa.string()),
        pa.array([m.reconsume_times for m in msgs], pa.int32()),
        _map_array(props),
        pa.array([m.body for m in msgs], pa.binary()),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)


def _map_array(maps: list[dict[str, str]]) -> pa.MapArray:
    """The dicts as one Arrow map column, built from flat keys and values (a
    list of item lists per row converts several times slower)."""
    offsets = np.zeros(len(maps) + 1, np.int32)
    np.cumsum(np.fromiter(map(len, maps), np.int32, len(maps)), out=offsets[1:])
    keys = pa.array(list(itertools.chain.from_iterable(maps)), pa.string())
    values = pa.array(list(itertools.chain.from_iterable(m.values() for m in maps)), pa.string())
    return pa.MapArray.from_arrays(pa.array(offsets), keys, values)


def drop_pull_properties(msgs: Sequence[MessageExt]) -> None:
    """Remove what the pull added (MIN_OFFSET, MAX_OFFSET) from each message."""
    for m in msgs:
        p = m.properties
        for key in PULL_ONLY_PROPERTIES:
            p.pop(key, None)
