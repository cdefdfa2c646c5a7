"""Running ``rmq-admin`` as a subprocess against a MessagingCluster, for the
tests of its mqadmin commands: what a script calling mqadmin sees (stdout,
one-line stderr, exit status)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import orjson

from tests.support.procs import run_cli

ADMIN = "rmq.tools.admin"


@dataclass
class AdminRun:
    rc: int
    out: str
    err: str


async def admin_run(ns: str | None, *args: str, timeout: float = 60.0) -> AdminRun:
    """``rmq-admin args[0] -n ns args[1:]`` in a thread, so the test's event loop
    (and the clients on it) keeps serving meanwhile."""
    argv = [args[0], *(["-n", ns] if ns else []), *args[1:]]
    res = await asyncio.to_thread(run_cli, ADMIN, argv, timeout)
    return AdminRun(res.returncode, res.stdout, res.stderr)


async def admin_ok(ns: str, *args: str, timeout: float = 60.0) -> str:
    r = await admin_run(ns, *args, timeout=timeout)
    assert r.rc == 0 and r.err == "", f"{args}: rc={r.rc} {r.err}"
    return r.out


async def admin_json(ns: str, *args: str, timeout: float = 60.0):
    return orjson.loads(await admin_ok(ns, *args, "--json", timeout=timeout))


async def admin_fails(ns: str | None, *args: str, rc: int = 1) -> str:
    """The one stderr line of a failing command."""
    r = await admin_run(ns, *args)
    assert r.rc == rc, f"{args}: rc={r.rc} out={r.out!r} err={r.err!r}"
    lines = r.err.strip().splitlines()
    assert len(lines) == 1, r.err
    return lines[0]
