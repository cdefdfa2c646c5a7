"""rmq-admin's name-server commands against a real rmq-namesrv process."""

from __future__ import annotations

import orjson
import pytest

from rmq.client import Message, MQClientError, Producer
from rmq.testing.procs import free_port, run_cli

ADMIN = "rmq.tools.admin"
# once: the rmq-admin command line, no compiled/twin pair of its own
pytestmark = [pytest.mark.once, pytest.mark.timeout(60)]


@pytest.fixture
def namesrv(procs, tmp_path) -> str:
    port = free_port()
    conf = tmp_path / "namesrv.conf"
    conf.write_text(f"listenPort={port}\nbindAddress=127.0.0.1\n"
                    f"kvConfigPath={tmp_path / 'kv' / 'kvConfig.json'}\nlogDir={tmp_path / 'logs'}\n")
    procs("rmq.namesrv.startup", ["-c", str(conf)], name="namesrv").start(wait_for_port=port)
    return f"127.0.0.1:{port}"


def admin(ns: str, *args: str) -> tuple[int, str, str]:
    res = run_cli(ADMIN, [args[0], "-n", ns, *args[1:]])
    return res.returncode, res.stdout, res.stderr


def test_kv_config_commands_round_trip(namesrv):
    rc, out, err = admin(namesrv, "updateKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", "T1",
                         "-v", "broker-a:4")
    assert rc == 0, err
    assert "broker-a:4" in out
    rc, out, err = admin(namesrv, "deleteKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", "T1", "--json")
    assert rc == 0, err
    assert orjson.loads(out) == {"deleted": "T1", "namespace": "ORDER_TOPIC_CONFIG"}


def test_get_namesrv_config_shows_the_listen_port(namesrv):
    rc, out, err = admin(namesrv, "getNamesrvConfig", "--json")
    assert rc == 0, err
    config = orjson.loads(out)[namesrv]
    assert config["listenPort"] == namesrv.rsplit(":", 1)[1]


def test_empty_cluster_lists(namesrv):
    rc, out, err = admin(namesrv, "topicList")
    assert rc == 0, err
    assert out.strip() == "(none)"
    rc, out, err = admin(namesrv, "clusterList", "--json")
    assert rc == 0 and orjson.loads(out) == []
    rc, out, err = admin(namesrv, "wipeWritePerm", "-b", "broker-a", "--json")
    assert rc == 0, err
    assert orjson.loads(out) == [{"namesrv": namesrv, "wipeTopicCount": 0}]


def test_unknown_topic_route_is_one_line_and_exit_1(namesrv):
    rc, out, err = admin(namesrv, "topicRoute", "-t", "NoSuchTopic")
    assert rc == 1 and out == ""
    assert len(err.strip().splitlines()) == 1
    assert "CODE: 17" in err


def test_admin_without_namesrv_address_fails_cleanly():
    res = run_cli(ADMIN, ["topicList"], env={"NAMESRV_ADDR": ""})
    assert res.returncode == 1 and "name server" in res.stderr


async def test_producer_reports_a_topic_without_route(namesrv):
    async with Producer("pg_noroute", namesrv) as producer:
        with pytest.raises(MQClientError) as info:
            await producer.send(Message("NoSuchTopic", b"x"), timeout_ms=2000)
    assert info.value.code == 17
