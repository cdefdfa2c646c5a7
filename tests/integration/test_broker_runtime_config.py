"""UPDATE_BROKER_CONFIG of settings fixed at start (flushDiskType, brokerRole,
listenPort, ...): written to the config file and shown by GET_BROKER_CONFIG,
while the running broker keeps its start-up values, so sends keep working;
the next start applies them."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from rmq.client.headers import send_header_v2
from rmq.common.codes import RequestCode, ResponseCode
from rmq.common.properties import load_properties, parse_properties
from rmq.testing.cluster import Cluster
from rmq.testing.procs import run_cli

R = RequestCode


@pytest.fixture
async def cluster(tmp_path):
    c = Cluster(tmp_path)
    yield c
    await c.close()


async def send(cluster: Cluster, i: int):
    ext = send_header_v2("pg", "CfgTopic", "TBW102", 4, 0, 0, int(time.time() * 1000), 0,
                         "", False, "broker-a")
    return await cluster.call(R.SEND_MESSAGE_V2, ext, f"m{i}".encode())


async def max_offset(cluster: Cluster) -> int:
    r = await cluster.call(R.GET_MAX_OFFSET, {"topic": "CfgTopic", "queueId": "0"})
    assert r.code == 0
    return int(r.ext_fields["offset"])


async def broker_config(cluster: Cluster) -> dict[str, str]:
    r = await cluster.call(R.GET_BROKER_CONFIG)
    assert r.code == 0
    return parse_properties(bytes(r.body).decode())


@pytest.mark.timeout(90)
async def test_start_only_settings_wait_for_the_next_start(cluster):
    cluster.start_broker()
    await cluster.wait_registered()
    assert (await send(cluster, 0)).code == ResponseCode.SUCCESS
    version = (await cluster.call(R.GET_BROKER_CONFIG)).ext_fields["version"]

    r = await cluster.call(R.UPDATE_BROKER_CONFIG,
                           body=b"flushDiskType=SYNC_FLUSH\nfileReservedTime=48\n")
    assert r.code == ResponseCode.SUCCESS
    assert r.remark == "saved, applied at the next start: flushDiskType"
    conf = await broker_config(cluster)
    assert conf["flushDiskType"] == "SYNC_FLUSH" and conf["fileReservedTime"] == "48"
    assert (await cluster.call(R.GET_BROKER_CONFIG)).ext_fields["version"] != version
    on_file = load_properties(cluster.conf)
    assert on_file["flushDiskType"] == "SYNC_FLUSH" and on_file["fileReservedTime"] == "48"

    # every send still succeeds and is stored exactly once
    before = await max_offset(cluster)
    for i in range(1, 6):
        r = await send(cluster, i)
        assert r.code == ResponseCode.SUCCESS, r.remark
    assert await max_offset(cluster) == before + 5

    # a bad value for a start-only key is refused and changes nothing
    bad = await cluster.call(R.UPDATE_BROKER_CONFIG, body=b"brokerRole=LEADER\n")
    assert bad.code == ResponseCode.SYSTEM_ERROR and "brokerRole" in bad.remark
    assert load_properties(cluster.conf)["brokerRole"] == "ASYNC_MASTER"

    # the start-up path reads the file with the new value
    printed = run_cli("rmq.broker.startup", ["-c", cluster.conf, "-p"],
                      env={"ROCKETMQ_HOME": str(cluster.tmp)})
    assert printed.returncode == 0, printed.stderr
    assert "flushDiskType=SYNC_FLUSH" in printed.stdout.splitlines()

    cluster.broker.stop()
    cluster.start_broker()
    await cluster.wait_registered()
    conf = await broker_config(cluster)
    assert conf["flushDiskType"] == "SYNC_FLUSH" and conf["fileReservedTime"] == "48"
    before = await max_offset(cluster)
    for i in range(6, 9):
        r = await send(cluster, i)
        assert r.code == ResponseCode.SUCCESS, r.remark
    assert await max_offset(cluster) == before + 3
    assert "flushDiskType=SYNC_FLUSH saved" in \
        (cluster.tmp / "logs" / "rocketmqlogs" / "broker.log").read_text()


def read_only_dir(path: Path, files: dict[str, str]) -> None:
    """A directory holding ``files`` that the broker cannot write to: a read-only
    tmpfs as root (as a unit's ProtectSystem makes /etc), else plain modes."""
    path.mkdir()
    if os.geteuid() == 0:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(path)], check=True)
    for name, text in files.items():
        (path / name).write_text(text)
    if os.geteuid() == 0:
        subprocess.run(["mount", "-o", "remount,ro", str(path)], check=True)
    else:
        path.chmod(0o555)


@pytest.mark.timeout(90)
async def test_update_with_a_read_only_config_file_survives_a_restart(cluster):
    etc = cluster.tmp / "etc-rmq"
    read_only_dir(etc, {"broker.conf": Path(cluster.conf).read_text()})
    original = (etc / "broker.conf").read_text()
    cluster.conf = str(etc / "broker.conf")
    try:
        cluster.start_broker()
        await cluster.wait_registered()
        r = await cluster.call(R.UPDATE_BROKER_CONFIG, body=b"fileReservedTime=96\n")
        assert r.code == ResponseCode.SUCCESS, r.remark
        assert (await broker_config(cluster))["fileReservedTime"] == "96"
        assert (etc / "broker.conf").read_text() == original
        overrides = cluster.store_dir / "config" / "brokerRuntime.properties"
        assert load_properties(str(overrides)) == {"fileReservedTime": "96"}

        cluster.broker.stop()
        cluster.start_broker()
        await cluster.wait_registered()
        assert (await broker_config(cluster))["fileReservedTime"] == "96"

        # nowhere to save it: refused, and the running value is unchanged
        overrides.unlink()
        overrides.mkdir()
        r = await cluster.call(R.UPDATE_BROKER_CONFIG, body=b"fileReservedTime=24\n")
        assert r.code == ResponseCode.SYSTEM_ERROR and "nothing changed" in r.remark
        assert (await broker_config(cluster))["fileReservedTime"] == "96"
    finally:
        cluster.broker.kill()
        if os.geteuid() == 0:
            subprocess.run(["umount", "-l", str(etc)], check=False)
