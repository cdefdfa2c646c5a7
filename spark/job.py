"""The Spark side of the capacity job: list store files, decode them in
executors, aggregate to small tables.

Store files are listed and small files read through the Hadoop FileSystem of
the Spark session, so a store path may be any Hadoop URI (``hdfs://``,
``s3a://``, ``file:``) or a plain local path.  Consume queue and commit log
files are read by Spark's ``binaryFile`` source and decoded inside
``mapInArrow`` with :mod:`spark.storefmt` (numpy over whole files: one Arrow
batch per file, never a Python object per message).  Every aggregate that
comes back to the driver is small: per queue, per size, per minute.
"""

from __future__ import annotations

import dataclasses
import os
import posixpath
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pandas as pd
import pyarrow as pa

from rmq.common import fastjson
from rmq.common import topics as systopics
from rmq.common.properties import apply_properties, parse_properties
from spark import storefmt

Progress = Callable[[str], None]


@dataclass(slots=True)
class StoreSettings:
    """The store settings the report needs, under their broker.conf names (DEFAULTS.md)."""

    brokerName: str = ""
    mappedFileSizeCommitLog: int = 1073741824
    mappedFileSizeConsumeQueue: int = 6000000
    fileReservedTime: int = 72
    diskMaxUsedSpaceRatio: int = 75
    deleteWhen: str = "04"
    storePathCommitLog: str = ""
    flushConsumerOffsetInterval: int = 5000
    maxHashSlotNum: int = 5000000
    maxIndexNum: int = 20000000

    def max_used_ratio(self) -> float:
        """diskMaxUsedSpaceRatio clamped to 10..95 as the store does, as a fraction."""
        return max(10, min(95, self.diskMaxUsedSpaceRatio)) / 100.0


DEFAULT_SOURCE = "4.9.8 default"


@dataclass(slots=True)
class BrokerInput:
    """One broker: its name, store root URI and settings.  ``sources`` says
    where each setting the report uses came from (a file, the store files
    themselves, or 4.9.8's default); ``named_by`` where the name came from."""

    name: str
    root: str
    settings: StoreSettings = field(default_factory=StoreSettings)
    sources: dict[str, str] = field(default_factory=dict)
    disk_size: int | None = None
    named_by: str = "--broker"

    def source(self, key: str) -> str:
        return self.sources.get(key, DEFAULT_SOURCE)


@dataclass(slots=True)
class StoreFile:
    broker: str
    path: str
    kind: str  # commitlog | consumequeue | index | config | checkpoint | other
    length: int
    mtime: int
    topic: str | None = None
    queue_id: int | None = None
    start: int | None = None


# --------------------------------------------------------------------------- Hadoop FS
class HadoopFs:
    """Listing and small reads through the session's Hadoop FileSystem (driver side)."""

    def __init__(self, spark) -> None:
        self.jvm = spark.sparkContext._jvm
        self.conf = spark.sparkContext._jsc.hadoopConfiguration()

    def _fs(self, uri: str):
        path = self.jvm.org.apache.hadoop.fs.Path(uri)
        return path.getFileSystem(self.conf), path

    def qualify(self, uri: str) -> str:
        fs, path = self._fs(uri)
        return fs.makeQualified(path).toString()

    def exists(self, uri: str) -> bool:
        fs, path = self._fs(uri)
        return bool(fs.exists(path))

    def is_dir(self, uri: str) -> bool:
        fs, path = self._fs(uri)
        return bool(fs.exists(path) and fs.getFileStatus(path).isDirectory())

    def list_files(self, uri: str) -> list[tuple[str, int, int]]:
        """(qualified path, length, mtime ms) of every file below ``uri``."""
        fs, path = self._fs(uri)
        if not fs.exists(path):
            return []
        out = []
        it = fs.listFiles(path, True)
        while it.hasNext():
            st = it.next()
            out.append((st.getPath().toString(), int(st.getLen()), int(st.getModificationTime())))
        return out

    def read(self, uri: str, limit: int | None = None) -> bytes:
        """The first ``limit`` bytes of a file (all of it when None)."""
        fs, path = self._fs(uri)
        stream = fs.open(path)
        try:
            io = self.jvm.org.apache.commons.io.IOUtils
            if limit is None:
                return bytes(io.toByteArray(stream))
            n = min(limit, int(fs.getFileStatus(path).getLen()))
            return bytes(io.toByteArray(stream, n))
        finally:
            stream.close()


