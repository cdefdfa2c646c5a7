"""Plain ACL, wire-compatible with RocketMQ 4.9.8's ``rocketmq-acl`` module.

* ``signer``: the request signature (HMAC-SHA1 over the sorted extFields
  values and the body, base64) and the client hook that adds it
  (``AclClientRPCHook``);
* ``remote_address``: the address patterns of ``whiteRemoteAddress`` and
  ``globalWhiteRemoteAddresses`` (``RemoteAddressStrategyFactory``);
* ``permission``: PUB/SUB/DENY bits, ``topicPerms``/``groupPerms`` and the
  admin-only request codes (``Permission``);
* ``plain_config``: the yml rule files (``plain_acl.yml``, ``conf/acl/*.yml``):
  reading, checking and rewriting them;
* ``access_resource``: what a request needs (``PlainAccessValidator.parse``);
* ``permission_manager``: the rules in force, their hot reload and the admin
  updates (``PlainPermissionManager``);
* ``validator``: the broker's server hook (``PlainAccessValidator``).

The broker installs the validator as a remoting server hook; a client
installs the signer as a remoting client hook.
"""

from rmq.acl.errors import AclException
from rmq.acl.signer import AclClientRPCHook, SessionCredentials

__all__ = ["AclClientRPCHook", "AclException", "SessionCredentials"]
