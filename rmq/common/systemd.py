"""systemd readiness and watchdog notifications (``sd_notify``) without libsystemd.

A service started with ``Type=notify`` gets ``$NOTIFY_SOCKET``: a unix datagram
socket (``@name`` = abstract namespace) to which the service sends lines like
``READY=1``, ``STATUS=...``, ``STOPPING=1`` and ``WATCHDOG=1``.  Outside systemd
the variable is unset and every call is a no-op.  ``WatchdogSec`` puts the
interval in ``$WATCHDOG_USEC``; the service must ping at least that often
(we ping at half of it).
"""

from __future__ import annotations

import asyncio
import os
import socket


def _address() -> str | None:
    addr = os.environ.get("NOTIFY_SOCKET")
    if not addr:
        return None
    return "\0" + addr[1:] if addr.startswith("@") else addr


def notify(state: str) -> bool:
    """Send ``state`` (newline-separated assignments); False when not under systemd
    or the socket cannot be reached (never raises: a notification is best effort)."""
    addr = _address()
    if addr is None:
        return False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.connect(addr)
            sock.sendall(state.encode("utf-8"))
        return True
    except OSError:
        return False


def watchdog_interval() -> float | None:
    """Seconds between WATCHDOG=1 pings (half of WatchdogSec), or None when off
    or meant for another process (``$WATCHDOG_PID``)."""
    usec = os.environ.get("WATCHDOG_USEC")
    pid = os.environ.get("WATCHDOG_PID")
    if not usec or (pid and pid != str(os.getpid())):
        return None
    try:
        value = int(usec)
    except ValueError:
        return None
    return value / 2_000_000 if value > 0 else None


async def watchdog_loop(interval: float) -> None:
    """Ping the watchdog forever (cancel to stop); the loop being alive is the
    health signal, so a blocked event loop makes systemd restart the service."""
    while True:
        notify("WATCHDOG=1")
        await asyncio.sleep(interval)
