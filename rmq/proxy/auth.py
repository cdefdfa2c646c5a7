"""The ``authorization`` header of the 5.x clients, checked against the
broker's plain ACL accounts (``aclEnable=true``).

Header: ``MQv2-HMAC-SHA1 Credential=<ak>[/...], SignedHeaders=x-mq-date-time,
Signature=<hex HMAC-SHA1(key = secret key, x-mq-date-time)>`` (5.3.3's
``DefaultAuthenticationContextBuilder``).  A client whose signature holds is
then acted for with its account: the endpoint signs the remoting requests it
dispatches with that account's keys, so the broker's own ACL hook decides
permissions, white lists and refusals exactly as for a 4.x client.  A request
the hook refuses comes back as SYSTEM_ERROR with the ``AclException``; an
authentication failure is ``UNAUTHORIZED``, a permission one ``FORBIDDEN``.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

from rmq.acl.signer import ACCESS_KEY, SIGNATURE, cal_signature
from rmq.proxy.status import Code, ProxyError

AUTHORIZATION = "authorization"
DATE_TIME = "x-mq-date-time"
ACL_REFUSAL = "org.apache.rocketmq.acl.common.AclException: "
_AUTHENTICATION_FAILURES = ("No accessKey", "No acl config", "Check signature failed")


def parse_authorization(header: str) -> tuple[str, str]:
    """(access key, hex signature) of an ``authorization`` header."""
    _, _, rest = header.strip().partition(" ")
    fields = {}
    for part in rest.split(","):
        key, _, value = part.strip().partition("=")
        fields[key] = value
    credential = fields.get("Credential", "")
    return credential.split("/", 1)[0], fields.get("Signature", "")


def authenticate(manager: Any, metadata: dict[str, str]) -> tuple[str, str] | None:
    """The account (access key, secret key) the call is signed with; None for a
    call without credentials (left to the broker's white lists).  Raises
    UNAUTHORIZED when the signature does not hold."""
    header = metadata.get(AUTHORIZATION, "")
    access_key, signature = parse_authorization(header) if header else ("", "")
    if not access_key:
        return None
    secret_key = manager.secret_key(access_key)
    if secret_key is None:
        raise ProxyError(Code.UNAUTHORIZED, f"No acl config for {access_key}")
    expected = hmac.new(secret_key.encode(), metadata.get(DATE_TIME, "").encode(),
                        hashlib.sha1).hexdigest()
    if not hmac.compare_digest(expected, signature.lower()):
        raise ProxyError(Code.UNAUTHORIZED, f"Check signature failed for accessKey={access_key}")
    return access_key, secret_key


def sign(ext: dict[str, str], body: bytes | None, credentials: tuple[str, str]) -> None:
    """Add the account's AccessKey and Signature to a request's extFields."""
    ext[ACCESS_KEY] = credentials[0]
    ext[SIGNATURE] = cal_signature(ext, body, credentials[1])


def refusal(remark: str | None) -> ProxyError | None:
    """The 5.x status of an ACL refusal by the broker's hook, else None."""
    if not remark or not remark.startswith(ACL_REFUSAL):
        return None
    message = remark[len(ACL_REFUSAL):].rsplit(", ", 1)[0]
    code = Code.UNAUTHORIZED if message.startswith(_AUTHENTICATION_FAILURES) else Code.FORBIDDEN
    return ProxyError(code, message)
