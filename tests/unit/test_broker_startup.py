"""rmq-broker command line: parsing, validation, exit codes, -p/-m output."""

from __future__ import annotations

import pytest

from rmq.broker import startup
from rmq.broker.config import BrokerConfig, local_address
from rmq.broker.startup import StartupExit, check_namesrv_addr, format_config, parse
from rmq.testing.procs import run_cli

MODULE = "rmq.broker.startup"


def write_conf(tmp_path, text: str) -> str:
    path = tmp_path / "broker.conf"
    path.write_text(text)
    return str(path)


def test_local_address_prefers_public_ipv4():
    assert local_address(["127.0.0.1", "192.168.1.5", "10.0.0.7", "::1"]) == "10.0.0.7"


def test_local_address_falls_back_to_last_ipv4_then_ipv6():
    assert local_address(["127.0.0.1", "192.168.1.5", "192.168.1.9"]) == "192.168.1.9"
    assert local_address(["127.0.0.1", "::1", "fe80::1", "2001:db8::1"]) == "fe80::1"


def test_register_period_is_clamped_to_10_60_seconds():
    cfg = BrokerConfig()
    assert cfg.register_period_ms() == 30000
    cfg.registerNameServerPeriod = 1000
    assert cfg.register_period_ms() == 10000
    cfg.registerNameServerPeriod = 600000
    assert cfg.register_period_ms() == 60000


@pytest.mark.parametrize("addr,ok", [
    ("127.0.0.1:9876", True),
    ("127.0.0.1:9876;192.168.0.1:9876", True),
    ("127.0.0.1:9876;", True),
    ("localhost:9876", True),
    ("127.0.0.1", False),
    ("127.0.0.1:port", False),
    ("127.0.0.1:70000", False),
    (":9876", False),
    ("a:1;;b:2", False),
    ("", False),
])
def test_namesrv_address_check(addr, ok):
    assert check_namesrv_addr(addr) is ok


def test_command_line_wins_over_file(tmp_path):
    conf = write_conf(tmp_path, "namesrvAddr=10.0.0.1:9876\nbrokerName=broker-x\nlistenPort=20911\n")
    _, s = parse(["-c", conf, "-n", "127.0.0.1:9999"])
    assert s.broker.namesrvAddr == "127.0.0.1:9999"
    assert s.broker.brokerName == "broker-x"
    assert s.server.listenPort == 20911
    assert s.store.haListenPort == 20912
    assert s.fast_port() == 20909
    assert s.config_file == conf


def test_defaults_listen_on_10911(tmp_path):
    _, s = parse([])
    assert s.server.listenPort == 10911
    assert s.store.haListenPort == 10912
    assert s.fast_port() == 10909


def test_ha_listen_port_in_file_has_no_effect(tmp_path):
    conf = write_conf(tmp_path, "haListenPort=5555\n")
    _, s = parse(["-c", conf])
    assert s.store.haListenPort == 10912


def test_master_gets_broker_id_zero(tmp_path):
    conf = write_conf(tmp_path, "brokerRole=SYNC_MASTER\nbrokerId=3\n")
    _, s = parse(["-c", conf])
    assert s.broker.brokerId == 0


def test_slave_keeps_positive_broker_id(tmp_path):
    conf = write_conf(tmp_path, "brokerRole=SLAVE\nbrokerId=2\n")
    _, s = parse(["-c", conf])
    assert s.broker.brokerId == 2


@pytest.mark.parametrize("text,needle", [
    ("brokerRole=SLAVE\nbrokerId=0\n", "Slave's brokerId must be > 0"),
    ("enableDLegerCommitLog=true\ndLegerGroup=g\n", "dLegerPeers is empty"),
    ("enableDLegerCommitLog=true\ndLegerGroup=g\ndLegerSelfId=n3\n"
     "dLegerPeers=n0-127.0.0.1:40911;n1-127.0.0.1:40912\n",
     "dLegerSelfId n3 is not in dLegerPeers n0-127.0.0.1:40911;n1-127.0.0.1:40912"),
    ("enableDLegerCommitLog=true\ndLegerGroup=g\ndLegerSelfId=n0\n"
     "dLegerPeers=n0-127.0.0.1:40911;n0-127.0.0.1:40912\n", "DLedger peer id n0 is listed twice"),
    ("enableDLegerCommitLog=true\ndLegerGroup=g\ndLegerSelfId=n0\n"
     "dLegerPeers=n0-127.0.0.1:40911\nenableLmq=true\nenableMultiDispatch=true\n",
     "enableMultiDispatch/enableLmq are not supported with enableDLegerCommitLog=true"),
    ("listenPort=10911 \n", "listenPort"),
    ("brokerRole=BOSS\n", "BOSS"),
    ("namesrvAddr=nohostport\n", "The Name Server Address[nohostport] illegal"),
    ("mappedFileSizeCommitLog=0\n", "mappedFileSizeCommitLog 0 is too small"),
    ("mappedFileSizeCommitLog=4095\n", "mappedFileSizeCommitLog 4095 is too small"),
    ("mappedFileSizeConsumeQueue=-1\n", "mappedFileSizeConsumeQueue -1 is too small"),
    ("maxHashSlotNum=0\n", "maxHashSlotNum 0 is too small"),
    ("maxIndexNum=-1\n", "maxIndexNum -1 is too small"),
    ("sendThreadPoolQueueCapacity=0\n", "sendThreadPoolQueueCapacity 0 is too small"),
    ("pullMessageThreadPoolNums=-1\n", "pullMessageThreadPoolNums -1 is too small"),
])
def test_invalid_settings_exit_253(tmp_path, text, needle):
    conf = write_conf(tmp_path, text)
    with pytest.raises(StartupExit) as info:
        parse(["-c", conf])
    assert info.value.code == 253
    assert needle in info.value.message


