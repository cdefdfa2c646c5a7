"""The ACL admin codes of RocketMQ 4.9.8's ``AdminBrokerProcessor``
(../shared/spec/PROTOCOL.md 3.5): UPDATE_AND_CREATE_ACL_CONFIG (50),
DELETE_ACL_CONFIG (51), GET_BROKER_CLUSTER_ACL_INFO (52),
UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53), and GET_BROKER_CLUSTER_ACL_CONFIG (54,
served by 4.7 to 4.9.3, dropped from 4.9.8: the rules the broker holds).

With aclEnable=true they act on the plain ACL files through
``rmq.acl.permission_manager`` (the files are rewritten with their
dataVersion + 1 and the change applies at once).  With aclEnable=false they
are answered as 4.9.8 answers them without an access validator: the update
codes fail without a remark, 52 gets no answer, 54 is not supported.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from rmq.acl import AclException
from rmq.acl.plain_config import PlainAccessConfig
from rmq.common import fastjson
from rmq.common.codes import RequestCode, ResponseCode
from rmq.common.logging import BROKER_LOGGER_NAME
from rmq.common.protocol.headers_admin import (
    CreateAccessConfigRequestHeader,
    DeleteAccessConfigRequestHeader,
    GetBrokerAclConfigResponseHeader,
    UpdateGlobalWhiteAddrsConfigRequestHeader,
)
from rmq.remoting import Channel, RemotingCommand
from rmq.remoting.handler_table import not_supported

log = logging.getLogger(BROKER_LOGGER_NAME)

R = RequestCode
RC = ResponseCode


def java_split(text: str | None, sep: str = ",") -> list[str] | None:
    """``UtilAll.split``: Java's ``String.split`` (trailing empty pieces dropped);
    None stays None."""
    if text is None:
        return None
    parts = text.split(sep)
    while len(parts) > 1 and parts[-1] == "":
        parts.pop()
    return parts


def _answer(done: Callable[[], bool], failed_code: int, failed_remark: str) -> RemotingCommand:
    """SUCCESS when ``done()`` is true; the *_FAILED code with ``failed_remark``
    when it is false, or with the error's message when it raises."""
    try:
        ok = done()
    except (AclException, OSError) as e:
        log.error("ACL update failed: %s", e)
        return RemotingCommand.create_response(failed_code, str(e))
    if ok:
        return RemotingCommand.create_response(RC.SUCCESS)
    log.warning(failed_remark)
    return RemotingCommand.create_response(failed_code, failed_remark)


class AdminAclSupport:
    """Handlers of the ACL admin codes; the controller's ``access_validator``
    (None when aclEnable=false) is read at each request."""

    def __init__(self, controller) -> None:
        self.c = controller

    def handlers(self) -> dict[int, Callable]:
        return {R.UPDATE_AND_CREATE_ACL_CONFIG: self.update_and_create_access_config,
                R.DELETE_ACL_CONFIG: self.delete_access_config,
                R.GET_BROKER_CLUSTER_ACL_INFO: self.get_broker_acl_config_version,
                R.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: self.update_global_white_addrs_config,
                R.GET_BROKER_CLUSTER_ACL_CONFIG: self.get_broker_cluster_acl_config}

    def _manager(self):
        validator = self.c.access_validator
        return None if validator is None else validator.manager

    def _disabled(self, channel: Channel, request: RemotingCommand,
                  failed_code: int) -> RemotingCommand:
        """4.9.8 without ACL: the header was checked, then the update fails
        (a NullPointerException there) with no remark."""
        log.error("ACL request %d from %s: the broker does not enable acl", request.code,
                  channel.remote_addr)
        return RemotingCommand.create_response(failed_code)

    def update_and_create_access_config(self, channel: Channel,
                                        request: RemotingCommand) -> RemotingCommand:
        h = request.decode_header(CreateAccessConfigRequestHeader)
        manager = self._manager()
        if manager is None:
            return self._disabled(channel, request, RC.UPDATE_AND_CREATE_ACL_CONFIG_FAILED)
        log.info("updateAndCreateAccessConfig %s called by %s", h.accessKey,
                 channel.remote_addr)
        config = PlainAccessConfig(h.accessKey, h.secretKey, h.whiteRemoteAddress, h.admin,
                                   h.defaultTopicPerm, h.defaultGroupPerm,
                                   java_split(h.topicPerms), java_split(h.groupPerms))
        return _answer(lambda: manager.update_access_config(config),
                       RC.UPDATE_AND_CREATE_ACL_CONFIG_FAILED,
                       f"The accesskey[{h.accessKey}] corresponding to accessConfig has been "
                       f"updated failed.")

    def delete_access_config(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        h = request.decode_header(DeleteAccessConfigRequestHeader)
        manager = self._manager()
        if manager is None:
            return self._disabled(channel, request, RC.DELETE_ACL_CONFIG_FAILED)
        log.info("DeleteAccessConfig called by %s", channel.remote_addr)
        return _answer(lambda: manager.delete_access_config(h.accessKey),
                       RC.DELETE_ACL_CONFIG_FAILED,
                       f"The accesskey[{h.accessKey}] corresponding to accessConfig has been "
                       f"deleted failed.")

    def update_global_white_addrs_config(self, channel: Channel,
                                         request: RemotingCommand) -> RemotingCommand:
        h = request.decode_header(UpdateGlobalWhiteAddrsConfigRequestHeader)
        manager = self._manager()
        if manager is None:
            return self._disabled(channel, request, RC.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED)
        log.info("updateGlobalWhiteAddrsConfig called by %s", channel.remote_addr)
        return _answer(lambda: manager.update_global_white_addrs(java_split(h.globalWhiteAddrs),
                                                                 h.aclFileFullPath),
                       RC.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED,
                       f"The globalWhiteAddresses[{h.globalWhiteAddrs}] has been updated "
                       f"failed.")

    def get_broker_acl_config_version(self, channel: Channel,
                                      request: RemotingCommand) -> RemotingCommand | None:
        manager = self._manager()
        if manager is None:  # 4.9.8 logs the failure and sends no answer at all
            log.error("Failed to generate a proper getBrokerAclConfigVersion response: the "
                      "broker does not enable acl (from %s)", channel.remote_addr)
            return None
        bc = self.c.broker_config
        versions = {path: dv.to_json_obj() for path, dv in manager.data_version_map().items()}
        header = GetBrokerAclConfigResponseHeader(
            version=manager.default_data_version().encode().decode(),
            allAclFileVersion=fastjson.dumps(versions).decode(),
            brokerName=bc.brokerName, brokerAddr=self.c.broker_addr(),
            clusterName=bc.brokerClusterName)
        return RemotingCommand.create_response(RC.SUCCESS, None, header)

    def get_broker_cluster_acl_config(self, channel: Channel,
                                      request: RemotingCommand) -> RemotingCommand:
        manager = self._manager()
        if manager is None:
            return not_supported(request.code)
        white, configs = manager.all_acl_config()
        body = {"globalWhiteAddrs": white,
                "plainAccessConfigs": [c.to_json_obj() for c in configs]}
        return RemotingCommand.create_response(RC.SUCCESS, None, None, fastjson.dumps(body))
