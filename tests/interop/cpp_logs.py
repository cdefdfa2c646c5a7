"""Reading the C++ client's own logs: the suite fails on protocol errors and timeouts.

librocketmq writes ``$HOME/logs/rocketmq-cpp/<pid>_rocketmq-cpp.log.N`` with lines
like ``[2026-Nov-21 07:01:35.556094](error):text[function:line]``.  Its error and
warning lines fall in four groups:

- benign: written on every normal shutdown or first start (kept in ``BENIGN``);
- start-up races: two client threads opening the first connection to a broker at
  once; the loser gives up on the transport table's lock almost at once (seen
  within a millisecond, although the client prints ``m_tcpTransportTryLockTimeout:3``)
  and retries on its next cycle.  Accepted within ``startup_s`` of a log's first line,
  and so is what the loser's request reports right after it (``RACE_AFTERMATH``: a
  rebalance's consumer-list request made on the transport it gave up on);
- transport: connection loss, reconnects and request timeouts, and the empty
  consumer list a restarted broker reports until the next heartbeat.  They are
  expected only while a test restarts the broker, so they are accepted inside the
  restart windows a test declares (plus a grace period covering the clients' 30 s
  heartbeat) and are failures anywhere else;
- everything else at error level, and the warnings in ``PROTOCOL_WARNINGS``: the
  client disagreed with what rmq sent (bad JSON, missing header, unexpected code).
  Always a failure unless the test expects that exact text (``expected``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

LINE = re.compile(r"^\[(\d{4}-\w{3}-\d{2} \d{2}:\d{2}:\d{2}\.\d+)\]\((\w+)\):(.*)$")

BENIGN = (
    "TcpRemotingClient::stopAllTcpTransportThread End",
    "CloseTransport of:",
    "can not readOffset from offsetStore.json",  # local offset store, first start
    "Retry many times, still failed",  # the real error follows as its own line
    "tryToFindTopicPublishInfo null",  # ditto (no route)
    "sendheartbeat brokeradd is empty",  # heartbeat timer before the first route
    "didn't get the session_credentials",  # route refresh before start() finishes
)

# Once a consumer shuts down it unregisters; the broker tells the rest of the group,
# and a consumer already shutting down may rebalance after its own unregistration
# and find the group empty (4.9.8 answers GET_CONSUMER_LIST_BY_GROUP for an empty
# group with SYSTEM_ERROR "no consumer for this group" too).
SHUTDOWN_MARK = "DefaultMQPushConsumer shutdown"
BENIGN_AT_SHUTDOWN = (
    "no consumer for this group",
    "doRebalance the cidAll is empty",
    "produce pullmsg of mq",  # a pull answered after shutdown began is dropped
)

TRANSPORT = (
    "waitResponse of code",
    "get timed_mutex timeout",  # a connect to the restarted broker holds the lock
    "wait response timeout",
    "no response got for opaque",
    "response already timeout",
    "callback timeout",
    "response is null",
    "can not connect",
    "socket connect failure",
    "tcpTransport with server disconnected",
    "eventcb: received error event",
    "go to fault state",
    "invokeAsync failed",
    "invokeAsync retry failed",
    "invokeOneway failed",
    "pullMessageAsync failed",
    "Async pull exception",
    "occurs exception, reproduce it",
    "produce pullmsg of mq",
    "send failed of",
    "closeTransport",
    "connect to",
    "updateConsumeOffsetToBroker error",
    "updateConsumeOffset of mq",
    "The broker not exist",
)

# A restarted broker has forgotten its client tables (4.9.8 keeps them in memory
# too) until each client's next heartbeat, up to 30 s later; meanwhile the
# clients' 10 s rebalances are told the group is empty, or lacks themselves.
RESTART_RACES = (
    "no consumer for this group",
    "doRebalance the cidAll is empty",
    "could not find clientId from Broker",
)

# A thread that finds the transport table locked by another one opening the same
# connection fails at once instead of waiting (logged at error level); at start-up
# the heartbeat, route refresh and first pulls all open the broker connection.
STARTUP_RACES = ("get timed_mutex timeout",)
# what the loser's request logs next, within ``RACE_AFTERMATH_S`` of it: no
# response (a rebalance: the consumer list is unknown until the next one, 20 s
# later at most; a sync pull: no result, which the pull reports as BROKER_TIMEOUT)
RACE_AFTERMATH = ("response is null", "doRebalance the cidAll is empty",
                  "The pullResult NULL of")
RACE_AFTERMATH_S = 0.1

# The first rebalance asks for the consumer list while the client's threads are
# still opening the broker connection.  Seen once in CI, at a push consumer's
# start by the test's timings and with no restart near: that query went
# unanswered for the client's whole consumer-list timeout (5 s; it logs only
# 'response is null', then the rebalance skips the topic and redoes it 10 s
# later).  Accepted only that
# early in a log and only after the whole timeout (an answer missing at once is
# the start-up race's aftermath or a failure), with the 'cidAll is empty' after it.
FIRST_QUERY_UNANSWERED = ("response is null", "[findConsumerIds:")
CONSUMER_LIST_TIMEOUT_S = 5.0

PROTOCOL_WARNINGS = (
    "get error response",
    "unregisterClient fail",
    "decode LockBatchResponseBody error",
    "the msg of pull result is NULL",
    "message's topic not equal mq's topic",
    "impossible BROKER_TIMEOUT",
)


@dataclass(slots=True)
class LogCheck:
    """What a test accepts from the client's logs."""

    windows: list[tuple[datetime, datetime]] = field(default_factory=list)
    expected: tuple[str, ...] = ()
    grace_s: float = 40.0
    startup_s: float = 5.0