def classify(broker: BrokerInput, files: list[tuple[str, int, int]], cl_dirs: list[str]) -> list[StoreFile]:
    """Sort a broker's files into the store's kinds (STORE_FORMAT.md section 1)."""
    out = []
    root = broker.root.rstrip("/") + "/"
    for path, length, mtime in files:
        rel = path[len(root):] if path.startswith(root) else None
        name = posixpath.basename(path)
        parent = posixpath.dirname(path)
        if any(parent.rstrip("/") == d.rstrip("/") for d in cl_dirs):
            start = storefmt.file_start(name)
            out.append(StoreFile(broker.name, path, "commitlog" if start is not None else "other",
                                 length, mtime, start=start))
            continue
        parts = rel.split("/") if rel else []
        kind = "other"
        sf = StoreFile(broker.name, path, kind, length, mtime)
        if len(parts) == 4 and parts[0] == "consumequeue" and parts[2].lstrip("-").isdigit():
            start = storefmt.file_start(parts[3])
            if start is not None:
                sf.kind, sf.topic, sf.queue_id, sf.start = "consumequeue", parts[1], int(parts[2]), start
        elif len(parts) == 2 and parts[0] == "index" and len(name) == 17 and name.isdigit():
            sf.kind = "index"
        elif len(parts) == 2 and parts[0] == "config":
            sf.kind = "config"
        elif rel == "checkpoint":
            sf.kind = "checkpoint"
        out.append(sf)
    return out


def load_settings(fs: HadoopFs, broker: BrokerInput, conf_uri: str | None) -> None:
    """The broker's settings, each from the last of: 4.9.8's default, the
    store's config/broker.properties, ``conf_uri`` (--broker-conf), the
    store's config/brokerRuntime.properties (what updateBrokerConfig saved
    when the broker's own file was read-only: the broker applies it over
    that file at start).  Unknown keys are ignored."""
    config = broker.root.rstrip("/") + "/config/"
    candidates = [(config + "broker.properties", "store config/broker.properties"),
                  (conf_uri, f"--broker-conf {conf_uri}"),
                  (config + "brokerRuntime.properties", "store config/brokerRuntime.properties")]
    known = {f.name for f in dataclasses.fields(StoreSettings)}
    for uri, source in candidates:
        if not uri or not fs.exists(uri):
            continue
        props = parse_properties(fs.read(uri).decode("utf-8", "replace"))
        apply_properties(broker.settings, props)
        broker.sources.update((k, source) for k in known & set(props))


def infer_file_sizes(broker: BrokerInput, files: list[StoreFile]) -> None:
    """File sizes no file set: the length of the store's own files (every
    commit log file, and every consume queue file, has the configured size)."""
    for kind, key in (("commitlog", "mappedFileSizeCommitLog"),
                      ("consumequeue", "mappedFileSizeConsumeQueue")):
        lengths = {f.length for f in files if f.kind == kind}
        if key not in broker.sources and len(lengths) == 1:
            setattr(broker.settings, key, lengths.pop())
            broker.sources[key] = f"length of the {kind} files"


def name_from_store(fs: HadoopFs, broker: BrokerInput) -> None:
    """A broker given as a bare directory takes its brokerName from the store:
    a config file that sets it, else topics.json, where the broker keeps a
    topic of its own name (1 read and 1 write queue, the inherit permission
    bit set; its cluster's topic has 16 queues)."""
    if broker.named_by != "directory":
        return
    if broker.settings.brokerName:
        broker.name, broker.named_by = broker.settings.brokerName, broker.source("brokerName")
        return
    for name in ("topics.json", "topics.json.bak"):
        uri = broker.root.rstrip("/") + "/config/" + name
        if not fs.exists(uri):
            continue
        try:
            table = fastjson.loads(fs.read(uri).decode("utf-8", "replace")).get("topicConfigTable")
        except (ValueError, AttributeError):
            continue
        own = [t for t, c in (table or {}).items()
               if isinstance(c, dict) and int(c.get("perm", 0)) & 1 and
               int(c.get("readQueueNums", 0)) == 1 and int(c.get("writeQueueNums", 0)) == 1 and
               not systopics.is_system_topic(t)]
        if len(own) == 1:
            broker.name, broker.named_by = own[0], f"config/{name}"
        return


