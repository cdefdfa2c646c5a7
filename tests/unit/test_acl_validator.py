"""PlainAccessValidator and PlainPermissionManager on real rule files: every
rule type, every request-code family, reload, and the admin updates (the
broker process tests are in tests/integration/test_acl.py)."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

import orjson
import pytest
import yaml

from rmq.acl import AclClientRPCHook, AclException, SessionCredentials
from rmq.acl.plain_config import PlainAccessConfig
from rmq.acl.signer import cal_signature
from rmq.acl.validator import PlainAccessValidator
from rmq.common.codes import RequestCode
from rmq.common.file_watch import FileWatchService
from rmq.remoting import RemotingCommand

R = RequestCode
HOST = "127.0.0.1:40000"

RULES = """\
globalWhiteRemoteAddresses:
  - 10.10.103.*
accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
      - topicP=PUB
    groupPerms:
      - groupA=DENY
      - groupB=PUB|SUB
      - groupC=SUB
  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
    admin: true
"""


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "plain_acl.yml").write_text(RULES)
    return tmp_path


@pytest.fixture
def validator(home: Path) -> PlainAccessValidator:
    return PlainAccessValidator(str(home))


def signed(code: int, ext: dict | None = None, body: bytes | None = None,
           ak: str = "RocketMQ", sk: str = "12345678") -> RemotingCommand:
    req = RemotingCommand.create_request(code, ext, body)
    AclClientRPCHook(SessionCredentials(ak, sk)).do_before_request(None, req)
    return req


def refusal(validator: PlainAccessValidator, req: RemotingCommand, addr: str = HOST) -> str | None:
    """None when the request may go on, else the refusal's message."""
    try:
        validator.do_before_request(addr, req)
    except AclException as e:
        return str(e)
    return None


def heartbeat(group: str, *topics: str) -> bytes:
    return orjson.dumps({"clientID": "c1", "producerDataSet": [], "consumerDataSet": [
        {"groupName": group, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
         "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "unitMode": False,
         "subscriptionDataSet": [{"topic": t, "subString": "*"} for t in topics]}]})


FAMILIES = [
    # (name, code, ext, body, refusal message or None)
    ("send topicB", R.SEND_MESSAGE, {"topic": "topicB", "producerGroup": "pg"}, b"x", None),
    ("send to a SUB topic", R.SEND_MESSAGE, {"topic": "topicC"}, b"x",
     "No default permission for topic:topicC"),
    ("send to a topic by default DENY", R.SEND_MESSAGE, {"topic": "other"}, b"x",
     "No default permission for topic:other"),
    ("send v2 PUB topic", R.SEND_MESSAGE_V2, {"a": "pg", "b": "topicP"}, b"x", None),
    ("send v2 retry of a DENY group", R.SEND_MESSAGE_V2, {"a": "groupA", "b": "%RETRY%groupA"},
     b"x", "No default permission for group:groupA"),
    ("send v2 retry of a default SUB group", R.SEND_MESSAGE_V2,
     {"a": "groupX", "b": "%RETRY%groupX"}, b"x", None),
    ("send back SUB group", R.CONSUMER_SEND_MSG_BACK, {"group": "groupC", "offset": "1"}, None,
     None),
    ("send back DENY group", R.CONSUMER_SEND_MSG_BACK, {"group": "groupA"}, None,
     "No default permission for group:groupA"),
    ("pull SUB topic", R.PULL_MESSAGE, {"topic": "topicC", "consumerGroup": "groupC"}, None, None),
    ("pull a PUB-only topic", R.PULL_MESSAGE, {"topic": "topicP", "consumerGroup": "groupC"},
     None, "No default permission for topic:topicP"),
    ("query SUB topic", R.QUERY_MESSAGE, {"topic": "topicC", "key": "k"}, None, None),
    ("query DENY topic", R.QUERY_MESSAGE, {"topic": "topicA", "key": "k"}, None,
     "No default permission for topic:topicA"),
    ("heartbeat", R.HEART_BEAT, None, heartbeat("groupB", "topicB", "topicC"), None),
    ("heartbeat subscribing a DENY topic", R.HEART_BEAT, None, heartbeat("groupB", "topicA"),
     "No default permission for topic:topicA"),
    ("heartbeat that is not JSON", R.HEART_BEAT, None, b"\x00garbage", "garbage"),
    ("unregister DENY group", R.UNREGISTER_CLIENT, {"clientID": "c", "consumerGroup": "groupA"},
     None, "No default permission for group:groupA"),
    ("unregister without clientID", R.UNREGISTER_CLIENT, {"consumerGroup": "groupC"}, None,
     "the custom field clientID is null"),
    ("consumer list", R.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "groupC"}, None, None),
    ("offset update", R.UPDATE_CONSUMER_OFFSET,
     {"consumerGroup": "groupC", "topic": "topicC", "queueId": "0", "commitOffset": "5"}, None,
     None),
    ("offset update of a DENY topic", R.UPDATE_CONSUMER_OFFSET,
     {"consumerGroup": "groupC", "topic": "topicA", "queueId": "0", "commitOffset": "5"}, None,
     "No default permission for topic:topicA"),
    ("other codes need only the signature", R.GET_MAX_OFFSET, {"topic": "topicA", "queueId": "0"},
     None, None),
    ("admin-only code", R.UPDATE_AND_CREATE_TOPIC, {"topic": "t"}, None,
     "Need admin permission for request code=17, but accessKey=RocketMQ is not"),
    ("rule listing is admin-only", R.GET_BROKER_CLUSTER_ACL_CONFIG, None, None,
     "Need admin permission for request code=54"),
    ("trace messages always go", R.SEND_MESSAGE_V2, {"a": "pg", "b": "RMQ_SYS_TRACE_TOPIC"}, b"x",
     None),
]


