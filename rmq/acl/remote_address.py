"""Remote-address patterns of plain ACL (RocketMQ ``RemoteAddressStrategyFactory``).

A pattern is matched against the peer's IP (port stripped).  The forms, as
4.9.8 reads them:

=====================================  =============================================
pattern                                matches
=====================================  =============================================
empty / absent                         nothing
``*``, ``*.*.*.*``, ``*:*:*:*:*:*:*:*``  everything
``192.168.0.1``, ``::1``               that address (IPv6 compared expanded)
``192.168.0.{1,2}``, ``fe80::{a,b}``   the listed last parts
``192.168.0.1,192.168.0.2``            the listed addresses
``192.168.1.*``, ``192.168.*.*``       any value of the first ``*`` part (four parts
                                       needed: ``10.*`` is refused, write ``10.*.*.*``)
``192.168.1.1-100``, ``10.1-9.*.*``    the first range (or ``*``) part in range
``1050:0:0:0:5:600:300c:*``, ``...:1-ff``  the same for IPv6, hex values
=====================================  =============================================

A pattern that does not parse raises ``AclException`` with 4.9.8's message.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from rmq.acl.errors import AclException
from rmq.acl.permission import split_tokens

_ALL = frozenset({"*", "*.*.*.*", "*:*:*:*:*:*:*:*"})


def is_inet4(text: str) -> bool:
    """commons-validator ``isValidInet4Address`` (no leading zeros)."""
    try:
        ipaddress.IPv4Address(text)
    except ValueError:
        return False
    return True


def is_inet6(text: str) -> bool:
    """commons-validator ``isValidInet6Address``."""
    if not text or ":" not in text:
        return False
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return True


def expand_ip(address: str, parts: int) -> str:
    """``AclUtils.expandIP``: upper case, ``::`` expanded to make ``parts``
    groups, every group zero-padded to four digits (IPv4 text is unchanged)."""
    address = address.upper()
    pad = parts - address.count(":")
    if pad > 0:
        address = address.replace("::", ":" * (pad + 1))
    return ":".join(g.rjust(4, "0") if len(g) < 4 else g for g in address.split(":"))


def peer_ip(remote_addr: str | None) -> str | None:
    """The IP a pattern is matched against: ``host:port`` without the port,
    brackets and zone; an IPv4-mapped IPv6 address as IPv4 (as Java sees it)."""
    if remote_addr is None:
        return None
    host = remote_addr[:remote_addr.rfind(":")] if ":" in remote_addr else remote_addr
    host = host.strip("[]").split("%", 1)[0]
    if host.lower().startswith("::ffff:") and is_inet4(host[7:]):
        return host[7:]
    return host


class RemoteAddressStrategy:
    """Matches one peer IP; subclasses per pattern form."""

    __slots__ = ()

    def match(self, ip: str | None) -> bool:
        raise NotImplementedError


class _Nothing(RemoteAddressStrategy):
    __slots__ = ()

    def match(self, ip: str | None) -> bool:
        return False


class _Everything(RemoteAddressStrategy):
    __slots__ = ()

    def match(self, ip: str | None) -> bool:
        return True


NOTHING = _Nothing()
EVERYTHING = _Everything()


class MultipleRemoteAddressStrategy(RemoteAddressStrategy):
    __slots__ = ("addresses",)

    def __init__(self, addresses: list[str]) -> None:
        found = set()
        for a in addresses:
            if is_inet4(a):
                found.add(a)
            elif is_inet6(a):
                found.add(expand_ip(a, 8))
            else:
                raise AclException(f"Netaddress examine Exception netaddress is {a}")
        self.addresses = frozenset(found)

    def match(self, ip: str | None) -> bool:
        if ip is None:
            return False
        return (expand_ip(ip, 8) if is_inet6(ip) else ip) in self.addresses


class OneRemoteAddressStrategy(RemoteAddressStrategy):
    __slots__ = ("expanded",)

    def __init__(self, address: str) -> None:
        if not (is_inet4(address) or is_inet6(address)):
            raise AclException(f"Netaddress examine Exception netaddress is {address}")
        self.expanded = expand_ip(address, 8)

    def match(self, ip: str | None) -> bool:
        return ip is not None and expand_ip(ip, 8) == self.expanded


@dataclass(slots=True)
class _Range:
    head: str  # the fixed leading parts, as matched text
    index: int  # which part holds the range
    start: int
    end: int


def _scope_error(address: str) -> AclException:
    return AclException(f"Netaddress examine scope Exception netaddress is {address}")


def _parse_part(value: str, hexadecimal: bool) -> tuple[int, int] | None:
    """A ``*`` or ``a-b`` part as (start, end); None for a plain value."""
    top = 0xFFFF if hexadecimal else 255
    if value == "*":
        return 0, top
    if "-" not in value:
        return None
    if value.startswith("-"):
        raise AclException(f"RangeRemoteAddressStrategy netaddress examine scope Exception "
                           f"value {value} ")
    bounds = split_tokens(value, "-")
    start, end = (int(b, 16 if hexadecimal else 10) for b in bounds[:2])
    if not (0 <= start <= top and 0 <= end <= top and start <= end):
        raise AclException(f"RangeRemoteAddressStrategy netaddress examine scope Exception "
                           f"start is {start} , end is {end}")
    return start, end


def _leading_in_scope(address: str, count: int, ipv6: bool) -> bool:
    """``AclUtils.isScope``: the first ``count`` parts are valid numbers (an
    IPv4 pattern must have four parts).  4.9.8 checks the parts before the one
    just before the range part, so ``count`` is the range part's index - 1."""
    parts = split_tokens(expand_ip(address, 8), ":") if ipv6 else split_tokens(address, ".")
    if not ipv6 and len(parts) != 4:
        return False
    try:
        values = [int(p.strip(), 16 if ipv6 else 10) for p in parts[:count]]
    except ValueError:
        return False
    return all(0 <= v <= (0xFFFF if ipv6 else 255) for v in values)


