"""Running ``rmq-admin`` as a subprocess against a Cluster, for the
tests of its mqadmin commands: what a script calling mqadmin sees (stdout,
one-line stderr, exit status)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import orjson

from rmq.client import ConsumeFromWhere, ConsumerConfig, ConsumeStatus, PushConsumer
from rmq.testing.cluster import Cluster
from rmq.testing.wait import wait_until

ADMIN = "rmq.tools.admin"


@dataclass
class AdminRun:
    rc: int
    out: str
    err: str


def _argv(ns: str | None, args: tuple[str, ...]) -> list[str]:
    return [sys.executable, "-m", ADMIN, args[0], *(["-n", ns] if ns else []), *args[1:]]


async def admin_run(ns: str | None, *args: str, timeout: float = 60.0,
                    cwd: str | None = None) -> AdminRun:
    """``rmq-admin args[0] -n ns args[1:]`` in a thread, so the test's event loop
    (and the clients on it) keeps serving meanwhile."""
    res = await asyncio.to_thread(subprocess.run, _argv(ns, args), capture_output=True,
                                  text=True, timeout=timeout, cwd=cwd, env=dict(os.environ))
    return AdminRun(res.returncode, res.stdout, res.stderr)


async def admin_ok(ns: str, *args: str, timeout: float = 60.0, cwd: str | None = None) -> str:
    r = await admin_run(ns, *args, timeout=timeout, cwd=cwd)
    assert r.rc == 0 and r.err == "", f"{args}: rc={r.rc} {r.err}"
    return r.out


async def admin_json(ns: str, *args: str, timeout: float = 60.0, cwd: str | None = None):
    return orjson.loads(await admin_ok(ns, *args, "--json", timeout=timeout, cwd=cwd))


async def admin_fails(ns: str | None, *args: str, rc: int = 1) -> str:
    """The one stderr line of a failing command."""
    r = await admin_run(ns, *args)
    assert r.rc == rc, f"{args}: rc={r.rc} out={r.out!r} err={r.err!r}"
    lines = r.err.strip().splitlines()
    assert len(lines) == 1, r.err
    return lines[0]


async def admin_until(ns: str, args: tuple[str, ...], done: Callable[[list[str]], bool],
                      timeout: float = 60.0,
                      on_line: Callable[[str], Awaitable[None]] | None = None) -> list[str]:
    """Run a command that prints as it goes (until stopped) and read its lines
    until ``done(lines)``; then stop it (SIGINT, as Ctrl-C) and return them."""
    proc = await asyncio.create_subprocess_exec(*_argv(ns, args), stdout=subprocess.PIPE,
                                                stderr=subprocess.PIPE)
    lines: list[str] = []
    try:
        async with asyncio.timeout(timeout):
            while not done(lines):
                raw = await proc.stdout.readline()
                if not raw:
                    err = (await proc.stderr.read()).decode()
                    raise AssertionError(f"{args} ended: {lines} {err}")
                lines.append(raw.decode().rstrip("\n"))
                if on_line is not None:
                    await on_line(lines[-1])
    finally:
        if proc.returncode is None:
            proc.send_signal(2)
            try:
                async with asyncio.timeout(15):
                    await proc.wait()
            except TimeoutError:
                proc.kill()
                await proc.wait()
    return lines


@asynccontextmanager
async def recording_consumer(c: Cluster, group: str, topic: str, expression: str = "*",
                             wait_for: int = 0) -> AsyncIterator[tuple[PushConsumer, list]]:
    """A push consumer from the first offset whose listener records every
    message; started, and on entry holding ``wait_for`` messages."""
    received: list = []

    def listener(msgs, ctx):
        received.extend(msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(group, listener=listener, config=ConsumerConfig(
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET),
        client_config=c.client_config(f"{group}-consumer"))
    consumer.subscribe(topic, expression)
    await consumer.start()
    try:
        await wait_until(lambda: len(received) >= wait_for, 30)
        yield consumer, received
    finally:
        await consumer.shutdown()
