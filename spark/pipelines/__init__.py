"""Ready Spark jobs over rmq topics, built on the ``rmq`` data source: copy
one and change what it computes.  Each runs with one command, on
``local[*]`` (``python -m spark.pipelines.<name> ...``) and unchanged under
``spark-submit --master spark://... spark/pipelines/<name>.py ...``."""
