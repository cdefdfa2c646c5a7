"""An rmq name server and broker on loopback, and the C++ client driven against them.

``Cluster`` owns the two real processes (``rmq.testing.cluster``), writes their
configuration (short delay levels so retries come back within seconds), and can
restart the broker cleanly (SIGTERM) or as a crash (SIGKILL), remembering the
window during which the client is allowed to log connection failures.

``CppRunner`` runs ``cpp_driver.py`` in child processes, each with its own HOME so
that every scenario's client logs can be read back and checked by ``cpp_logs``.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

from rmq.common.codes import RequestCode, ResponseCode
from rmq.remoting import RemotingClient, RemotingCommand
from rmq.testing.cluster import Cluster as Launcher
from rmq.testing.procs import RmqProcess, wait_port
from tests.interop import cpp_logs

ROOT = Path(__file__).resolve().parents[2]
DRIVER = "tests.interop.cpp_driver"

# 1 s for every level that a first or second retry uses (3 + reconsumeTimes).
SHORT_DELAY_LEVELS = "1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s"


class Cluster:
    """rmq-namesrv plus one rmq-broker (broker-a, master) under ``tmp``, started
    by ``rmq.testing``'s launcher with this suite's broker settings."""

    def __init__(self, tmp: Path, auto_create: bool = True, extra: str = "") -> None:
        self.tmp = tmp
        self.auto_create = auto_create
        self.extra = extra
        self.launcher: Launcher | None = None
        self.restarts: list[tuple[datetime, datetime]] = []

    def _started(self) -> Launcher:
        assert self.launcher is not None, "the cluster is not started"
        return self.launcher

    @property
    def ns_port(self) -> int:
        return self._started().ns_port

    @property
    def port(self) -> int:
        return self._started().port  # fast port = listenPort - 2, HA = + 1

    @property
    def namesrv(self) -> RmqProcess | None:
        return self.launcher.namesrv if self.launcher is not None else None

    @property
    def broker(self) -> RmqProcess | None:
        return self.launcher.broker if self.launcher is not None else None

    @property
    def namesrv_addr(self) -> str:
        return f"127.0.0.1:{self.ns_port}"

    @property
    def broker_addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> Cluster:
        self.launcher = Launcher(self.tmp, self._settings(), store="store", timeout=40)
        self.start_broker()
        return self

    def _settings(self) -> str:
        """broker.conf lines of this suite (after the launcher's own): 4 MiB
        commit-log files, short delay levels, offsets flushed every second."""
        store = self.tmp / "store"
        return ("brokerId=0\n"
                f"storePathCommitLog={store / 'commitlog'}\n"
                "mappedFileSizeCommitLog=4194304\nmappedFileSizeConsumeQueue=60000\n"
                f"autoCreateTopicEnable={'true' if self.auto_create else 'false'}\n"
                f"messageDelayLevel={SHORT_DELAY_LEVELS}\n"
                "flushConsumerOffsetInterval=1000\nflushDelayOffsetInterval=1000\n"
                f"{self.extra}")

    def broker_conf(self) -> Path:
        """The broker's configuration file."""
        return Path(self._started().conf)

    def start_broker(self) -> RmqProcess:
        broker = self._started().start_broker(timeout=40)
        self.wait_routed("broker-a")
        return broker

    def wait_routed(self, topic: str, timeout: float = 20.0) -> None:
        """The broker has registered: its own topic has a route at the name server."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.route_json(topic) is not None:
                return
            time.sleep(0.1)
        raise AssertionError(f"no route for {topic} after {timeout}s")

    def route_json(self, topic: str) -> str | None:
        """GET_ROUTEINFO_BY_TOPIC through rmq's own remoting client: body text or None."""
        r = self.request(self.namesrv_addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
        if r.code != ResponseCode.SUCCESS:
            return None
        return bytes(r.body).decode()

    def max_offset(self, topic: str, queue: int) -> int:
        r = self.request(self.broker_addr, RequestCode.GET_MAX_OFFSET,
                         {"topic": topic, "queueId": str(queue)})
        assert r.code == ResponseCode.SUCCESS, r.remark
        return int(r.ext_fields["offset"])

    def consumer_offset(self, group: str, topic: str, queue: int) -> int | None:
        """QUERY_CONSUMER_OFFSET; None when the broker has none for the group."""
        r = self.request(self.broker_addr, RequestCode.QUERY_CONSUMER_OFFSET,
                         {"consumerGroup": group, "topic": topic, "queueId": str(queue)})
        if r.code != ResponseCode.SUCCESS:
            return None
        return int(r.ext_fields["offset"])

    def create_topic(self, topic: str, queues: int = 4) -> None:
        """UPDATE_AND_CREATE_TOPIC on the broker, then wait for the route."""
        r = self.request(self.broker_addr, RequestCode.UPDATE_AND_CREATE_TOPIC, {
            "topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(queues),
            "writeQueueNums": str(queues), "perm": "6", "topicFilterType": "SINGLE_TAG",
            "topicSysFlag": "0", "order": "false"})
        assert r.code == ResponseCode.SUCCESS, r.remark
        self.wait_routed(topic)

    def consumer_ids(self, group: str) -> list[str]:
        """GET_CONSUMER_LIST_BY_GROUP: the client ids the broker knows in ``group``."""
        r = self.request(self.broker_addr, RequestCode.GET_CONSUMER_LIST_BY_GROUP,
                         {"consumerGroup": group})
        if r.code != ResponseCode.SUCCESS or not r.body:
            return []
        return list(json.loads(bytes(r.body))["consumerIdList"])

    @staticmethod
    def request(addr: str, code: int, header: dict[str, str],
                body: bytes | None = None) -> RemotingCommand:
        """One request through rmq's own remoting client (a fresh connection)."""

        async def invoke() -> RemotingCommand:
            client = RemotingClient()
            try:
                return await client.invoke(
                    addr, RemotingCommand.create_request(code, header, body), 3000)
            finally:
                await client.close()

        return asyncio.run(invoke())

    def restart_broker(self, kind: str) -> None:
        """Stop the broker by SIGTERM ("clean") or SIGKILL ("kill") and start it again."""
        assert self.broker is not None
        began = datetime.now()
        if kind == "clean":
            assert self.broker.stop(timeout=30) == 0, self.broker.output()
        elif kind == "kill":
            self.broker.kill()
        else:
            raise ValueError(kind)
        wait_free(self.port)
        self.start_broker()
        self.restarts.append((began, datetime.now()))

    def recovered(self) -> None:
        """The test saw the clients work normally again after the last restart:
        the restart's window (where transport errors in their logs are
        expected) lasts until now.  A C++ consumer notices a pull lost with
        the old connection only when that pull times out (30 s after it was
        sent) and may need another cycle on a slow machine, so the end of the
        broker's start-up alone is too early a bound."""
        if self.restarts:
            began, end = self.restarts[-1]
            self.restarts[-1] = (began, max(end, datetime.now()))

    def stop(self) -> None:
        for proc in (self.broker, self.namesrv):
            if proc is not None:
                proc.kill()

    def outputs(self) -> str:
        parts = []
        for path in sorted(self.tmp.glob("*.out")):
            parts.append(f"--- {path.name}\n{path.read_text(errors='replace')[-6000:]}")
        return "\n".join(parts)


def wait_free(port: int, timeout: float = 15.0) -> None:
    """Until nothing accepts on ``port`` any more (the old broker is gone)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            wait_port(port, timeout=0.2)
        except TimeoutError:
            return
        time.sleep(0.1)
    raise AssertionError(f"port {port} still busy")


class CppRunner:
    """Runs driver ops in child processes and checks each one's client logs."""

    def __init__(self, tmp: Path, cluster: Cluster) -> None:
        self.tmp = tmp
        self.cluster = cluster
        self.homes: list[Path] = []
        self.expected: tuple[str, ...] = ()
        self.background: list[Background] = []

    def _home(self, name: str) -> Path:
        home = self.tmp / "cpp" / f"{len(self.homes):02d}-{name}"
        (home / "logs").mkdir(parents=True)
        self.homes.append(home)
        return home

    def _cmd(self, spec: dict, home: Path) -> list[str]:
        path = home / "spec.json"
        path.write_text(json.dumps(dict(spec, namesrv=self.cluster.namesrv_addr)))
        return [sys.executable, "-m", DRIVER, str(path)]

    def _env(self, home: Path) -> dict[str, str]:
        env = dict(os.environ, HOME=str(home))
        env.pop("ROCKETMQ_HOME", None)
        return env

    def run(self, spec: dict, timeout: float = 60.0) -> dict:
        """One op to completion; its JSON result (``ok`` False carries the error)."""
        home = self._home(spec["op"])
        proc = subprocess.run(self._cmd(spec, home), capture_output=True, text=True,
                              timeout=timeout, env=self._env(home), cwd=ROOT)
        return _result(proc.returncode, proc.stdout, proc.stderr)

    def spawn(self, spec: dict) -> Background:
        """A long-running op (push consumer) in the background."""
        home = self._home(spec["op"])
        proc = subprocess.Popen(self._cmd(spec, home), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=self._env(home),
                                cwd=ROOT)
        self.background.append(Background(proc))
        return self.background[-1]

    def close(self) -> None:
        """Kill whatever driver is still running (a failed test's consumers)."""
        for bg in self.background:
            bg.kill()

    def log_problems(self, expected: tuple[str, ...] = ()) -> list[str]:
        check = cpp_logs.LogCheck(windows=list(self.cluster.restarts),
                                  expected=expected + self.expected)
        found: list[str] = []
        for home in self.homes:
            found += cpp_logs.problems(home, check)
        return found

    def assert_clean_logs(self, expected: tuple[str, ...] = ()) -> None:
        found = self.log_problems(expected)
        assert not found, "C++ client logged errors:\n" + "\n".join(found[:40]) \
            + "\n" + self._explain(found)

    def _explain(self, found: list[str]) -> str:
        """The restart windows and what each of the first problems' clients logged
        just before it, so that a failure seen once in CI can be read afterwards."""
        windows = ", ".join(f"{a:%H:%M:%S.%f} .. {b:%H:%M:%S.%f}"
                            for a, b in self.cluster.restarts) or "none"
        parts = [f"restart windows: {windows}"]
        homes = {home.name: home for home in self.homes}
        for problem in found[:3]:
            home = homes.get(problem.split("/", 1)[0])
            if home is not None:
                parts.append(f"before {problem[:120]}:")
                parts += ["  " + line[:200] for line in cpp_logs.lines_before(home, problem)]
        return "\n".join(parts)


NODE_DIR = ROOT / "tests" / "interop" / "node"


def ensure_node_clients(timeout: float = 300.0) -> None:
    """Install the Node.js clients pinned by ``node/package-lock.json`` when absent.

    CI installs them up front (``npm ci --prefix tests/interop/node``); this is the
    same command, run once under a lock for a checkout where that was not done.
    """
    if (NODE_DIR / "node_modules" / "ali-ons" / "package.json").exists():
        return
    with open(NODE_DIR / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (NODE_DIR / "node_modules" / "ali-ons" / "package.json").exists():
            subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--prefix", str(NODE_DIR)],
                           check=True, timeout=timeout, capture_output=True)


class OnsRunner(CppRunner):
    """Runs ``node/ons_driver.js`` (ali-ons) ops; same ops and results as the C++ driver.

    ali-ons logs through the logger the driver gives it, so its warnings, errors and
    'error' events come back in each result's ``problems`` instead of log files.
    """

    def _cmd(self, spec: dict, home: Path) -> list[str]:
        path = home / "spec.json"
        path.write_text(json.dumps(dict(spec, namesrv=self.cluster.namesrv_addr)))
        return ["node", str(NODE_DIR / "ons_driver.js"), str(path)]


class PushGroup:
    """Push consumers of one group, each in its own driver process.

    Each consumer appends every delivery to its own JSON-lines file; ``received``
    reads them back, and ``stop`` asks every consumer to shut down cleanly.
    """

    def __init__(self, cpp: CppRunner, group: str, topic: str, expression: str = "*",
                 instances: int = 1, **extra) -> None:
        self.cpp = cpp
        self.group = group
        self.dir = cpp.tmp / f"push-{group}-{len(cpp.homes)}"
        self.dir.mkdir(parents=True)
        self.stop_file = self.dir / "stop"
        self.outs = [self.dir / f"consumer-{i}.jsonl" for i in range(instances)]
        self.procs = [
            cpp.spawn(dict(extra, op="push", group=group, topic=topic, expression=expression,
                           instance=f"{group}-{i}", out=str(out), stop=str(self.stop_file),
                           fail_dir=str(self.dir),
                           max_s=extra.get("max_s", 90)))
            for i, out in enumerate(self.outs)]

    def wait_members(self, count: int, timeout: float = 20.0) -> None:
        """Until the broker lists ``count`` consumers of the group (heartbeats arrived)."""
        deadline = time.monotonic() + timeout
        while len(self.cpp.cluster.consumer_ids(self.group)) < count:
            assert time.monotonic() < deadline, "consumers did not register in time"
            time.sleep(0.2)

    def received(self) -> list[list[dict]]:
        """Deliveries per consumer, in arrival order."""
        found = []
        for out in self.outs:
            lines = out.read_text().splitlines() if out.exists() else []
            found.append([json.loads(x) for x in lines if x.endswith("}")])
        return found

    def wait_for(self, predicate, timeout: float = 40.0, settle: float = 1.5) -> list[dict]:
        """Until ``predicate(all deliveries)`` holds, then ``settle`` more seconds
        (to catch duplicates); every delivery of every consumer, each tagged with
        the consumer's index."""
        deadline = time.monotonic() + timeout
        while True:
            flat = self._flat()
            if predicate(flat):
                break
            assert time.monotonic() < deadline, f"only {len(flat)} deliveries after {timeout}s"
            time.sleep(0.2)
        time.sleep(settle)
        return self._flat()

    def _flat(self) -> list[dict]:
        flat = []
        for index, records in enumerate(self.received()):
            for r in records:
                r["consumer"] = index
                flat.append(r)
        return flat

    def stop(self, timeout: float = 40.0) -> list[dict]:
        self.stop_file.touch()
        return [p.finish(timeout) for p in self.procs]

    def kill(self) -> None:
        for p in self.procs:
            p.kill()


class Background:
    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc

    def finish(self, timeout: float = 60.0) -> dict:
        try:
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate()
            return {"ok": False, "error": f"driver did not finish in {timeout}s", "stderr": err}
        return _result(self.proc.returncode, out, err)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()


def assert_ok(results: list[dict]) -> None:
    """Every driver result ok; else the failures' errors and stderr tails in
    the message (a consumer that fails at its stop says why)."""
    bad = [{"error": r.get("error"), "stderr": r.get("stderr", "")[-1500:]}
           for r in results if not r["ok"]]
    assert not bad, bad


# The push driver's result line written before librocketmq's shutdown (cpp_driver).
BEFORE_SHUTDOWN = "before_shutdown"
# What librocketmq 0.4.4 prints when a worker's interruption escapes at its shutdown.
SHUTDOWN_ABORT = "boost::thread_interrupted"


def _result(returncode: int, stdout: str, stderr: str) -> dict:
    """The driver's last JSON line.  A push consumer whose deliveries were all
    reported and that then died of librocketmq's known shutdown abort is ok, with
    the abort noted; any other exit status fails with the driver's output."""
    lines = [x for x in stdout.splitlines() if x.startswith("{")]
    last = json.loads(lines[-1]) if lines else {}
    if returncode != 0 and not _shutdown_abort(last, returncode, stderr):
        return {"ok": False, "error": f"driver exited {returncode}", "stderr": stderr[-4000:],
                "stdout": stdout[-2000:]}
    if not lines:
        return {"ok": False, "error": "driver wrote no result", "stderr": stderr[-4000:]}
    if returncode != 0:
        last["shutdown"] = f"aborted ({returncode}): {SHUTDOWN_ABORT}"
    last["stderr"] = stderr[-4000:]
    return last


def _shutdown_abort(last: dict, returncode: int, stderr: str) -> bool:
    return (last.get("phase") == BEFORE_SHUTDOWN and last.get("ok") is True
            and returncode == -6 and SHUTDOWN_ABORT in stderr)
