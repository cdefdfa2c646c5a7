"""TLS on the gRPC port, with the broker's remoting TLS settings (``tls.*``,
``rmq.remoting.tls.TlsConfig``) as 5.3.3's proxy takes them from
``TlsSystemConfig``:

* ``tls.server.mode=disabled``: plaintext only, grpcio listening on the port;
* ``enforcing``: TLS only, grpcio's own TLS on the port;
* ``permissive`` (the default): both on the one port, as 5.3.3's
  ``ProxyAndTlsProtocolNegotiator`` does.  grpcio cannot tell them apart on a
  port, so the port is an asyncio listener that reads the first byte of each
  connection (0x16, a TLS handshake record, or anything else) and pipes the
  connection to grpcio listening on one of two unix sockets, plaintext or TLS.
  The client's side of each pipe is bound to an abstract unix name that maps
  back to the client's TCP address, so the endpoint still sees who called.

Certificates: the broker's ``tls.server.certPath`` / ``keyPath``, or with
``tls.test.mode.enable`` (the default) the broker's self-signed one;
``tls.server.need.client.auth=require`` asks for client certificates signed
by ``tls.server.trustCertPath``.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import socket
from pathlib import Path

import grpc

from rmq.remoting.tls import TLS_HANDSHAKE_BYTE, TlsConfig, self_signed_certificate

log = logging.getLogger("rmq.proxy")

PIPE_BUFFER_HIGH = 1 << 20


def server_credentials(cfg: TlsConfig) -> grpc.ServerCredentials:
    """grpcio's credentials from the broker's TLS settings (blocking: files,
    maybe openssl)."""
    if cfg.testModeEnable or not (cfg.serverCertPath and cfg.serverKeyPath):
        cert, key = self_signed_certificate()
        return grpc.ssl_server_credentials([(key, cert)])
    if cfg.serverKeyPassword:
        raise ValueError("an encrypted tls.server.keyPath is not supported on the gRPC port")
    key = Path(cfg.serverKeyPath).read_bytes()
    cert = Path(cfg.serverCertPath).read_bytes()
    roots = None
    require = cfg.serverNeedClientAuth in ("optional", "require")
    if require and cfg.serverTrustCertPath:
        roots = Path(cfg.serverTrustCertPath).read_bytes()
    return grpc.ssl_server_credentials(
        [(key, cert)], root_certificates=roots,
        require_client_auth=cfg.serverNeedClientAuth == "require" and roots is not None)


class _Half(asyncio.Protocol):
    """One side of a pipe: what it receives goes to ``other``; a full write
    buffer on one side pauses reading on the other."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.other: _Half | None = None
        self.pending: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        transport.set_write_buffer_limits(high=PIPE_BUFFER_HIGH)  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        other = self.other
        if other is None or other.transport is None:
            self.pending.append(data)
        else:
            other.transport.write(data)

    def pause_writing(self) -> None:
        if self.other is not None and self.other.transport is not None:
            self.other.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.other is not None and self.other.transport is not None:
            self.other.transport.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        other = self.other
        if other is not None and other.transport is not None:
            other.transport.close()


class _Front(_Half):
    """A client connection on the TCP port, piped to grpcio once its first
    byte says plaintext or TLS."""

    def __init__(self, splitter: PortSplitter) -> None:
        super().__init__()
        self.splitter = splitter
        self.started = False

    def data_received(self, data: bytes) -> None:
        if not self.started:
            self.started = True
            self.transport.pause_reading()
            self.pending.append(data)
            asyncio.get_running_loop().create_task(self._connect(data[0] == TLS_HANDSHAKE_BYTE))
            return
        super().data_received(data)

    async def _connect(self, tls: bool) -> None:
        peer = self.transport.get_extra_info("peername") if self.transport else None
        if peer is None:
            return
        name = self.splitter.bind_name(f"{peer[0]}:{peer[1]}")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind("\0" + name)
            sock.setblocking(False)
            loop = asyncio.get_running_loop()
            await loop.sock_connect(sock, self.splitter.tls_path if tls else self.splitter.plain_path)
            back = _Half()
            back.other = self  # grpcio speaks first (its SETTINGS frame): pair before
            await loop.create_unix_connection(lambda: back, sock=sock)
        except OSError as exc:
            sock.close()
            self.splitter.forget(name)
            log.warning("gRPC port: cannot reach the endpoint for %s: %s", peer, exc)
            if self.transport is not None:
                self.transport.close()
            return
        self.other = back
        back.name = name  # type: ignore[attr-defined]
        if self.transport is None:  # the client left meanwhile
            back.transport.close()
            return
        for chunk in self.pending:
            back.transport.write(chunk)
        self.pending.clear()
        self.transport.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        back = self.other
        super().connection_lost(exc)
        if back is not None:
            self.splitter.forget(getattr(back, "name", ""))


class PortSplitter:
    """The TCP port of permissive mode: each connection piped to grpcio's
    plaintext or TLS unix socket."""

    def __init__(self, directory: str) -> None:
        self.plain_path = os.path.join(directory, "plain.sock")
        self.tls_path = os.path.join(directory, "tls.sock")
        self._ids = itertools.count()
        self._prefix = f"rmq-grpc-{os.getpid()}-{id(self):x}-"
        self.peers: dict[str, str] = {}  # abstract unix name -> client's host:port
        self.server: asyncio.AbstractServer | None = None

    def bind_name(self, peer: str) -> str:
        name = f"{self._prefix}{next(self._ids)}"
        self.peers[name] = peer
        return name

    def forget(self, name: str) -> None:
        self.peers.pop(name, None)

    def peer_of(self, grpc_peer: str) -> str | None:
        """The client's address of a connection grpcio saw on a unix socket
        (``unix-abstract:<name>`` / ``unix:@<name>``)."""
        for prefix in ("unix-abstract:", "unix:@", "unix:\0", "unix:"):
            if grpc_peer.startswith(prefix):
                return self.peers.get(grpc_peer[len(prefix):].lstrip("\0@"))
        return None

    async def start(self, port: int) -> None:
        loop = asyncio.get_running_loop()
        self.server = await loop.create_server(lambda: _Front(self), "0.0.0.0", port,
                                               reuse_address=True)

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None
