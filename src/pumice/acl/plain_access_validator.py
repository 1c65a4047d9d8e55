"""What each request needs from the ACL (4.9's ``PlainAccessValidator.parse``), and the check
the broker runs before any processor sees it.

===============================  =============================================================
request                          needs
===============================  =============================================================
SEND_MESSAGE (10),               ``topic`` PUB; a %RETRY%X topic: X SUB (4.9 checks the
SEND_REPLY_MESSAGE (324)         header's ``group``, a field v1 lacks: nothing; nor 324 at all)
SEND_MESSAGE_V2 (310),           ``b`` (topic) PUB; a %RETRY%X topic: X SUB and group ``a`` SUB
SEND_BATCH_MESSAGE (320),        (4.9: ``a`` only, so any account could fill another group's
SEND_REPLY_MESSAGE_V2 (325)      retry queue; 4.9 checks neither 320 nor 325)
CONSUMER_SEND_MSG_BACK (36)      ``group`` SUB; once the record at ``offset`` is read, its topic
                                 SUB (``read_refusal``; 4.9: the group only, so any record
                                 could be copied into the group's retry topic and read there)
PULL_MESSAGE (11),               ``topic`` SUB, ``consumerGroup`` SUB
LITE_PULL_MESSAGE (361, 5.x)
POP_MESSAGE (200050), ACK_       ``consumerGroup`` SUB, ``topic`` SUB (a POP retry topic's: the
MESSAGE (200051), CHANGE_        topic it retries); BATCH_ACK_MESSAGE: a valid signature only
MESSAGE_INVISIBLETIME (200053)   (its groups are in its body, as 5.3.3's)
QUERY_MESSAGE (12)               ``topic`` SUB
RECALL_MESSAGE (370, 5.x)        ``topic`` PUB
HEART_BEAT (34)                  each consumer's group SUB and each topic it subscribes SUB
UNREGISTER_CLIENT (35)           ``consumerGroup`` SUB
GET_CONSUMER_LIST_BY_GROUP (38)  ``consumerGroup`` SUB
UPDATE_CONSUMER_OFFSET (15)      ``consumerGroup`` SUB, ``topic`` SUB
LOCK_BATCH_MQ (41),              the body's ``consumerGroup`` SUB (not checked by 4.9: any
UNLOCK_BATCH_MQ (42)             account could lock an orderly group's queues)
VIEW_MESSAGE_BY_ID (33)          the message's topic SUB, checked after reading it
                                 (``read_refusal``; not checked by 4.9)
END_TRANSACTION (37)             the half message's real topic PUB, after reading it (4.9:
                                 none; any account could commit another's prepared message)
the admin codes                  an ``admin: true`` account (``permission.ADMIN_CODES``: 4.9's
                                 five, the ACL codes 50-53, the codes that change offsets,
                                 files or other clients, the name server's writes)
any other                        a valid signature only
===============================  =============================================================

A group's resource is its retry topic (``%RETRY%group``). The signed content is every ext
field but ``Signature`` and ``_UNIQUE_KEY_QUERY``, then the body; the Java client signs
``_UNIQUE_KEY_QUERY`` too, so a query signed with it is also accepted (4.9 refuses it).
"""

from __future__ import annotations

import orjson

from pumice.acl.permission import PUB, SUB
from pumice.acl.plain_permission_manager import AclDenied, PlainAccessResource, PlainPermissionManager
from pumice.common.acl_signer import ACCESS_KEY, SIGNATURE, request_content_parts
from pumice.common.extra_info_util import parse_normal_topic
from pumice.common.mix_all import RETRY_GROUP_TOPIC_PREFIX, get_retry_topic
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.remoting_exceptions import RequestRefused
from pumice.remoting.request_code import RequestCode

UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"


def _retry(group: object) -> str | None:
    return None if group is None else get_retry_topic(str(group))


def _name(value: object) -> str | None:
    return None if value is None else str(value)


def _is_retry(topic: object) -> bool:
    return topic is not None and str(topic).startswith(RETRY_GROUP_TOPIC_PREFIX)


def remote_ip(remote_addr: str) -> str:
    """The IP of a channel's ``host:port``."""
    ip = remote_addr.rpartition(":")[0] if ":" in remote_addr else remote_addr
    return ip.strip("[]")


def parse(request: RemotingCommand, remote_ip: str) -> PlainAccessResource:
    """The account, signature, signed content and needed perms of ``request``."""
    res = PlainAccessResource(request_code=request.code, remote_ip=remote_ip)
    ext = request.ext_fields
    if not ext:
        return res
    ak, sig = ext.get(ACCESS_KEY), ext.get(SIGNATURE)
    res.access_key = None if ak is None else str(ak)
    res.signature = None if sig is None else str(sig)
    try:
        _needs(res, request)
    except AclDenied:
        raise
    except Exception as e:  # a body or header 4.9 could not read either
        raise AclDenied(f"{type(e).__name__}: {e}", "parse:134") from e
    res.content = request_content_parts(ext, request.body, (SIGNATURE, UNIQUE_KEY_QUERY))
    if UNIQUE_KEY_QUERY in ext:
        res.alternative_content = request_content_parts(ext, request.body, (SIGNATURE,))
    return res