def parse_time(stamp: str) -> datetime:
    return datetime.strptime(stamp, "%Y-%b-%d %H:%M:%S.%f")


def log_files(home: Path) -> list[Path]:
    return sorted((home / "logs" / "rocketmq-cpp").glob("*rocketmq-cpp.log*"))


def _in_window(when: datetime, check: LogCheck) -> bool:
    for start, end in check.windows:
        if start <= when and (when - end).total_seconds() <= check.grace_s:
            return True
    return False


def lines_before(home: Path, problem: str, count: int = 8) -> list[str]:
    """The ``count`` log lines written before ``problem`` (an entry of :func:`problems`)
    in the same file: what the client was doing when it logged it."""
    name, _, raw = problem.partition(": ")
    for path in log_files(home):
        if f"{home.name}/{path.name}" != name:
            continue
        lines = path.read_text(errors="replace").splitlines()
        if raw in lines:
            at = lines.index(raw)
            return lines[max(0, at - count):at]
    return []


def problems(home: Path, check: LogCheck | None = None) -> list[str]:
    """Every log line that makes the scenario fail, with its file name."""
    check = check or LogCheck()
    bad: list[str] = []
    for path in log_files(home):
        shutting_down = False
        started: datetime | None = None
        raced: datetime | None = None  # the last start-up race accepted
        for raw in path.read_text(errors="replace").splitlines():
            m = LINE.match(raw)
            if m is None:
                continue
            when, level, text = parse_time(m.group(1)), m.group(2), m.group(3)
            started = started or when
            shutting_down = shutting_down or SHUTDOWN_MARK in text
            if level not in ("error", "fatal", "warning"):
                continue
            if any(b in text for b in BENIGN) or any(e in text for e in check.expected):
                continue
            if shutting_down and any(b in text for b in BENIGN_AT_SHUTDOWN):
                continue
            if (any(r in text for r in STARTUP_RACES)
                    and (when - started).total_seconds() <= check.startup_s):
                raced = when
                continue
            if raced is not None and any(a in text for a in RACE_AFTERMATH) \
                    and (when - raced).total_seconds() <= RACE_AFTERMATH_S:
                continue
            if (all(f in text for f in FIRST_QUERY_UNANSWERED)
                    and CONSUMER_LIST_TIMEOUT_S <= (when - started).total_seconds()
                    <= check.startup_s + CONSUMER_LIST_TIMEOUT_S):
                raced = when  # what it logs right after is its aftermath
                continue
            if any(t in text for t in TRANSPORT + RESTART_RACES):
                if not _in_window(when, check):
                    bad.append(f"{home.name}/{path.name}: {raw}")
                continue
            if level != "warning" or any(p in text for p in PROTOCOL_WARNINGS):
                bad.append(f"{home.name}/{path.name}: {raw}")
    return bad
