"""TLS for remoting connections (RocketMQ's ``TlsSystemConfig``/``TlsHelper``).

Server side, 4.9.8 looks at the first byte of every new connection: 0x16 (a
TLS handshake record) means TLS, anything else plaintext (a plain frame starts
with 0x00, the high byte of a length below 16 MiB).  ``tls.server.mode``:

* ``disabled``   -- plaintext only; a ClientHello closes the connection;
* ``permissive`` -- both (the default; unknown values also mean permissive);
* ``enforcing``  -- TLS only; plaintext connections are closed.

Client side, TLS is used when ``tls.enable`` is true (``NettyClientConfig.useTLS``).
With ``tls.test.mode.enable`` (default true) the server uses a self-signed
certificate made on first need (configured paths are ignored) and clients
trust any server certificate, as Java's test mode does.

Settings are the Java system-property names, read from a properties map
(``TlsConfig.from_properties``); the environment is used by default, e.g.
``env tls.server.mode=enforcing rmq-broker ...``.
"""

from __future__ import annotations

import os
import shutil
import ssl
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from rmq.remoting.exceptions import RemotingError

TLS_HANDSHAKE_BYTE = 0x16


class TlsMode(Enum):
    DISABLED = "disabled"
    PERMISSIVE = "permissive"
    ENFORCING = "enforcing"

    @classmethod
    def parse(cls, text: str | None) -> TlsMode:
        """Unknown or missing values parse as permissive, like ``TlsMode.parse``."""
        for mode in cls:
            if text is not None and mode.value == text.strip().lower():
                return mode
        return cls.PERMISSIVE


def _bool(text: str | None, default: bool) -> bool:
    return default if text is None else text.strip().lower() == "true"


@dataclass(slots=True)
class TlsConfig:
    """The ``tls.*`` settings of 4.9.8."""

    serverMode: TlsMode = TlsMode.PERMISSIVE
    clientEnable: bool = False
    testModeEnable: bool = True
    serverNeedClientAuth: str = "none"
    serverKeyPath: str | None = None
    serverKeyPassword: str | None = None
    serverCertPath: str | None = None
    serverTrustCertPath: str | None = None
    clientKeyPath: str | None = None
    clientKeyPassword: str | None = None
    clientCertPath: str | None = None
    clientAuthServer: bool = False
    clientTrustCertPath: str | None = None

    @classmethod
    def from_properties(cls, props: dict[str, str] | os._Environ) -> TlsConfig:
        """Read ``tls.*`` keys; ``tls.config.file`` names a properties file
        whose keys fill what ``props`` leaves unset."""
        merged = dict(props)
        conf_file = merged.get("tls.config.file")
        if conf_file and Path(conf_file).is_file():
            from rmq.common.properties import load_properties

            for k, v in load_properties(conf_file).items():
                merged.setdefault(k, v)
        mode = TlsMode.parse(merged.get("tls.server.mode"))
        get = merged.get
        return cls(
            serverMode=mode,
            clientEnable=_bool(get("tls.enable"), mode is TlsMode.ENFORCING),
            testModeEnable=_bool(get("tls.test.mode.enable"), True),
            serverNeedClientAuth=get("tls.server.need.client.auth", "none"),
            serverKeyPath=get("tls.server.keyPath"),
            serverKeyPassword=get("tls.server.keyPassword"),
            serverCertPath=get("tls.server.certPath"),
            serverTrustCertPath=get("tls.server.trustCertPath"),
            clientKeyPath=get("tls.client.keyPath"),
            clientKeyPassword=get("tls.client.keyPassword"),
            clientCertPath=get("tls.client.certPath"),
            clientAuthServer=_bool(get("tls.client.authServer"), False),
            clientTrustCertPath=get("tls.client.trustCertPath"),
        )

    @classmethod
    def from_environ(cls) -> TlsConfig:
        return cls.from_properties(os.environ)


_self_signed_lock = threading.Lock()
_self_signed: tuple[bytes, bytes] | None = None


def self_signed_certificate() -> tuple[bytes, bytes]:
    """(certificate PEM, key PEM) made once per process with the openssl CLI."""
    global _self_signed
    with _self_signed_lock:
        if _self_signed is None:
            openssl = shutil.which("openssl")
            if openssl is None:
                raise RemotingError("TLS test mode needs the openssl command to make a "
                                    "self-signed certificate; install openssl or set "
                                    "tls.server.certPath/keyPath")
            with tempfile.TemporaryDirectory(prefix="rmq-tls-") as tmp:
                cert, key = Path(tmp, "cert.pem"), Path(tmp, "key.pem")
                subprocess.run(
                    [openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt",
                     "ec_paramgen_curve:prime256v1", "-nodes", "-days", "3650",
                     "-subj", "/CN=rmq", "-keyout", str(key), "-out", str(cert)],
                    check=True, capture_output=True, timeout=30)
                _self_signed = (cert.read_bytes(), key.read_bytes())
        return _self_signed


def _load_pem_pair(ctx: ssl.SSLContext, cert: bytes, key: bytes) -> None:
    with tempfile.TemporaryDirectory(prefix="rmq-tls-") as tmp:
        cpath, kpath = Path(tmp, "cert.pem"), Path(tmp, "key.pem")
        cpath.write_bytes(cert)
        kpath.write_bytes(key)
        ctx.load_cert_chain(cpath, kpath)


def server_context(cfg: TlsConfig) -> ssl.SSLContext:
    """The server's context; blocking (file reads, maybe openssl), call off-loop."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    if cfg.testModeEnable or not (cfg.serverCertPath and cfg.serverKeyPath):
        _load_pem_pair(ctx, *self_signed_certificate())
        ctx.verify_mode = ssl.CERT_NONE
        return ctx
    ctx.load_cert_chain(cfg.serverCertPath, cfg.serverKeyPath, cfg.serverKeyPassword)
    if cfg.serverNeedClientAuth in ("optional", "require"):
        ctx.verify_mode = (ssl.CERT_OPTIONAL if cfg.serverNeedClientAuth == "optional"
                           else ssl.CERT_REQUIRED)
        if cfg.serverTrustCertPath:
            ctx.load_verify_locations(cfg.serverTrustCertPath)
        else:
            ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    return ctx


def client_context(cfg: TlsConfig) -> ssl.SSLContext:
    """The client's context: trusts any server in test mode or without
    ``tls.client.authServer``, as the Java client does."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if cfg.testModeEnable or not cfg.clientAuthServer:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    elif cfg.clientTrustCertPath:
        ctx.load_verify_locations(cfg.clientTrustCertPath)
    else:
        ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    if not cfg.testModeEnable and cfg.clientCertPath and cfg.clientKeyPath:
        ctx.load_cert_chain(cfg.clientCertPath, cfg.clientKeyPath, cfg.clientKeyPassword)
    return ctx
