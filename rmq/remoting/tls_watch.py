"""Certificate rotation for TLS servers (4.9.8: the ``FileWatchService`` that
``BrokerController`` / ``NamesrvController`` put on ``tls.server.certPath``,
``tls.server.keyPath`` and ``tls.server.trustCertPath``).

The files are polled every 0.5 s (as 4.9.8).  A new trust certificate reloads
the server's SSL context at once; a new certificate reloads it only once the
private key has changed too (and the other way round), so a pair replaced one
file after the other is never loaded half old, half new.  The new context is
built off the loop and then swapped in: connections made from then on use it,
connections already open keep theirs.  A context that does not load (a key
that does not match its certificate) is logged and the previous one stays;
the next change of either file then tries again (4.9.8 waits for both to
change once more).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable

from rmq.common.file_watch import FileWatchService
from rmq.remoting.tls import TlsConfig, TlsMode

log = logging.getLogger("rmq.remoting")

WATCH_INTERVAL_S = 0.5


class CertificateWatch:
    """Watches one server's certificate files and calls ``reload`` (a coroutine
    that rebuilds and swaps the context, True when it did) when a complete
    change is on disk."""

    def __init__(self, name: str, cfg: TlsConfig, reload: Callable[[], Awaitable[bool]]) -> None:
        self.name = name
        self.cert, self.key, self.trust = (cfg.serverCertPath, cfg.serverKeyPath,
                                           cfg.serverTrustCertPath)
        self._reload = reload
        self._cert_changed = self._key_changed = False
        self._pending: asyncio.Task | None = None
        # as 4.9.8: only the paths that are set and exist when the server starts
        paths = [p for p in (self.cert, self.key, self.trust) if p and os.path.exists(p)]
        self.watch = FileWatchService(f"{name}-FileWatchService", lambda: paths, self._changed,
                                      WATCH_INTERVAL_S, log)

    @staticmethod
    def wanted(cfg: TlsConfig) -> bool:
        """Only a server with TLS on and its own certificate has files to watch
        (test mode uses a generated certificate)."""
        return (cfg.serverMode is not TlsMode.DISABLED and not cfg.testModeEnable
                and bool(cfg.serverCertPath and cfg.serverKeyPath))

    def _changed(self, paths: list[str]) -> None:
        reload = False
        for path in paths:
            if path == self.trust:
                log.info("%s: the trust certificate changed, reload the ssl context", self.name)
                reload = True
            if path == self.cert:
                self._cert_changed = True
            if path == self.key:
                self._key_changed = True
        if self._cert_changed and self._key_changed:
            log.info("%s: the certificate and private key changed, reload the ssl context",
                     self.name)
            self._cert_changed = self._key_changed = False
            reload = True
        if reload:
            self._pending = asyncio.get_running_loop().create_task(self._apply())

    async def _apply(self) -> None:
        if not await self._reload():
            self._cert_changed = self._key_changed = True  # retry at the next change

    async def start(self) -> None:
        await self.watch.start()

    async def shutdown(self) -> None:
        await self.watch.shutdown()
        if self._pending is not None:
            await asyncio.gather(self._pending, return_exceptions=True)
