"""systemd units: `systemd-analyze verify`, READY=1 after registration, graceful stop."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from rmq.testing.cluster import broker_conf, start_namesrv
from rmq.testing.procs import RmqProcess, free_port

# once: the packaged unit files, no compiled/twin pair of its own
pytestmark = pytest.mark.once

UNITS = Path(__file__).resolve().parents[2] / "systemd"


def _drain(sock: socket.socket, quiet_s: float = 2.0) -> list[str]:
    """Every notification still arriving until the socket stays quiet."""
    got = []
    sock.settimeout(quiet_s)
    try:
        while True:
            got.append(sock.recv(4096).decode())
    except TimeoutError:
        return got


@pytest.mark.timeout(60)
def test_units_verify(tmp_path):
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is missing: install Debian's systemd package"
    bindir = Path(sys.executable).parent
    assert (bindir / "rmq-broker").exists(), "rmq-broker console script is not installed"
    for name in ("rmq-namesrv.service", "rmq-broker@.service"):
        text = (UNITS / name).read_text()
        assert "Type=notify" in text and "WatchdogSec=" in text and "LimitNOFILE=" in text
        assert "Restart=on-failure" in text and "User=rmq" in text
        (tmp_path / name).write_text(text.replace("/opt/rmq/bin/", f"{bindir}/"))
    text = (UNITS / "rmq-dashboard.service").read_text()
    assert "Restart=on-failure" in text and "User=rmq" in text
    assert (bindir / "rmq-dashboard").exists(), "rmq-dashboard console script is not installed"
    (tmp_path / "rmq-dashboard.service").write_text(text.replace("/opt/rmq/bin/", f"{bindir}/"))
    out = subprocess.run([analyze, "verify", "rmq-namesrv.service", "rmq-broker@b.service",
                          "rmq-dashboard.service"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=50)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stderr.strip() == "", out.stderr


@pytest.mark.timeout(60)
@pytest.mark.parametrize("unit", ["rmq-namesrv.service", "rmq-broker@.service",
                                  "rmq-dashboard.service"])
def test_units_are_sandboxed(tmp_path, unit):
    """systemd-analyze security of the shipped units (8.7 EXPOSED before the
    sandboxing settings, 1.2 OK with them): the figure may not creep back up."""
    name = unit.replace("@.", "@a.")
    (tmp_path / name).write_text((UNITS / unit).read_text())
    out = subprocess.run(["systemd-analyze", "security", "--offline=true", "--no-pager", name],
                         cwd=tmp_path, capture_output=True, text=True, timeout=50)
    m = re.search(r"Overall exposure level for \S+: (\d+\.\d)", out.stdout)
    assert m, out.stdout + out.stderr
    assert float(m.group(1)) <= 1.5, out.stdout


@pytest.mark.timeout(240)
def test_install_script_stages_the_service(tmp_path):
    """systemd/install.sh into a staging directory: a venv under /opt/rmq with
    the console scripts the units start, the units, the account and
    directories, the documentation the units point at, and an /etc/rmq."""
    stage = tmp_path / "stage"
    env = dict(os.environ, DESTDIR=str(stage), RMQ_BUILD_NO_EXT="1", PYTHON=sys.executable)
    env.pop("RMQ_REQUIRE_EXTENSIONS", None)  # staged without them, for speed
    out = subprocess.run(["bash", str(UNITS / "install.sh")], env=env, capture_output=True,
                         text=True, timeout=220)
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    units = stage / "etc" / "systemd" / "system"
    for unit in ("rmq-namesrv.service", "rmq-broker@.service", "rmq-dashboard.service"):
        text = (units / unit).read_text()
        exec_start = re.search(r"^ExecStart=(\S+)", text, re.M).group(1)
        binary = stage / exec_start.lstrip("/")
        assert exec_start.startswith("/opt/rmq/bin/") and binary.exists()
        assert subprocess.run([str(binary), "-h"], capture_output=True, timeout=60,
                              env=env).returncode == 0
        doc = re.search(r"^Documentation=file:(\S+)", text, re.M).group(1)
        assert (stage / doc.lstrip("/")).is_file(), doc
    assert (stage / "usr/lib/sysusers.d/rmq.conf").is_file()
    assert (stage / "usr/lib/tmpfiles.d/rmq.conf").is_file()
    conf = stage / "etc" / "rmq" / "broker-a.conf"
    printed = subprocess.run([str(stage / "opt/rmq/bin/rmq-broker"), "-c", str(conf), "-p"],
                             capture_output=True, text=True, timeout=60, env=env)
    assert printed.returncode == 0, printed.stderr
    assert "namesrvAddr=127.0.0.1:9876" in printed.stdout.splitlines()
    for node in ("n0", "n1", "n2"):  # the DLedger group's instances
        conf = stage / "etc" / "rmq" / f"dledger-{node}.conf"
        printed = subprocess.run([str(stage / "opt/rmq/bin/rmq-broker"), "-c", str(conf), "-p"],
                                 capture_output=True, text=True, timeout=60, env=env)
        assert printed.returncode == 0, printed.stderr
        lines = printed.stdout.splitlines()
        assert f"dLegerSelfId={node}" in lines and "enableDLegerCommitLog=true" in lines
        assert f"storePathRootDir=/var/lib/rmq/store-dledger-{node}" in lines


@pytest.mark.timeout(90)
def test_ready_after_registration_and_graceful_stop(tmp_path):
    ns_port = free_port()
    namesrv = start_namesrv(tmp_path, ns_port)
    sock_path = str(tmp_path / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(sock_path)
    sock.settimeout(30)
    port = free_port(span=4) + 2
    conf = broker_conf(tmp_path, port)
    env = {"NOTIFY_SOCKET": sock_path, "WATCHDOG_USEC": "2000000",
           "ROCKETMQ_HOME": str(tmp_path)}
    broker = RmqProcess("rmq.broker.startup", ["-c", conf, "-n", f"127.0.0.1:{ns_port}"],
                        tmp_path / "broker.out", env=env).start()
    try:
        messages = []
        while not any("READY=1" in m for m in messages):
            messages.append(sock.recv(4096).decode())
        log = (tmp_path / "logs" / "rocketmqlogs" / "broker.log").read_text()
        assert f"to name server 127.0.0.1:{ns_port} OK" in log  # registered before READY
        assert f"MAINPID={broker.pid}" in messages[-1]
        watchdog = sock.recv(4096).decode()
        assert "WATCHDOG=1" in watchdog
        broker.signal(signal.SIGTERM)
        assert broker.wait(30) == 0
        assert any("STOPPING=1" in m for m in _drain(sock))
        assert not os.path.exists(tmp_path / "store" / "abort")
    finally:
        broker.kill()
        namesrv.kill()
        sock.close()


@pytest.mark.timeout(60)
def test_namesrv_ready_when_listening_and_graceful_stop(tmp_path):
    sock_path = str(tmp_path / "ns-notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(sock_path)
    sock.settimeout(30)
    port = free_port()
    conf = tmp_path / "namesrv.conf"
    conf.write_text(f"listenPort={port}\nkvConfigPath={tmp_path}/kv.json\n")
    env = {"NOTIFY_SOCKET": sock_path, "WATCHDOG_USEC": "2000000",
           "ROCKETMQ_HOME": str(tmp_path)}
    namesrv = RmqProcess("rmq.namesrv.startup", ["-c", str(conf)], tmp_path / "ns.out",
                         env=env).start()
    try:
        ready = sock.recv(4096).decode()
        assert "READY=1" in ready and f"MAINPID={namesrv.pid}" in ready
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            pass  # READY came only after the port was bound
        assert "WATCHDOG=1" in sock.recv(4096).decode()
        namesrv.signal(signal.SIGTERM)
        assert namesrv.wait(30) == 0
        assert any("STOPPING=1" in m for m in _drain(sock))
    finally:
        namesrv.kill()
        sock.close()