@pytest.mark.parametrize("name,code,ext,body,message", FAMILIES, ids=[f[0] for f in FAMILIES])
def test_request_code_families(validator, name, code, ext, body, message):
    got = refusal(validator, signed(code, ext, body))
    if message is None:
        assert got is None
    else:
        assert got is not None and message in got


def test_refusals_for_keys_and_signatures(validator):
    assert refusal(validator, RemotingCommand.create_request(R.GET_MAX_OFFSET)) == \
        "No accessKey is configured"
    assert refusal(validator, RemotingCommand.create_request(R.GET_MAX_OFFSET, {"t": "x"})) == \
        "No accessKey is configured"
    assert refusal(validator, signed(R.GET_MAX_OFFSET, {"t": "x"}, ak="nobody00")) == \
        "No acl config for nobody00"
    assert refusal(validator, signed(R.SEND_MESSAGE, {"topic": "topicB"}, b"x", sk="wrong___")) \
        == "Check signature failed for accessKey=RocketMQ"
    tampered = signed(R.SEND_MESSAGE, {"topic": "topicB"}, b"x")
    tampered.body = b"y"
    assert refusal(validator, tampered) == "Check signature failed for accessKey=RocketMQ"
    unsigned = signed(R.SEND_MESSAGE, {"topic": "topicB"}, b"x")
    del unsigned.ext_fields["Signature"]
    assert refusal(validator, unsigned) == "Check signature failed for accessKey=RocketMQ"


def test_admin_account_may_use_admin_codes_and_every_resource(validator):
    assert refusal(validator, signed(R.UPDATE_AND_CREATE_TOPIC, {"topic": "t"}, ak="rocketmq2")) \
        is None
    assert refusal(validator, signed(R.PULL_MESSAGE, {"topic": "any", "consumerGroup": "g"},
                                     ak="rocketmq2")) is None


def test_white_addresses_skip_the_signature(validator):
    bare = RemotingCommand.create_request(R.UPDATE_AND_CREATE_TOPIC, {"topic": "t"})
    assert refusal(validator, bare, "10.10.103.9:5000") is None  # global white list
    assert refusal(validator, bare, "10.10.104.9:5000") == "No accessKey is configured"
    wrong = signed(R.UPDATE_AND_CREATE_TOPIC, {"topic": "t"}, ak="rocketmq2", sk="wrong___")
    assert refusal(validator, wrong, "192.168.1.20:5000") is None  # the account's white address
    assert refusal(validator, wrong, "192.168.2.20:5000") == \
        "Check signature failed for accessKey=rocketmq2"