def test_unknown_key_warns_as_4_9_8_ignores_it_and_strict_mode_refuses_it(tmp_path, capsys):
    conf = write_conf(tmp_path, "brokerNmae=typo\n")
    parse(["-c", conf])
    assert f"config file {conf}: unknown key brokerNmae ignored" in capsys.readouterr().err
    for argv, text in ((["--strict"], ""), ([], "strictConfig=true\n")):
        conf = write_conf(tmp_path, text + "brokerNmae=typo\n")
        with pytest.raises(StartupExit) as info:
            parse(["-c", conf, *argv])
        assert info.value.code == 253
        assert "unknown setting(s)" in info.value.message and "brokerNmae" in info.value.message


def test_missing_config_file_exits_255(tmp_path):
    with pytest.raises(StartupExit) as info:
        parse(["-c", str(tmp_path / "nope.conf")])
    assert info.value.code == 255
    assert "nope.conf" in info.value.message


def test_print_all_and_important(tmp_path):
    conf = write_conf(tmp_path, "brokerName=broker-p\nfileReservedTime=48\n")
    _, s = parse(["-c", conf])
    everything = format_config(s, important_only=False)
    important = format_config(s, important_only=True)
    assert "brokerName=broker-p\n" in everything and "brokerName=broker-p\n" in important
    assert "fileReservedTime=48\n" in everything and "fileReservedTime=48\n" in important
    assert "listenPort=10911\n" in everything and "listenPort=" not in important
    assert "sendThreadPoolQueueCapacity=10000\n" in everything
    assert "sendThreadPoolQueueCapacity" not in important
    assert "brokerRole=ASYNC_MASTER\n" in important
    assert "haMasterAddress=\n" in everything  # null printed as empty, like Java


def test_prepare_store_paths_creates_config_dir(tmp_path):
    conf = write_conf(tmp_path, f"storePathRootDir={tmp_path / 'st'}\n")
    _, s = parse(["-c", conf])
    startup.prepare_store_paths(s)
    assert (tmp_path / "st" / "config").is_dir()


@pytest.mark.timeout(60)
def test_cli_exit_codes(tmp_path):
    assert run_cli(MODULE, ["-h"]).returncode == 0
    bad_flag = run_cli(MODULE, ["--bogus"])
    assert bad_flag.returncode == 1 and "usage" in bad_flag.stderr
    bad_addr = run_cli(MODULE, ["-n", "127.0.0.1", "-p"])
    assert bad_addr.returncode == 253
    assert 'please set it as follows, "127.0.0.1:9876;192.168.0.1:9876"' in bad_addr.stderr
    printed = run_cli(MODULE, ["-n", "127.0.0.1:9876", "-p"])
    assert printed.returncode == 0
    assert "namesrvAddr=127.0.0.1:9876" in printed.stdout
    assert "listenPort=10911" in printed.stdout
    important = run_cli(MODULE, ["-m"])
    assert important.returncode == 0 and "brokerClusterName=DefaultCluster" in important.stdout
    conf = write_conf(tmp_path, "brokerRole=SLAVE\n")
    slave = run_cli(MODULE, ["-c", conf])
    assert slave.returncode == 253 and "Slave's brokerId must be > 0" in slave.stderr
    acl = run_cli(MODULE, ["-c", write_conf(tmp_path, "aclEnable=TRUE\n"), "-p"])
    assert acl.returncode == 0 and "aclEnable=true" in acl.stdout
    assert run_cli(MODULE, ["-c", write_conf(tmp_path, "aclEnable=false\n"), "-p"]).returncode == 0