def _ipv6_check(address: str) -> None:
    """``AclUtils.IPv6AddressCheck``: ``*`` only last; a range in the last part
    (or the one before a final ``*``)."""
    star, minus = address.find("*"), address.find("-")
    if star > -1 and star != len(address) - 1:
        raise _scope_error(address)
    if minus > -1:
        last = address.rfind(":")
        limit = last if star == -1 else address.rfind(":", 0, last)
        if minus <= limit:
            raise _scope_error(address)


def _ipv6_head(address: str) -> str:
    """``AclUtils.v6ipProcess``: the expanded parts before the range part."""
    star, minus = "*" in address, "-" in address
    if star and minus:
        last = address.rfind(":")
        return expand_ip(address[:address.rfind(":", 0, last)], 6)
    if not star and not minus:
        return expand_ip(address, 8)
    return expand_ip(address[:address.rfind(":")], 7)


class RangeRemoteAddressStrategy(RemoteAddressStrategy):
    __slots__ = ("range", "ipv6")

    def __init__(self, address: str) -> None:
        self.ipv6 = ":" in address
        try:
            rng = self._parse6(address) if self.ipv6 else self._parse4(address)
        except (ValueError, IndexError):
            raise _scope_error(address) from None
        if rng is None:
            raise _scope_error(address)
        self.range = rng

    @staticmethod
    def _parse4(address: str) -> _Range | None:
        parts = split_tokens(address, ".")
        for index in (1, 2, 3):
            bounds = _parse_part(parts[index].strip(), False)
            if bounds is not None and bounds[1] > 0:
                if not _leading_in_scope(address, index - 1, False):
                    raise _scope_error(address)
                head = "".join(p.strip() + "." for p in parts[:index])
                return _Range(head, index, *bounds)
        return None

    @staticmethod
    def _parse6(address: str) -> _Range | None:
        _ipv6_check(address)
        parts = split_tokens(address, ":")
        for index in range(1, len(parts)):
            bounds = _parse_part(parts[index].strip(), True)
            if bounds is not None and bounds[1] > 0:
                if not _leading_in_scope(address, index - 1, True):
                    raise _scope_error(address)
                head = _ipv6_head(address)
                return _Range(head, len(split_tokens(head, ":")), *bounds)
        return None

    def match(self, ip: str | None) -> bool:
        rng = self.range
        if ip is None:
            return False
        if is_inet4(ip) and not self.ipv6:
            if not ip.startswith(rng.head):
                return False
            rest = ip[len(rng.head):].split(".")
            return rng.start <= int(rest[0]) <= rng.end
        if is_inet6(ip) and self.ipv6:
            full = expand_ip(ip, 8)
            if not full.startswith(rng.head):
                return False
            return rng.start <= int(full[5 * rng.index:5 * rng.index + 4], 16) <= rng.end
        return False


def _braced(address: str) -> list[str]:
    """``192.168.0.{1,2}`` -> the listed addresses (``AclUtils.getAddresses``)."""
    sep = ":" if ":" in address else "."
    parts = split_tokens(address, sep)
    if sep == "." and len(parts) < 4:
        raise AclException(f"MultipleRemoteAddressStrategy has got a/some wrong format "
                           f"IP(s) {address}")
    last = parts[-1] if parts else ""
    if not last.startswith("{"):
        raise AclException(f"MultipleRemoteAddressStrategy netaddress examine scope "
                           f"Exception netaddress {address}")
    prefix = address[:address.index("{")]
    return [prefix + p for p in split_tokens(last[1:-1], ",")]


def remote_address_strategy(pattern: str | None) -> RemoteAddressStrategy:
    """``RemoteAddressStrategyFactory.getRemoteAddressStrategy``."""
    if pattern is None or not pattern.strip():
        return NOTHING
    if pattern in _ALL:
        return EVERYTHING
    if pattern.endswith("}"):
        return MultipleRemoteAddressStrategy(_braced(pattern))
    if "," in pattern:
        return MultipleRemoteAddressStrategy(split_tokens(pattern, ","))
    if "*" in pattern or "-" in pattern:
        return RangeRemoteAddressStrategy(pattern)
    return OneRemoteAddressStrategy(pattern)