def test_query_signed_by_a_4_9_8_java_client_is_accepted_too(validator):
    ext = {"topic": "topicC", "key": "k", "maxNum": "32", "beginTimestamp": "0",
           "endTimestamp": "1", "_UNIQUE_KEY_QUERY": "true", "AccessKey": "RocketMQ"}
    req = RemotingCommand.create_request(R.QUERY_MESSAGE, dict(ext))
    req.ext_fields["Signature"] = cal_signature(ext, None, "12345678", frozenset({"Signature"}))
    assert refusal(validator, req) is None
    assert refusal(validator, signed(R.QUERY_MESSAGE, ext)) is None  # rmq's signer


def test_refusal_names_the_same_resource_as_java(validator):
    """Both resources are denied; Java reports the first in HashMap order
    (bucket of String.hashCode in a 16-slot table: topicA 0, %RETRY%groupA 8),
    not in the order it added them (the group first for this code)."""
    got = refusal(validator, signed(R.UPDATE_CONSUMER_OFFSET, {
        "consumerGroup": "groupA", "topic": "topicA", "queueId": "0", "commitOffset": "1"}))
    assert got == "No default permission for topic:topicA"


# ---- loading and reload ----------------------------------------------------------------
def test_missing_default_file_is_created_empty_and_denies_everything(tmp_path):
    v = PlainAccessValidator(str(tmp_path))  # conf/ is created too
    assert (tmp_path / "conf" / "plain_acl.yml").read_text() == ""
    assert refusal(v, signed(R.GET_MAX_OFFSET, {"t": "x"})) == "No acl config for RocketMQ"
    assert v.manager.data_version_map() == {}


@pytest.mark.parametrize("text,needle", [
    ("accounts: [{accessKey: short, secretKey: 12345678}]", "The accessKey=short and secretKey"),
    ("accounts: [{accessKey: RocketMQ, secretKey: 12345678, whiteRemoteAddress: '10.*'}]",
     "Netaddress examine scope Exception netaddress is 10.*"),
    ("accounts: [{accessKey: RocketMQ, secretKey: 12345678, topicPerms: [nope]}]",
     "Parse resource permission failed for topic:nope"),
    ("accounts: {accessKey: RocketMQ}", "accounts is not a list"),
    ("- just\n- a list\n", "does not hold a mapping"),
    ("accounts: [\n", "is not valid YAML"),
])
def test_a_bad_file_stops_the_load_and_names_the_file(home, text, needle):
    bad = home / "conf" / "acl"
    bad.mkdir()
    (bad / "bad.yml").write_text(text)
    with pytest.raises(AclException) as info:
        PlainAccessValidator(str(home))
    assert needle in str(info.value) and str(bad / "bad.yml") in str(info.value)


def test_reload_keeps_the_last_good_rules_of_a_broken_file(home, validator, caplog):
    plain = home / "conf" / "plain_acl.yml"
    req = signed(R.SEND_MESSAGE, {"topic": "topicB"}, b"x")
    plain.write_text(RULES.replace("topicB=PUB|SUB", "topicB=SUB") + "  - oops: [\n")
    with caplog.at_level(logging.ERROR):
        validator.manager.reload()
    assert f"ACL file {plain} not applied" in caplog.text
    assert refusal(validator, req) is None  # the old rules are still in force
    plain.write_text(RULES.replace("topicB=PUB|SUB", "topicB=SUB"))
    validator.manager.reload()
    assert refusal(validator, req) == "No default permission for topic:topicB"


def test_files_in_conf_acl_are_added_and_removed_and_the_first_definition_wins(home, validator):
    extra = home / "conf" / "acl" / "team"
    extra.mkdir(parents=True)
    (extra / "team.yaml").write_text(
        "accounts:\n  - accessKey: teamKey1\n    secretKey: teamSecret1\n"
        "    defaultTopicPerm: PUB\n  - accessKey: RocketMQ\n    secretKey: otherSecret\n"
        "    admin: true\n")
    validator.manager.reload()
    assert refusal(validator, signed(R.SEND_MESSAGE, {"topic": "t"}, b"x", "teamKey1",
                                     "teamSecret1")) is None
    # RocketMQ is defined in conf/acl first: that definition wins over plain_acl.yml
    assert refusal(validator, signed(R.UPDATE_AND_CREATE_TOPIC, {"topic": "t"},
                                     sk="otherSecret")) is None
    (extra / "team.yaml").unlink()
    validator.manager.reload()
    assert refusal(validator, signed(R.GET_MAX_OFFSET, {}, None, "teamKey1", "teamSecret1")) == \
        "No acl config for teamKey1"
    assert refusal(validator, signed(R.UPDATE_AND_CREATE_TOPIC, {"topic": "t"})) is not None


