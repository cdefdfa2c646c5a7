"""``AclException``: every refusal and every rule error of plain ACL."""

from __future__ import annotations


class AclException(Exception):
    """A request refused, or an ACL rule or update that is not valid.

    The broker answers a refused request with SYSTEM_ERROR and
    ``<JAVA_NAME>: <message>`` as the remark, as 4.9.8 does, so that the
    messages people search for read the same."""

    JAVA_NAME = "org.apache.rocketmq.acl.common.AclException"
