"""The plain-ACL calls of ``DefaultMQAdminExt`` / ``MQClientAPIImpl`` 4.9.8
(``createAndUpdatePlainAccessConfig``, ``deletePlainAccessConfig``,
``updateGlobalWhiteAddrConfig``, ``examineBrokerClusterAclVersionInfo``) and
4.9.3's ``examineBrokerClusterAclConfig`` (code 54, the rules a broker holds).
"""

from __future__ import annotations

from dataclasses import dataclass

from rmq.acl.plain_config import PlainAccessConfig
from rmq.client.api import MQClientAPI, loads
from rmq.common.codes import RequestCode as RC
from rmq.common.data_version import DataVersion
from rmq.common.protocol.headers_admin import (
    CreateAccessConfigRequestHeader,
    DeleteAccessConfigRequestHeader,
    GetBrokerAclConfigResponseHeader,
    UpdateGlobalWhiteAddrsConfigRequestHeader,
)


@dataclass(slots=True)
class ClusterAclVersionInfo:
    """GET_BROKER_CLUSTER_ACL_INFO's answer (``ClusterAclVersionInfo``)."""

    cluster_name: str
    broker_name: str
    broker_addr: str
    acl_config_data_version: DataVersion  # the default file's
    all_acl_config_data_version: dict[str, DataVersion]  # file path -> version


@dataclass(slots=True)
class AclConfig:
    """GET_BROKER_CLUSTER_ACL_CONFIG's answer (``AclConfig``)."""

    global_white_addrs: list[str]
    plain_access_configs: list[PlainAccessConfig]


def _join(items: list[str] | None) -> str | None:
    """``UtilAll.join``: a comma list, None for None."""
    return None if items is None else ",".join(items)


class AclAdmin:
    """ACL administration of brokers, over an ``MQClientAPI`` (signed when
    its remoting client signs)."""

    def __init__(self, api: MQClientAPI) -> None:
        self.api = api

    async def create_and_update_plain_access_config(self, addr: str,
                                                    config: PlainAccessConfig) -> None:
        header = CreateAccessConfigRequestHeader(
            accessKey=config.accessKey, secretKey=config.secretKey,
            whiteRemoteAddress=config.whiteRemoteAddress, admin=config.admin,
            defaultTopicPerm=config.defaultTopicPerm, defaultGroupPerm=config.defaultGroupPerm,
            topicPerms=_join(config.topicPerms), groupPerms=_join(config.groupPerms))
        await self.api.call(addr, RC.UPDATE_AND_CREATE_ACL_CONFIG, header)

    async def delete_plain_access_config(self, addr: str, access_key: str) -> None:
        await self.api.call(addr, RC.DELETE_ACL_CONFIG,
                            DeleteAccessConfigRequestHeader(accessKey=access_key))

    async def update_global_white_addr_config(self, addr: str, addresses: str,
                                              acl_file_full_path: str | None = None) -> None:
        """``addresses`` is the comma list; no path means the default file (sent
        as an empty path: 4.9.8 brokers require the field)."""
        await self.api.call(addr, RC.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
                            UpdateGlobalWhiteAddrsConfigRequestHeader(
                                globalWhiteAddrs=addresses,
                                aclFileFullPath=acl_file_full_path or ""))

    async def examine_broker_cluster_acl_version_info(self, addr: str) -> ClusterAclVersionInfo:
        resp = await self.api.call(addr, RC.GET_BROKER_CLUSTER_ACL_INFO)
        h = resp.decode_header(GetBrokerAclConfigResponseHeader)
        versions = loads(h.allAclFileVersion.encode()) if h.allAclFileVersion else {}
        return ClusterAclVersionInfo(
            h.clusterName, h.brokerName, h.brokerAddr, DataVersion.decode(h.version),
            {path: DataVersion.from_json_obj(v) for path, v in versions.items()})

    async def examine_broker_cluster_acl_config(self, addr: str) -> AclConfig:
        resp = await self.api.call(addr, RC.GET_BROKER_CLUSTER_ACL_CONFIG)
        body = loads(resp.body) if resp.body else {}
        return AclConfig(list(body.get("globalWhiteAddrs") or []),
                         [PlainAccessConfig.from_yaml(c)
                          for c in body.get("plainAccessConfigs") or []])
