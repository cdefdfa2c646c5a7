"""Request signatures of plain ACL (RocketMQ ``AclSigner``, ``AclUtils`` and
``AclClientRPCHook``), see ../shared/spec/PROTOCOL.md section 6.1.

What is signed, in this order::

    value of every extFields entry, keys sorted as Java sorts Strings,
    without Signature (and without _UNIQUE_KEY_QUERY, see below)  -- UTF-8
    the body bytes, if any

``Signature`` = base64(HMAC-SHA1(key = secret key as UTF-8, data)).  Keys are
not signed, nor are the code, flag, opaque, version or remark.

The 4.9.8 Java client signs ``_UNIQUE_KEY_QUERY`` (QUERY_MESSAGE) while the
4.9.8 broker leaves it out, so that query fails under ACL there.  rmq's
signer leaves it out (accepted by both brokers) and rmq's broker accepts
either form.
"""

from __future__ import annotations

import base64
import functools
import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from rmq.remoting import RemotingCommand
from rmq.remoting.codec import _stringify

ACCESS_KEY = "AccessKey"
SECRET_KEY = "SecretKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"
UNIQUE_MSG_QUERY_FLAG = "_UNIQUE_KEY_QUERY"

# extFields keys left out of the signed text
UNSIGNED = frozenset({SIGNATURE, UNIQUE_MSG_QUERY_FLAG})


def java_sorted(keys: Iterable[str]) -> list[str]:
    """Keys in ``TreeMap<String, ...>`` order: by UTF-16 code units (the same as
    code points unless a key holds characters beyond the BMP)."""
    ordered = sorted(keys)
    if "".join(ordered).isascii():
        return ordered
    return sorted(ordered, key=lambda k: k.encode("utf-16-be"))


@functools.lru_cache(maxsize=1024)
def _hmac_pads(secret_key: str) -> tuple:
    """HMAC-SHA1 (RFC 2104) with the key's inner and outer pads hashed once:
    each signature then copies two SHA-1 states instead of setting up a new
    HMAC (half the cost on the broker's send path)."""
    key = secret_key.encode("utf-8")
    if len(key) > 64:
        key = hashlib.sha1(key).digest()
    key = key.ljust(64, b"\0")
    return (hashlib.sha1(bytes(b ^ 0x36 for b in key)),
            hashlib.sha1(bytes(b ^ 0x5C for b in key)))


def _body_parts(body) -> Iterable:
    if not body:
        return ()
    return body if type(body) is list else (body,)


def cal_signature(ext_fields: Mapping[str, str], body, secret_key: str,
                  unsigned: frozenset[str] = UNSIGNED) -> str:
    """The signature of a request's extFields (all values str) and body."""
    text = "".join([ext_fields[k] for k in java_sorted(ext_fields) if k not in unsigned])
    inner_pad, outer_pad = _hmac_pads(secret_key)
    inner = inner_pad.copy()
    inner.update(text.encode("utf-8"))
    for part in _body_parts(body):
        inner.update(part)
    outer = outer_pad.copy()
    outer.update(inner.digest())
    return base64.b64encode(outer.digest()).decode("ascii")


@dataclass(slots=True)
class SessionCredentials:
    """An account's keys as a client holds them (``SessionCredentials``)."""

    access_key: str
    secret_key: str
    security_token: str | None = None


class AclClientRPCHook:
    """Signs every request a client sends (``AclClientRPCHook``): adds
    ``AccessKey`` (and ``SecurityToken``), then ``Signature``."""

    __slots__ = ("credentials",)

    def __init__(self, credentials: SessionCredentials) -> None:
        self.credentials = credentials

    def do_before_request(self, remote_addr: str | None, request: RemotingCommand) -> None:
        cred = self.credentials
        # a fresh map: a caller's dict may be shared; values as they go on the wire
        ext = {k: v if type(v) is str else _stringify(v)
               for k, v in (request.ext_fields or {}).items() if v is not None}
        ext[ACCESS_KEY] = cred.access_key
        if cred.security_token is not None:
            ext[SECURITY_TOKEN] = cred.security_token
        ext[SIGNATURE] = cal_signature(ext, request.body, cred.secret_key)
        request.ext_fields = ext

    def do_after_response(self, remote_addr: str | None, request: RemotingCommand,
                          response: RemotingCommand | None) -> None:
        return None