def commitlog_dirs(fs: HadoopFs, broker: BrokerInput) -> list[str]:
    if broker.settings.storePathCommitLog:
        return [fs.qualify(d.strip()) for d in broker.settings.storePathCommitLog.split(",") if d.strip()]
    return [broker.root.rstrip("/") + "/commitlog"]


# --------------------------------------------------------------------------- executors
def _norm(path: str) -> str:
    """One spelling for local URIs (Spark prints file:/x, Hadoop sometimes file:///x)."""
    return "file:/" + path[len("file:///"):] if path.startswith("file:///") else path


def open_input(uri: str):
    """A random-access file (``read_at``) through Arrow's file systems.

    Local files (``file:`` URIs) are memory-mapped (zero copy, page cache);
    ``hdfs://`` (libhdfs, i.e. Hadoop's own client), ``s3://``/``s3a://``,
    ``gs://`` and ``abfs://`` go through ``pyarrow.fs``.
    """
    if uri.startswith("file:"):
        return pa.memory_map("/" + uri[len("file:"):].lstrip("/"), "r")
    fs, path = _arrow_fs(uri)
    return fs.open_input_file(path)


def _arrow_fs(uri: str):
    import pyarrow.fs as pafs

    return pafs.FileSystem.from_uri("s3://" + uri[len("s3a://"):] if uri.startswith("s3a://") else uri)


def read_file(uri: str):
    """Executor-side read of a whole store file (see :func:`open_input`)."""
    with open_input(uri) as fh:
        return fh.read_buffer()


class ArrowFs:
    """:class:`HadoopFs`'s interface over ``pyarrow.fs``, for code that runs
    without the session's JVM (the planners of the ``rmq`` data source run in
    Python workers).  Local paths come back as ``file:/...`` URIs like
    Hadoop's; other URIs keep their scheme and authority."""

    def qualify(self, uri: str) -> str:
        if uri.startswith("file:"):
            return "file:/" + uri[len("file:"):].lstrip("/")
        if "://" in uri:
            return uri.rstrip("/") or uri
        return "file:" + posixpath.normpath(os.path.abspath(uri))

    def _split(self, uri: str):
        """(file system, path inside it, prefix that turns such a path back into a URI)."""
        uri = self.qualify(uri)
        if uri.startswith("file:"):
            import pyarrow.fs as pafs

            return pafs.LocalFileSystem(), uri[len("file:"):], "file:"
        fs, path = _arrow_fs(uri)
        prefix = uri[: len(uri) - len(path)] if uri.endswith(path) else uri.split("://")[0] + "://"
        return fs, path, prefix

    def _info(self, uri: str):
        fs, path, _ = self._split(uri)
        return fs.get_file_info(path)

    def exists(self, uri: str) -> bool:
        import pyarrow.fs as pafs

        return self._info(uri).type != pafs.FileType.NotFound

    def is_dir(self, uri: str) -> bool:
        import pyarrow.fs as pafs

        return self._info(uri).type == pafs.FileType.Directory

    def list_files(self, uri: str) -> list[tuple[str, int, int]]:
        """(URI, length, mtime ms) of every file below ``uri``."""
        import pyarrow.fs as pafs

        fs, path, prefix = self._split(uri)
        if fs.get_file_info(path).type != pafs.FileType.Directory:
            return []
        out = []
        for info in fs.get_file_info(pafs.FileSelector(path, recursive=True)):
            if info.type == pafs.FileType.File:
                mtime = int(info.mtime.timestamp() * 1000) if info.mtime else 0
                out.append((prefix + info.path, int(info.size), mtime))
        return out

    def read(self, uri: str, limit: int | None = None) -> bytes:
        fs, path, _ = self._split(uri)
        with fs.open_input_stream(path) as fh:
            return fh.read(limit) if limit is not None else fh.read()


