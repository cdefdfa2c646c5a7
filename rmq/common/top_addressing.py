"""The address server lookup of name-server addresses (``TopAddressing`` and
``MixAll.getWSAddr`` of 4.9.8).

An address server answers ``GET http://<domain>:8080/rocketmq/<subgroup>``
with the name servers as ``host:port;host:port``.  A domain that names its
own port (``host:port``) is used as is.  4.9.8 takes domain and subgroup from
the ``rmqAddressServerDomain`` / ``rmqAddressServerSubGroup`` keys of the
broker's file (its -D ``rocketmq.namesrv.domain`` properties); a unit name is
appended to the URL as ``-<unit>?nofix=1``.
"""

from __future__ import annotations

import logging
import urllib.error
import urllib.request

log = logging.getLogger("rmq.common")

DEFAULT_DOMAIN = "jmenv.tbsite.net"  # MixAll.WS_DOMAIN_NAME
DEFAULT_SUBGROUP = "nsaddr"  # MixAll.WS_DOMAIN_SUBGROUP


def ws_addr(domain: str = DEFAULT_DOMAIN, subgroup: str = DEFAULT_SUBGROUP, unit: str | None = None) -> str:
    url = f"http://{domain}/rocketmq/{subgroup}" if ":" in domain else \
        f"http://{domain}:8080/rocketmq/{subgroup}"
    return f"{url}-{unit}?nofix=1" if unit else url


def fetch_ns_addr(url: str, timeout_s: float = 3.0) -> str | None:
    """The name-server list the address server answers (blocking; run it off
    the loop), None when it cannot be reached or answers anything but 200
    with a non-blank body."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:  # noqa: S310 - a configured http URL
            if resp.status != 200:
                log.error("fetch nameserver address failed. statusCode=%d", resp.status)
                return None
            text = resp.read().decode("utf-8", "replace").strip().replace("\r", "").replace("\n", "")
    except (urllib.error.URLError, OSError, ValueError) as e:
        log.error("fetch name server address exception from %s: %s", url, e)
        return None
    if not text:
        log.error("fetch nameserver address is null from %s", url)
        return None
    return text
