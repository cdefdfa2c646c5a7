"""Helpers for broker integration tests: config files and real name servers."""

from __future__ import annotations

from pathlib import Path

from tests.support.procs import RmqProcess


def start_namesrv(tmp_path: Path, port: int, extra: str = "") -> RmqProcess:
    conf = tmp_path / f"namesrv-{port}.conf"
    conf.write_text(f"listenPort={port}\nkvConfigPath={tmp_path}/kv-{port}.json\n{extra}")
    return RmqProcess("rmq.namesrv.startup", ["-c", str(conf)], tmp_path / f"ns-{port}.out",
                      env={"ROCKETMQ_HOME": str(tmp_path)}).start(wait_for_port=port)


def broker_conf(tmp_path: Path, port: int, extra: str = "", name: str = "broker-a",
                store: str = "store") -> str:
    conf = tmp_path / f"{name}-{port}.conf"
    conf.write_text(
        f"brokerName={name}\nlistenPort={port}\nbrokerIP1=127.0.0.1\nbrokerIP2=127.0.0.1\n"
        f"storePathRootDir={tmp_path / store}\nmappedFileSizeCommitLog=1048576\n"
        f"mappedFileSizeConsumeQueue=6000\nmaxHashSlotNum=1000\nmaxIndexNum=4000\n{extra}")
    return str(conf)
