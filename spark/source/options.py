"""The options of the ``rmq`` data source, read once and checked.

Spark hands a data source its options as a case-insensitive map of strings;
:func:`source_options` and :func:`sink_options` turn it into typed settings
and reject what cannot work with one message naming the option (an
:class:`OptionError`, which Spark shows as the cause of the failed query).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from rmq.common.topics import validate_topic

DEFAULT_SOURCE_GROUP = "rmq-spark-source"
DEFAULT_SINK_GROUP = "rmq-spark-sink"
EARLIEST = -2  # in a startingOffsets JSON, as Kafka's source spells them
LATEST = -1


class OptionError(ValueError):
    """A bad or missing option of the rmq data source."""


@dataclass(slots=True)
class SourceOptions:
    """What the batch and streaming readers need (docs/spark.md lists each option)."""

    paths: list[str] = field(default_factory=list)
    namesrv: str | None = None
    topics: list[str] = field(default_factory=list)
    group: str = DEFAULT_SOURCE_GROUP
    commit_offsets: bool = False
    max_messages_per_partition: int = 100_000
    max_bytes_per_partition: int = 64 << 20
    pull_batch_size: int = 32
    fail_on_data_loss: bool = True
    retry_timeout_ms: int = 60_000
    request_timeout_ms: int = 10_000
    starting_offsets: str | dict = "latest"
    starting_timestamp: int | None = None
    max_offsets_per_trigger: int | None = None


@dataclass(slots=True)
class SinkOptions:
    namesrv: str = ""
    topic: str | None = None
    group: str = DEFAULT_SINK_GROUP
    batch_size: int = 32
    batch_max_bytes: int = 1 << 20
    max_in_flight: int = 4
    send_retries: int = 3
    send_timeout_ms: int = 3000
    retry_backoff_ms: int = 500


def _int(options: Mapping[str, str], name: str, default: int | None, minimum: int = 1) -> int | None:
    raw = options.get(name)
    if raw is None or str(raw).strip() == "":
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise OptionError(f"rmq: option {name} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise OptionError(f"rmq: option {name} must be at least {minimum}, got {value}")
    return value


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = options.get(name)
    if raw is None:
        return default
    text = str(raw).strip().lower()
    if text not in ("true", "false"):
        raise OptionError(f"rmq: option {name} must be true or false, got {raw!r}")
    return text == "true"


def _topics(raw: str | None) -> list[str]:
    topics = [t.strip() for t in (raw or "").split(",") if t.strip()]
    for t in topics:
        err = validate_topic(t)
        if err:
            raise OptionError(f"rmq: option topic: {err}")
    return topics


def _paths(options: Mapping[str, str]) -> list[str]:
    """``load(path)`` passes ``path``; ``load([a, b])`` passes ``paths`` as a JSON list."""
    out = []
    if options.get("paths"):
        try:
            listed = json.loads(options["paths"])
        except ValueError:
            listed = [p for p in str(options["paths"]).split(",") if p]
        out.extend(str(p) for p in (listed if isinstance(listed, list) else [listed]))
    if options.get("path"):
        out.append(str(options["path"]))
    return out


def _starting(raw: str | None, default: str) -> str | dict:
    """``earliest``, ``latest`` or a JSON object {topic: {broker: {queueId: offset}}}
    (offset -2 = earliest, -1 = latest for that queue)."""
    text = (raw or default).strip()
    if text.lower() in ("earliest", "latest"):
        return text.lower()
    try:
        table = json.loads(text)
    except ValueError:
        table = None
    ok = isinstance(table, dict) and all(
        isinstance(brokers, dict) and all(
            isinstance(queues, dict) and all(
                str(q).lstrip("-").isdigit() and isinstance(o, int) and o >= EARLIEST
                for q, o in queues.items())
            for queues in brokers.values())
        for brokers in table.values())
    if not ok:
        raise OptionError("rmq: option startingOffsets must be earliest, latest or JSON like "
                          '{"Topic": {"broker-a": {"0": 42, "1": -2}}} (-2 earliest, -1 latest), '
                          f"got {text!r}")
    return table


def source_options(options: Mapping[str, str], streaming: bool) -> SourceOptions:
    """The reader settings; a store read needs paths, a live read ``namesrv`` and ``topic``."""
    o = SourceOptions(paths=_paths(options), namesrv=(options.get("namesrv") or "").strip() or None,
                      topics=_topics(options.get("topic")))
    if o.paths and o.namesrv:
        raise OptionError("rmq: give either store paths (load(path)) or namesrv, not both")
    if streaming and not o.namesrv:
        raise OptionError("rmq: a streaming read needs the namesrv option (a running cluster)")
    if not o.paths and not o.namesrv:
        raise OptionError("rmq: give store directories (load(path)) or the namesrv option")
    if o.namesrv and not o.topics:
        raise OptionError("rmq: reading from namesrv needs the topic option (one or more topics, "
                          "comma-separated)")
    if options.get("group"):
        o.group = str(options["group"]).strip()
        o.commit_offsets = _bool(options, "commitOffsets", True)
    o.max_messages_per_partition = _int(options, "maxMessagesPerPartition", o.max_messages_per_partition)
    o.max_bytes_per_partition = _int(options, "maxBytesPerPartition", o.max_bytes_per_partition)
    o.pull_batch_size = _int(options, "pullBatchSize", o.pull_batch_size)
    o.fail_on_data_loss = _bool(options, "failOnDataLoss", True)
    o.retry_timeout_ms = _int(options, "retryTimeoutMs", o.retry_timeout_ms, 0)
    o.request_timeout_ms = _int(options, "requestTimeoutMs", o.request_timeout_ms)
    o.starting_offsets = _starting(options.get("startingOffsets"), "latest" if streaming else "earliest")
    o.starting_timestamp = _int(options, "startingTimestamp", None, 0)
    o.max_offsets_per_trigger = _int(options, "maxOffsetsPerTrigger", None)
    return o


def sink_options(options: Mapping[str, str]) -> SinkOptions:
    namesrv = (options.get("namesrv") or "").strip()
    if not namesrv:
        raise OptionError("rmq: writing needs the namesrv option")
    topics = _topics(options.get("topic"))
    if len(topics) > 1:
        raise OptionError("rmq: a sink writes to one topic option, got " + ",".join(topics))
    o = SinkOptions(namesrv=namesrv, topic=topics[0] if topics else None)
    o.group = (options.get("producerGroup") or o.group).strip()
    o.batch_size = _int(options, "batchSize", o.batch_size)
    o.batch_max_bytes = _int(options, "batchMaxBytes", o.batch_max_bytes)
    o.max_in_flight = _int(options, "maxInFlight", o.max_in_flight)
    o.send_retries = _int(options, "sendRetries", o.send_retries, 0)
    o.send_timeout_ms = _int(options, "sendTimeoutMs", o.send_timeout_ms)
    o.retry_backoff_ms = _int(options, "retryBackoffMs", o.retry_backoff_ms, 0)
    return o