async def test_file_watch_service_reports_a_rewrite_within_its_interval(tmp_path):
    f = tmp_path / "a.yml"
    f.write_text("x: 1\n")
    seen: list[list[str]] = []
    watch = FileWatchService("w", lambda: [str(f), str(tmp_path / "b.yml")], seen.append, 0.05)
    await watch.start()
    try:
        f.write_text("x: 2\n")  # same size, maybe the same mtime tick
        for _ in range(200):
            if seen:
                break
            await asyncio.sleep(0.01)
        assert seen == [[str(f)]]
        (tmp_path / "b.yml").write_text("")
        for _ in range(200):
            if len(seen) == 2:
                break
            await asyncio.sleep(0.01)
        assert seen[1] == [str(tmp_path / "b.yml")]
    finally:
        await watch.shutdown()


# ---- the admin updates -------------------------------------------------------------------
def _yaml(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def test_update_creates_an_account_in_the_default_file_with_a_new_version(home, validator):
    m = validator.manager
    config = PlainAccessConfig("newUser01", "newSecret1", "127.0.0.9", False, "PUB", "SUB",
                               ["topicZ=SUB"], ["groupZ=PUB|SUB"])
    assert m.update_access_config(config)
    data = _yaml(home / "conf" / "plain_acl.yml")
    assert data["accounts"][-1] == {"accessKey": "newUser01", "secretKey": "newSecret1",
                                    "whiteRemoteAddress": "127.0.0.9", "admin": False,
                                    "defaultTopicPerm": "PUB", "defaultGroupPerm": "SUB",
                                    "topicPerms": ["topicZ=SUB"], "groupPerms": ["groupZ=PUB|SUB"]}
    assert data["globalWhiteRemoteAddresses"] == ["10.10.103.*"]  # the rest is kept
    assert data["dataVersion"][0]["counter"] == 1
    assert m.default_data_version().counter == 1
    assert refusal(validator, signed(R.SEND_MESSAGE, {"topic": "t"}, b"x", "newUser01",
                                     "newSecret1")) is None
    assert refusal(validator, signed(R.SEND_MESSAGE, {"topic": "topicZ"}, b"x", "newUser01",
                                     "newSecret1")) == "No default permission for topic:topicZ"


def test_update_changes_an_account_where_it_is_defined(home, validator):
    team = home / "conf" / "acl" / "team.yml"
    team.parent.mkdir()
    team.write_text("accounts:\n  - accessKey: teamKey1\n    secretKey: teamSecret1\n"
                    "    whiteRemoteAddress: 10.0.0.1\ndataVersion:\n  - counter: 7\n"
                    "    timestamp: 1700000000000\n")
    m = validator.manager
    m.reload()
    assert m.update_access_config(PlainAccessConfig("teamKey1", "teamSecret2", admin=True))
    data = _yaml(team)
    assert data["accounts"] == [{"accessKey": "teamKey1", "secretKey": "teamSecret2",
                                 "whiteRemoteAddress": "10.0.0.1", "admin": True}]
    assert data["dataVersion"][0]["counter"] == 8
    assert m.data_version_map()[str(team)].counter == 8
    assert "teamKey1" not in (home / "conf" / "plain_acl.yml").read_text()
    assert refusal(validator, signed(R.UPDATE_AND_CREATE_TOPIC, {"topic": "t"}, None, "teamKey1",
                                     "teamSecret2")) is None


@pytest.mark.parametrize("config,needle", [
    (PlainAccessConfig("short", "12345678"), "The accessKey=short and secretKey=12345678"),
    (PlainAccessConfig("longEnough", None), "cannot be null"),
    (PlainAccessConfig("longEnough", "12345678", topicPerms=["topicA"]),
     "Parse Resource format error for topicA"),
    (PlainAccessConfig("longEnough", "12345678", groupPerms=["g=ALL"]),
     "Parse resource permission error for g=ALL"),
    (PlainAccessConfig("longEnough", "12345678", "300.1.1.1"), "Netaddress examine Exception"),
])
def test_a_bad_update_is_refused_and_writes_nothing(home, validator, config, needle):
    before = (home / "conf" / "plain_acl.yml").read_text()
    with pytest.raises(AclException) as info:
        validator.manager.update_access_config(config)
    assert needle in str(info.value)
    assert (home / "conf" / "plain_acl.yml").read_text() == before


def test_delete_removes_the_account_from_its_file(home, validator):
    m = validator.manager
    assert m.delete_access_config("rocketmq2")
    keys = [a["accessKey"] for a in _yaml(home / "conf" / "plain_acl.yml")["accounts"]]
    assert keys == ["RocketMQ"]
    assert refusal(validator, signed(R.GET_MAX_OFFSET, {}, ak="rocketmq2")) == \
        "No acl config for rocketmq2"
    assert not m.delete_access_config("rocketmq2")
    assert not m.delete_access_config("")


def test_global_white_addresses_update_only_acl_files(home, validator):
    m = validator.manager
    assert m.update_global_white_addrs(["127.0.0.5", "192.168.7.*"], "")
    assert _yaml(home / "conf" / "plain_acl.yml")["globalWhiteRemoteAddresses"] == [
        "127.0.0.5", "192.168.7.*"]
    assert refusal(validator, RemotingCommand.create_request(R.UPDATE_AND_CREATE_TOPIC),
                   "127.0.0.5:1") is None
    conf = home / "conf" / "broker.conf"
    conf.write_text("brokerName=a\n")
    assert not m.update_global_white_addrs(["1.1.1.1"], str(conf))
    assert conf.read_text() == "brokerName=a\n"
    assert not m.update_global_white_addrs(["1.1.1.1"], str(home / "conf" / "missing.yml"))
    with pytest.raises(AclException):
        m.update_global_white_addrs(["10.*"], str(home / "conf" / "plain_acl.yml"))
    assert "10.*" not in (home / "conf" / "plain_acl.yml").read_text()


def test_rules_listing_and_versions(home, validator):
    white, configs = validator.manager.all_acl_config()
    assert white == ["10.10.103.*"]
    assert [c.accessKey for c in configs] == ["RocketMQ", "rocketmq2"]
    assert configs[0].secretKey == "12345678"  # a YAML number read as text
    assert configs[0].to_json_obj()["topicPerms"][1] == "topicB=PUB|SUB"
    versions = validator.manager.data_version_map()
    assert list(versions) == [os.path.join(str(home), "conf", "plain_acl.yml")]
    assert versions[list(versions)[0]].counter == 0


def test_the_worked_example_of_docs_security_md_does_what_the_page_says(tmp_path):
    doc = (Path(__file__).resolve().parents[2] / "docs" / "security.md").read_text()
    example = doc.split("```yaml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "plain_acl.yml").write_text(example)
    v = PlainAccessValidator(str(tmp_path))
    order = ("orderService", "change-me-1")
    assert refusal(v, signed(R.SEND_MESSAGE, {"topic": "orders"}, b"x", *order)) is None
    assert refusal(v, signed(R.SEND_MESSAGE, {"topic": "payments"}, b"x", *order)) == \
        "No default permission for topic:payments"
    assert refusal(v, signed(R.PULL_MESSAGE, {"topic": "payments", "consumerGroup": "order-svc"},
                             None, *order)) is None
    assert refusal(v, signed(R.SEND_MESSAGE, {"topic": "orders"}, b"x", "reportingJob",
                             "change-me-2")) == "No default permission for topic:orders"
    create = {"topic": "t", "defaultTopic": "TBW102"}
    assert refusal(v, signed(R.UPDATE_AND_CREATE_TOPIC, create, None, "opsAdmin01",
                             "change-me-3")) is None
    assert refusal(v, signed(R.UPDATE_AND_CREATE_TOPIC, create, None, "opsAdmin01", "wrong"),
                   "10.20.0.7:1") is None
    assert refusal(v, RemotingCommand.create_request(R.UPDATE_AND_CREATE_TOPIC, create),
                   "192.168.0.2:1") is None
    # and the sample rules shipped in conf/ load
    assert PlainAccessValidator(str(Path(__file__).resolve().parents[2])).manager.file_list()
