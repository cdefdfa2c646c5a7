"""A Prometheus scrape endpoint on the process's event loop.

RocketMQ 5 exports its metrics through OpenTelemetry's Prometheus exporter
(``metricsExporterType=PROM``, ``metricsPromExporterHost``/``Port``).  rmq
serves the same text format from the loop that owns the counters: a scrape
reads them in the thread that writes them, so no lock sits on the send and
pull paths, and there is no extra process or thread.  The text is made by
``prometheus_client`` from a registry of collectors that read the process's
own statistics when scraped (nothing is counted twice), and written by
``metrics_text.render``, which gives prometheus_client's bytes faster.
"""

from __future__ import annotations

import asyncio
import logging

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry

from rmq.common.metrics_text import render

log = logging.getLogger("rmq.metrics")

PROM = "PROM"
_MAX_REQUEST = 16 * 1024


def exporter_enabled(exporter_type: str) -> bool:
    """True for ``metricsExporterType=PROM`` (any case); other exporters of
    RocketMQ 5 (GRPC, LOG) are refused at start-up by the caller."""
    return exporter_type.strip().upper() == PROM


def exporter_type_error(exporter_type: str) -> str | None:
    """A one-line error for an exporter type rmq does not serve, else None."""
    value = exporter_type.strip().upper()
    if value in ("", "DISABLE", PROM):
        return None
    return f"metricsExporterType={exporter_type} is not supported (DISABLE or PROM)"


class MetricsHttpServer:
    """``GET /metrics`` (and ``/``) answered with the registry's text."""

    def __init__(self, registry: CollectorRegistry, host: str, port: int) -> None:
        self.registry = registry
        self.host = host or "0.0.0.0"
        self.port = port
        self._server: asyncio.base_events.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("Prometheus metrics on http://%s:%d/metrics", self.host, self.port)

    async def shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError,
                ConnectionError):
            writer.close()
            return
        parts = head.split(b"\r\n", 1)[0].split()
        if len(parts) < 2 or len(head) > _MAX_REQUEST:
            status, ctype, body = b"400 Bad Request", b"text/plain", b"bad request\n"
        elif parts[0] not in (b"GET", b"HEAD"):
            status, ctype, body = b"405 Method Not Allowed", b"text/plain", b"GET only\n"
        elif parts[1].split(b"?", 1)[0] not in (b"/metrics", b"/"):
            status, ctype, body = b"404 Not Found", b"text/plain", b"try /metrics\n"
        else:
            try:
                status, ctype, body = b"200 OK", CONTENT_TYPE_LATEST.encode(), \
                    render(self.registry)
            except Exception as exc:  # noqa: BLE001 - a collector bug: say so, keep serving
                log.exception("metrics collection failed")
                status, ctype, body = b"500 Internal Server Error", b"text/plain", \
                    f"collection failed: {exc}\n".encode()
        writer.write(b"HTTP/1.1 " + status + b"\r\nContent-Type: " + ctype +
                     b"\r\nContent-Length: " + str(len(body)).encode() +
                     b"\r\nConnection: close\r\n\r\n" + (b"" if parts[:1] == [b"HEAD"] else body))
        try:
            await writer.drain()
        except ConnectionError:
            pass
        writer.close()