ARROW_SCHEMES = ("file:", "hdfs://", "viewfs://", "s3://", "s3a://", "gs://", "abfs://", "abfss://")


def file_decoder(cq_meta: dict[str, tuple], cl_meta: dict[str, tuple], cl_min: dict[str, int | None],
                 committed: dict[tuple[str, str, int], list[tuple[str, int]]]):
    """mapInArrow function: rows naming store files (``path``, and ``content``
    when Spark's binaryFile source read them; otherwise the executor reads the
    file itself) -> partial aggregates (:mod:`spark.partials`)."""

    def decode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from spark import partials

        for batch in batches:
            paths = batch.column("path").to_pylist()
            contents = batch.column("content") if "content" in batch.schema.names else None
            for i, path in enumerate(paths):
                key = _norm(path)
                buf = contents[i].as_buffer() if contents is not None else read_file(path)
                buf = buf if buf is not None else b""
                name = posixpath.basename(path)
                if key in cq_meta:
                    broker, topic, qid, start, expected = cq_meta[key]
                    frames = partials.consume_queue(buf, broker, topic, qid, start, expected, cl_min.get(broker),
                                                    committed.get((broker, topic, qid), []), f"{topic}/{qid}/{name}")
                else:
                    broker, start, expected = cl_meta[key]
                    frames = partials.commit_log(buf, broker, start, expected, f"commitlog/{name}")
                yield from partials.to_batches(frames)

    return decode


# --------------------------------------------------------------------------- the scan
@dataclass(slots=True)
class ScanResult:
    """Small tables (pandas) the report is computed from."""

    brokers: list[BrokerInput]
    files: pd.DataFrame
    configs: dict[str, dict[str, object]]
    index_headers: pd.DataFrame
    cq_queues: pd.DataFrame
    size_hist: pd.DataFrame
    cl_queues: pd.DataFrame
    minutes: pd.DataFrame
    offsets: pd.DataFrame
    lag: pd.DataFrame
    issues: list[tuple[str, str]]


CONFIG_FILES = ("topics.json", "consumerOffset.json", "subscriptionGroup.json", "delayOffset.json")


def read_configs(fs: HadoopFs, broker: BrokerInput, files: list[StoreFile],
                 issues: list[tuple[str, str]]) -> dict[str, object]:
    """The broker's config JSON files, falling back to ``.bak`` like ConfigManager."""
    present = {posixpath.basename(f.path): f.path for f in files if f.kind == "config"}
    out: dict[str, object] = {}
    for name in CONFIG_FILES + ("consumerOffset.json.bak",):
        for candidate in (name, name + ".bak") if not name.endswith(".bak") else (name,):
            path = present.get(candidate)
            if path is None:
                continue
            text = fs.read(path).decode("utf-8", "replace")
            if not text.strip():
                continue
            try:
                out[name] = fastjson.loads(text)
                break
            except ValueError as e:
                issues.append((broker.name, f"config/{candidate}: unparsable JSON ({e})"))
    return out


def offsets_table(brokers: list[BrokerInput], configs: dict[str, dict[str, object]]) -> pd.DataFrame:
    """Committed offsets (and the previous persist from the .bak) per group and queue."""
    rows = []
    for b in brokers:
        cfg = configs.get(b.name, {})
        prev = (cfg.get("consumerOffset.json.bak") or {}).get("offsetTable", {})
        for key, table in ((cfg.get("consumerOffset.json") or {}).get("offsetTable", {}) or {}).items():
            topic, _, group = key.partition("@")
            before = prev.get(key, {}) if isinstance(prev, dict) else {}
            for qid, off in (table or {}).items():
                old = before.get(qid) if isinstance(before, dict) else None
                rows.append((b.name, topic, group, int(qid), int(off), None if old is None else int(old)))
    return pd.DataFrame(rows, columns=["broker", "topic", "group", "queueId", "offset", "previousOffset"])


