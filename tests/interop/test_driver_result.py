"""How the parent reads a C++ driver's exit: only librocketmq's known shutdown abort,
after a push consumer has reported every delivery, is tolerated."""

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
