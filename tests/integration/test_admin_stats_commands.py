"""rmq-admin's mqadmin statistics commands (statsAll, brokerConsumeStats) as
subprocesses against a real rmq-namesrv + rmq-broker: produce and consume with
the rmq client, then read the figures back in mqadmin's columns."""

from __future__ import annotations

import pytest
import pytest_asyncio

from rmq.client import Message, Producer
from rmq.testing.messaging import running_cluster
from tests.integration.admin_cli import admin_fails, admin_json, admin_ok, recording_consumer

# once: the rmq-admin command line, no compiled/twin pair of its own
pytestmark = [pytest.mark.once, pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(120)]
TOPIC, GROUP, IDLE = "TopicAdmStats", "cgAdmStats", "TopicAdmStatsIdle"
SENT, CONSUMED_TOPIC_EXTRA = 12, 5


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def cluster(tmp_path_factory):
    async with running_cluster(tmp_path_factory.mktemp("admin-stats")) as c:
        await c.create_topic(TOPIC, queues=2)
        await c.create_topic(IDLE, queues=1)
        async with Producer("pgAdmStats", client_config=c.client_config("stats-p")) as p:
            for i in range(SENT):
                await p.send(Message(TOPIC, b"m%d" % i))
            async with recording_consumer(c, GROUP, TOPIC, "*", SENT):
                pass
            for i in range(CONSUMED_TOPIC_EXTRA):  # put after the consumer left: a backlog
                await p.send(Message(TOPIC, b"late%d" % i))
        yield c


async def test_stats_all(cluster):
    ns = cluster.namesrv_addr
    out = await admin_ok(ns, "statsAll", "-t", TOPIC)
    head, *rows = out.rstrip("\n").split("\n")
    assert head.split() == ["#Topic", "#Consumer", "Group", "#Accumulation", "#InTPS",
                            "#OutTPS", "#InMsg24Hour", "#OutMsg24Hour"]
    assert len(rows) == 1
    cols = rows[0].split()
    assert cols[0] == TOPIC and cols[1] == GROUP
    assert int(cols[2]) == CONSUMED_TOPIC_EXTRA  # the backlog
    assert float(cols[3]) >= 0 and float(cols[4]) >= 0  # TPS, two decimals
    assert cols[3].count(".") == 1 and len(cols[3].split(".")[1]) == 2
    assert int(cols[5]) == SENT + CONSUMED_TOPIC_EXTRA and int(cols[6]) == SENT

    data = await admin_json(ns, "statsAll")
    by_topic = {r["topic"]: r for r in data}
    assert by_topic[IDLE]["outMsg24Hour"] is None  # no consumer: NO_CONSUMER in the table
    assert not any(t.startswith(("%RETRY%", "%DLQ%")) for t in by_topic)
    table = await admin_ok(ns, "statsAll")
    assert any(line.split()[:1] == [IDLE] and line.rstrip().endswith("NO_CONSUMER")
               for line in table.splitlines())
    active = await admin_json(ns, "statsAll", "-a")
    assert TOPIC in {r["topic"] for r in active} and IDLE not in {r["topic"] for r in active}


async def test_broker_consume_stats(cluster):
    c, ns = cluster, cluster.namesrv_addr
    out = await admin_ok(ns, "brokerConsumeStats", "-b", c.addr)
    lines = out.rstrip("\n").split("\n")
    assert lines[0].split()[:3] == ["#Topic", "#Group", "#Broker"]
    assert lines[-1] == f"Diff Total: {CONSUMED_TOPIC_EXTRA}"
    rows = [ln.split() for ln in lines[1:-2]]
    mine = [r for r in rows if r[0] == TOPIC and r[1] == GROUP]
    assert sorted(int(r[3]) for r in mine) == [0, 1]  # both queues, sorted
    assert sum(int(r[6]) for r in mine) == CONSUMED_TOPIC_EXTRA
    assert all(int(r[4]) - int(r[5]) == int(r[6]) for r in mine)
    assert all(len(r[7]) == 10 and len(r[8]) == 8 for r in mine)  # yyyy-MM-dd HH:mm:ss
    data = await admin_json(ns, "brokerConsumeStats", "-b", c.addr, "-l", "100")
    assert data["rows"] == [] and data["totalDiff"] == CONSUMED_TOPIC_EXTRA
    err = await admin_fails(ns, "brokerConsumeStats", "-b", "127.0.0.1:1", "-t", "2000")
    assert "127.0.0.1:1" in err and len(err.strip().splitlines()) == 1