def _needs(res: PlainAccessResource, request: RemotingCommand) -> None:
    ext, code = request.ext_fields, request.code
    sends: dict[int, tuple[str, str]] = {
        RequestCode.SEND_MESSAGE: ("topic", "group"),
        RequestCode.SEND_REPLY_MESSAGE: ("topic", "group"),
        RequestCode.SEND_MESSAGE_V2: ("b", "a"),
        RequestCode.SEND_BATCH_MESSAGE: ("b", "a"),
        RequestCode.SEND_REPLY_MESSAGE_V2: ("b", "a"),
    }
    if code in sends:  # V2's short names: b is the topic, a the producer group
        topic_field, group_field = sends[code]
        topic = ext.get(topic_field)
        if _is_retry(topic):  # 4.9 checks only the producer group: also the group the topic is of
            res.need(_retry(ext.get(group_field)), SUB)
            res.need(str(topic), SUB)
        else:
            res.need(_name(topic), PUB)
    elif code == RequestCode.CONSUMER_SEND_MSG_BACK:
        res.need(_retry(ext.get("group")), SUB)
    elif code in (RequestCode.PULL_MESSAGE, RequestCode.LITE_PULL_MESSAGE):
        res.need(_name(ext.get("topic")), SUB)
        res.need(_retry(ext.get("consumerGroup")), SUB)
    elif code == RequestCode.QUERY_MESSAGE:
        res.need(_name(ext.get("topic")), SUB)
    elif code == RequestCode.RECALL_MESSAGE:  # 5.3.3: a recall is a send to the topic
        res.need(_name(ext.get("topic")), PUB)
    elif code in (RequestCode.POP_MESSAGE, RequestCode.ACK_MESSAGE, RequestCode.CHANGE_MESSAGE_INVISIBLETIME):
        group = ext.get("consumerGroup")  # an ack names the POP retry topic of a retry message: its topic
        res.need(_retry(group), SUB)
        topic = ext.get("topic")
        res.need(None if topic is None else parse_normal_topic(str(topic), str(group)), SUB)
    elif code == RequestCode.HEART_BEAT:
        heartbeat = orjson.loads(bytes(request.body))
        for consumer in heartbeat.get("consumerDataSet") or []:
            res.need(_retry(consumer.get("groupName")), SUB)
            for sub in consumer.get("subscriptionDataSet") or []:
                res.need(sub.get("topic"), SUB)
    elif code in (RequestCode.UNREGISTER_CLIENT, RequestCode.GET_CONSUMER_LIST_BY_GROUP):
        res.need(_retry(ext.get("consumerGroup")), SUB)
    elif code == RequestCode.UPDATE_CONSUMER_OFFSET:
        res.need(_retry(ext.get("consumerGroup")), SUB)
        res.need(_name(ext.get("topic")), SUB)
    elif code in (RequestCode.LOCK_BATCH_MQ, RequestCode.UNLOCK_BATCH_MQ):
        lock = orjson.loads(bytes(request.body))
        res.need(_retry(lock.get("consumerGroup")), SUB)


def read_refusal(manager: PlainPermissionManager | None, remote_addr: str, request: RemotingCommand,
                 topic: str, perm: int = SUB) -> str | None:  # fmt: skip
    """Why ``request``'s account may not read ``topic`` (``perm`` PUB: write it); None: it may,
    or ACL is off. The check of a topic known only once a record is read; the signature was
    checked before dispatch."""
    if manager is None:
        return None
    ak = request.ext_fields.get(ACCESS_KEY)
    res = PlainAccessResource(request.code, remote_ip(remote_addr), None if ak is None else str(ak))
    res.need(topic, perm)
    try:
        manager.validate(res, check_signature=False)
    except AclDenied as e:
        return e.remark
    return None


class PlainAccessValidator:
    """The check of each request before its processor: every code on the broker (both ports);
    only ``codes`` when given (the name server's writes: its reads stay open)."""

    def __init__(self, manager: PlainPermissionManager, codes: frozenset[int] | None = None) -> None:
        self.manager = manager
        self.codes = codes

    def check(self, remote_addr: str, request: RemotingCommand) -> None:
        """A RemotingServer's ``before_request``: RequestRefused, with 4.9's remark, when the
        request may not go on."""
        if self.codes is not None and request.code not in self.codes:
            return
        try:
            self.manager.validate(parse(request, remote_ip(remote_addr)))
        except AclDenied as e:
            raise RequestRefused(e.remark) from None
