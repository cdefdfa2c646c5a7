"""How the parent reads a C++ driver's exit: only librocketmq's known shutdown abort,
after a push consumer has reported every delivery, is tolerated.  And how the
driver's pull loop treats a pull with no result (librocketmq's Pull scripted)."""

from __future__ import annotations

import json

from tests.interop.harness import BEFORE_SHUTDOWN, SHUTDOWN_ABORT, _result

ABORT_STDERR = f"terminate called after throwing an instance of '{SHUTDOWN_ABORT}'\n"


def _line(**fields) -> str:
    return json.dumps(fields) + "\n"


def test_a_clean_exit_gives_the_last_line():
    out = _line(ok=True, stopped_by="stop", phase=BEFORE_SHUTDOWN) + _line(ok=True,
                                                                            stopped_by="stop")
    result = _result(0, out, "")
    assert result["ok"] and "phase" not in result and "shutdown" not in result


def test_the_shutdown_abort_after_the_result_is_ok_and_noted():
    result = _result(-6, _line(ok=True, stopped_by="stop", phase=BEFORE_SHUTDOWN), ABORT_STDERR)
    assert result["ok"] and result["stopped_by"] == "stop"
    assert SHUTDOWN_ABORT in result["shutdown"]


def test_an_abort_before_the_result_fails():
    result = _result(-6, "", ABORT_STDERR)
    assert not result["ok"] and result["error"] == "driver exited -6"


def test_an_abort_after_a_final_result_or_of_another_kind_fails():
    final = _line(ok=True, stopped_by="stop")
    assert not _result(-6, final, ABORT_STDERR)["ok"]
    early = _line(ok=True, stopped_by="stop", phase=BEFORE_SHUTDOWN)
    assert not _result(-11, early, ABORT_STDERR)["ok"]
    assert not _result(-6, early, "free(): invalid pointer\n")["ok"]


def test_a_failed_op_stays_failed():
    result = _result(0, _line(ok=False, error="RocketMQException: namesrv"), "")
    assert not result["ok"] and "namesrv" in result["error"]


class _Result:
    def __init__(self, status, next_offset: int = 0, max_offset: int = 0) -> None:
        self.pullStatus, self.nextBeginOffset = status, next_offset
        self.minOffset, self.maxOffset, self.size = 0, max_offset, 0


class _Library:
    """librocketmq's Pull, answering from a script (each call's offset kept)."""

    def __init__(self, script: list[_Result]) -> None:
        self.script, self.offsets = script, []

    def Pull(self, handle, mq, expression, offset, max_num):  # noqa: N802 (the C name)
        self.offsets.append(offset.value)
        return self.script.pop(0)

    def ReleasePullResult(self, res) -> None:  # noqa: N802
        pass


class _Queue:
    brokerName, queueId = b"broker-a", 0


def test_a_pull_with_no_result_is_made_again_from_the_same_offset(monkeypatch):
    """BROKER_TIMEOUT (no result: a pull that lost the client's start-up race
    for the broker's first connection) is pulled again from the same offset,
    up to PULL_TIMEOUT_TRIES times in a row; every status is recorded."""
    from tests.interop import cpp_driver as d

    s = d._CPullStatus
    lib = _Library([_Result(s.BROKER_TIMEOUT), _Result(s.FOUND, 7, 7),
                    _Result(s.NO_NEW_MSG, 7, 7)])
    monkeypatch.setattr(d, "dll", lib)
    monkeypatch.setattr(d.ctypes, "byref", lambda x: x)
    record = d._pull_queue(None, _Queue(), {}, 5, {})
    assert record["statuses"] == ["BROKER_TIMEOUT", "FOUND", "NO_NEW_MSG"]
    assert lib.offsets == [5, 5, 7] and record["next"] == 7 and record["max"] == 7

    lib = _Library([_Result(s.BROKER_TIMEOUT)] * d.PULL_TIMEOUT_TRIES + [_Result(s.FOUND)])
    monkeypatch.setattr(d, "dll", lib)
    record = d._pull_queue(None, _Queue(), {}, 5, {})
    assert record["statuses"] == ["BROKER_TIMEOUT"] * d.PULL_TIMEOUT_TRIES
    assert record["next"] == 5 and len(lib.script) == 1
