"""The ``rmq`` PySpark data source: batch and streaming reads of RocketMQ 4.9 /
rmq messages (store directories or a running cluster) and a sink that sends
rows as messages.  ``register(spark)`` once, then ``format("rmq")``."""

from spark.source.datasource import RmqDataSource, register

__all__ = ["RmqDataSource", "register"]
