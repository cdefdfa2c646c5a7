"""One local[2] Spark session for every Spark test (starting one costs seconds)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark_session():
    from spark.job import make_session

    session = make_session("local[2]", "rmq-capacity-tests",
                           extra={"spark.sql.shuffle.partitions": "4", "spark.driver.memory": "1g"})
    yield session
    session.stop()


@pytest.fixture(scope="session")
def spark(spark_session):
    """The session with the ``rmq`` data source registered."""
    from spark.source import register

    register(spark_session)
    return spark_session
