"""Socket helpers shared by the remoting servers and the HA service."""

from __future__ import annotations


def listen_error(exc: OSError, host: str, port: int) -> OSError:
    """The bind failure, naming the address: a broker listens on three ports
    (main, fast, HA) and "Address already in use" alone does not say which."""
    return OSError(exc.errno, f"cannot listen on {host}:{port}: {exc.strerror or exc}")
