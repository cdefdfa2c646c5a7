"""Capacity planning over RocketMQ 4.9 / rmq store directories, on PySpark.

``spark.storefmt`` decodes store files with numpy (no Spark needed),
``spark.job`` runs the decoding on a Spark session and aggregates,
``spark.report`` turns the aggregates into figures, tables and an HTML page,
``spark.capacity`` is the ``rmq-capacity`` command line and
``spark.gen_store`` writes synthetic stores with rmq's own store code.
``spark.source`` is the ``rmq`` data source (messages in and out of Spark,
batch and streaming) and ``spark.pipelines`` holds jobs built on it.
"""