def run_scan(spark, brokers: list[BrokerInput], progress: Progress, conf_uris: dict[str, str | None],
             reader: str = "auto", disk_sizes: dict[str | None, int] | None = None) -> ScanResult:
    """List, decode and aggregate every broker's store."""
    t0 = time.monotonic()
    fs = HadoopFs(spark)
    issues: list[tuple[str, str]] = []
    all_files: list[StoreFile] = []
    configs: dict[str, dict[str, object]] = {}
    index_rows = []
    for b in brokers:
        b.root = fs.qualify(b.root)
        load_settings(fs, b, conf_uris.get(b.name))
        dir_name = b.name
        name_from_store(fs, b)
        if b.name != dir_name and sum(x.name == b.name for x in brokers) > 1:
            b.name, b.named_by = dir_name, "directory (its brokerName is not unique here)"
        if b.disk_size is None:
            b.disk_size = next((v for k, v in (disk_sizes or {}).items() if k in (b.name, dir_name)),
                               (disk_sizes or {}).get(None))
        cl_dirs = commitlog_dirs(fs, b)
        listed = fs.list_files(b.root)
        for d in cl_dirs:
            if not d.startswith(b.root.rstrip("/") + "/"):
                listed += fs.list_files(d)
        files = classify(b, listed, cl_dirs)
        infer_file_sizes(b, files)
        all_files += files
        configs[b.name] = read_configs(fs, b, files, issues)
        for f in files:
            if f.kind == "index":
                head = storefmt.index_header(fs.read(f.path, storefmt.INDEX_HEADER_SIZE))
                if head is None:
                    issues.append((b.name, f"index/{posixpath.basename(f.path)}: shorter than its 40-byte header"))
                    continue
                index_rows.append({"broker": b.name, "file": posixpath.basename(f.path), "length": f.length, **head})
        progress(f"listed {b.name}: {len(files)} files under {b.root}")
    files_df = pd.DataFrame([dataclasses.asdict(f) for f in all_files],
                            columns=[f.name for f in dataclasses.fields(StoreFile)])
    by_name = {b.name: b for b in brokers}

    cq_files = [f for f in all_files if f.kind == "consumequeue"]
    cl_files = [f for f in all_files if f.kind == "commitlog"]
    cq_meta = {_norm(f.path): (f.broker, f.topic, f.queue_id, f.start,
                               _cq_file_size(by_name[f.broker].settings)) for f in cq_files}
    cl_meta = {_norm(f.path): (f.broker, f.start, by_name[f.broker].settings.mappedFileSizeCommitLog)
               for f in cl_files}
    cl_min = {b.name: min((f.start for f in cl_files if f.broker == b.name), default=None) for b in brokers}
    offsets = offsets_table(brokers, configs)
    committed: dict[tuple[str, str, int], list[tuple[str, int]]] = {}
    for r in offsets.itertuples():
        committed.setdefault((r.broker, r.topic, r.queueId), []).append((r.group, r.offset))
    data_files = sorted(cq_files + cl_files, key=lambda f: -f.length)
    if reader == "auto":
        reader = "arrow" if all(f.path.startswith(ARROW_SCHEMES) for f in data_files) else "binaryfile"
    progress(f"decoding {len(cq_files)} consume queue and {len(cl_files)} commit log files "
             f"({sum(f.length for f in data_files) / 2**20:,.0f} MiB, {reader} reader)")
    agg = _aggregate(spark, data_files, reader, file_decoder(cq_meta, cl_meta, cl_min, committed))
    progress(f"decoded and aggregated ({time.monotonic() - t0:.1f}s)")
    part = {k: g for k, g in agg.groupby("kind")}
    empty = agg.iloc[:0]
    q = part.get("q", empty).rename(columns={"c": "entries", "c2": "messages", "b": "bytes", "lo": "minOffsetAll",
                                             "hi": "lastOffset", "lo2": "minOffset"})
    cq_queues = q[["broker", "topic", "queueId", "entries", "messages", "bytes", "minOffsetAll", "lastOffset",
                   "minOffset"]].reset_index(drop=True)
    size_hist = part.get("s", empty).rename(columns={"key": "size", "c": "count"})[
        ["broker", "topic", "queueId", "size", "count"]].reset_index(drop=True)
    lag = part.get("l", empty).rename(columns={"grp": "group", "c": "lagEntries", "b": "lagBytes"})[
        ["broker", "topic", "group", "queueId", "lagEntries", "lagBytes"]].reset_index(drop=True)
    r = part.get("r", empty).rename(columns={"c": "records", "b": "recordBytes", "lo": "firstStoreTime",
                                             "hi": "lastStoreTime", "lo2": "firstBornTime", "hi2": "lastBornTime",
                                             "x": "maxReconsumeTimes"})
    cl_queues = r[["broker", "topic", "queueId", "records", "recordBytes", "firstStoreTime", "lastStoreTime",
                   "firstBornTime", "lastBornTime", "maxReconsumeTimes"]].reset_index(drop=True)
    minutes = part.get("m", empty).rename(columns={"key": "minute", "c": "messages", "b": "bytes"})[
        ["broker", "topic", "minute", "messages", "bytes"]].reset_index(drop=True)
    for row in part.get("i", empty).itertuples():
        issues.append((row.broker, row.issue))
    n_entries = int(cq_queues["entries"].sum()) if len(cq_queues) else 0
    n_records = int(cl_queues["records"].sum()) if len(cl_queues) else 0
    progress(f"{n_entries:,} consume queue entries, {n_records:,} commit log records")
    return ScanResult(brokers, files_df, configs, pd.DataFrame(index_rows), cq_queues, size_hist,
                      cl_queues, minutes, offsets, lag, sorted(set(issues)))


