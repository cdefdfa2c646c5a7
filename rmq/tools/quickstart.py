"""``make run``: a name server and a broker on the default ports, in the foreground.

Starts ``rmq-namesrv`` (9876), waits for it to listen, then ``rmq-broker``
(10911, fast port 10909, HA 10912) registered with it, using the config files in
``conf/``.  Ctrl-C (or SIGTERM) stops the broker first, then the name server,
each gracefully, the way an operator would.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _wait_port(port: int, proc: subprocess.Popen, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.1)
    return False


def _start(args: list[str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", *args], cwd=ROOT)


def main() -> int:
    env_home = os.environ.setdefault("ROCKETMQ_HOME", str(ROOT))
    conf = Path(env_home) / "conf"
    namesrv = _start(["rmq.namesrv.startup", "-c", str(conf / "namesrv.conf")])
    if not _wait_port(9876, namesrv):
        print("rmq-namesrv did not start (see the messages above)", file=sys.stderr)
        namesrv.terminate()
        return 1
    broker = _start(
        ["rmq.broker.startup", "-c", str(conf / "broker.conf"), "-n", "127.0.0.1:9876"]
    )
    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    while not stopping and broker.poll() is None and namesrv.poll() is None:
        time.sleep(0.2)
    code = 0
    for proc in (broker, namesrv):
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
        elif not stopping:
            code = proc.returncode or 1
    return code


if __name__ == "__main__":
    sys.exit(main())
