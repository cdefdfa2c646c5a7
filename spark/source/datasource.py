"""The ``rmq`` PySpark data source (pyspark 4's Python Data Source API).

``spark.read.format("rmq").load(store_dir, ...)`` reads broker store
directories (:mod:`spark.source.store`); ``.option("namesrv", ...)
.option("topic", ...)`` reads a running cluster by pulls
(:mod:`spark.source.live`); ``spark.readStream.format("rmq")`` is a
micro-batch source over a cluster (:mod:`spark.source.stream`); both
``write`` and ``writeStream`` send rows as messages (:mod:`spark.source.sink`).
docs/spark.md lists the options.

Spark calls ``reader``/``partitions`` in a Python worker beside the driver
and ``read`` in executors: each object here is pickled there, so it holds
only options and plain values, never a connection.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    Filter,
    InputPartition,
)
from pyspark.sql.types import StructType

from spark.source import live, store
from spark.source.filters import Bounds, push
from spark.source.options import SourceOptions, sink_options, source_options
from spark.source.rows import SCHEMA_DDL
from spark.source.sink import RmqStreamWriter, RmqWriter, check_schema
from spark.source.stream import RmqStreamReader
from spark.source.workers import ensure_worker_python


class RmqDataSource(DataSource):
    """Messages of RocketMQ 4.9 / rmq brokers: read from store files or a
    cluster, in batch or streaming, and written back as messages."""

    @classmethod
    def name(cls) -> str:
        return "rmq"

    def schema(self) -> str:
        return SCHEMA_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        return RmqBatchReader(source_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return RmqStreamReader(source_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        o = sink_options(self.options)
        check_schema(schema, o)
        return RmqWriter(o)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        o = sink_options(self.options)
        check_schema(schema, o)
        return RmqStreamWriter(o)


class RmqBatchReader(DataSourceReader):
    """One read of store directories or of a cluster: plans queue ranges
    (filters pushed down, see :mod:`spark.source.filters`) and reads them."""

    def __init__(self, options: SourceOptions) -> None:
        self.o = options
        self.bounds = Bounds()
        if options.topics:
            self.bounds.restrict("topics", options.topics)

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        return push(self.bounds, filters)

    def partitions(self) -> list[InputPartition]:
        if self.bounds.empty():
            return []
        if self.o.namesrv:
            return list(live.plan(self.o, self.bounds))
        return list(store.plan(store.open_stores(self.o.paths), self.bounds,
                               self.o.max_messages_per_partition, self.o.max_bytes_per_partition))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if partition.value is None:  # Spark's stand-in when there is nothing to read
            return iter(())
        if isinstance(partition, live.LiveRange):
            return live.read_range(partition, self.o)
        return store.read_range(partition, self.o.fail_on_data_loss)


def register(spark) -> None:
    """Make ``format("rmq")`` known to ``spark`` and let it push filters into
    the source (``spark.sql.python.filterPushdown.enabled``; without it Spark
    refuses a Python source that can take filters).

    First makes sure Spark's Python workers can import rmq (see
    :mod:`spark.source.workers`): a local session left on ``python3`` from
    PATH takes this interpreter; a worker Python without rmq is one clear
    :class:`~spark.source.workers.WorkerPythonError` here, before any job."""
    ensure_worker_python(spark)
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    spark.dataSource.register(RmqDataSource)