def _aggregate(spark, files: list[StoreFile], reader: str, decoder) -> pd.DataFrame:
    """One Spark job: read every file, decode to partials, merge them.

    ``binaryfile``: Spark's binaryFile source reads the files in the JVM and
    hands their bytes to Python.  ``arrow``: Spark distributes the file names
    (largest first, round-robin over the partitions) and each executor reads
    its files itself (:func:`read_file`), which skips three copies of every
    byte through the JVM.
    """
    from pyspark.sql import functions as F

    from spark.partials import AGG_SCHEMA, KEYS, MAXS, MINS, SUMS

    cols = ([F.sum(c).alias(c) for c in SUMS] + [F.min(c).alias(c) for c in MINS]
            + [F.max(c).alias(c) for c in MAXS])
    if not files:
        return pd.DataFrame({n: pd.Series(dtype="object") for n in AGG_SCHEMA.names})
    if reader == "binaryfile":
        source = spark.read.format("binaryFile").load([f.path for f in files])
    else:
        n = max(1, min(len(files), 4 * spark.sparkContext.defaultParallelism))
        source = spark.createDataFrame([(f.path,) for f in files], "path string").repartition(n)
    parts = source.mapInArrow(decoder, _spark_schema(AGG_SCHEMA))
    df = parts.groupBy(*KEYS).agg(*cols).toPandas()
    for c in SUMS + MINS + MAXS + ("queueId", "key"):
        df[c] = df[c].astype("Int64")
    return df


def _cq_file_size(s: StoreSettings) -> int:
    """mappedFileSizeConsumeQueue rounded up to whole 20-byte entries."""
    n = -(-s.mappedFileSizeConsumeQueue // storefmt.CQ_UNIT)
    return n * storefmt.CQ_UNIT


def _spark_schema(schema: pa.Schema):
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema)


def make_session(master: str = "local[*]", app_name: str = "rmq-capacity", extra: dict | None = None):
    """A SparkSession tuned for this job (arrow batches of a few files, no UI)."""
    import os
    import sys
    import warnings

    from pyspark.sql import SparkSession

    # Executors must run the same interpreter (numpy/pyarrow/rmq importable);
    # an explicit PYSPARK_PYTHON (cluster deployments) wins.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")
    builder = SparkSession.builder.master(master).appName(app_name)
    if master.startswith("local"):
        # a local run serves nobody else: keep the driver (and the JVM's own
        # address lookup, which reads SPARK_LOCAL_IP) off the network
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = (builder.config("spark.driver.host", "127.0.0.1")
                   .config("spark.driver.bindAddress", "127.0.0.1"))
    builder = (builder
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "8")
               .config("spark.sql.execution.arrow.maxRecordsPerBatch", "16")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.driver.memory", "4g"))
    for k, v in (extra or {}).items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
