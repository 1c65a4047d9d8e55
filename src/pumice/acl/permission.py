"""ACL permissions, as RocketMQ 4.9's ``Permission``.

==========  =====  ========================================================================
name        bit    meaning
==========  =====  ========================================================================
DENY        1      nothing, whatever else is set
ANY         2      (needed only) either PUB or SUB will do
PUB         4      send to the topic
SUB         8      pull from the topic, or consume as the group
==========  =====  ========================================================================

``topicA=PUB|SUB`` in a file: the perm names are matched exactly after trimming (``PUB``,
``SUB``, ``PUB|SUB``, ``SUB|PUB``, ``DENY``); any other text is DENY.
"""

from __future__ import annotations

from pumice.remoting.request_code import RequestCode

DENY = 1
ANY = 1 << 1
PUB = 1 << 2
SUB = 1 << 3

_PERMS = {"PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB, "DENY": DENY}

# the request codes an account needs ``admin: true`` for: 4.9's five, then the ones 4.9 lets any
# signed account send (the ACL's own codes: an account could make itself admin; offsets, files and
# other clients' consumption changed), then the name server's writes (NAMESRV_WRITE_CODES)
ADMIN_CODES_4_9 = frozenset(
    {
        RequestCode.UPDATE_AND_CREATE_TOPIC,
        RequestCode.UPDATE_BROKER_CONFIG,
        RequestCode.DELETE_TOPIC_IN_BROKER,
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
        RequestCode.DELETE_SUBSCRIPTIONGROUP,
    }
)
ACL_ADMIN_CODES = frozenset(
    {
        RequestCode.UPDATE_AND_CREATE_ACL_CONFIG,
        RequestCode.DELETE_ACL_CONFIG,
        RequestCode.GET_BROKER_CLUSTER_ACL_INFO,
        RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
    }
)
BROKER_ADMIN_WRITE_CODES = frozenset(
    {
        RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
        RequestCode.CLONE_GROUP_OFFSET,
        RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE,
        RequestCode.CLEAN_UNUSED_TOPIC,
        RequestCode.DELETE_EXPIRED_COMMITLOG,
        RequestCode.TRIGGER_DELETE_FILES,
        RequestCode.RESUME_CHECK_HALF_MESSAGE,
        RequestCode.CONSUME_MESSAGE_DIRECTLY,
        RequestCode.SET_MESSAGE_REQUEST_MODE,  # mqadmin 5's setConsumeMode: a group's POP or PULL, kept on disk
    }
)
# every name-server request that changes its state (routes, broker liveness, KV config, its config)
NAMESRV_WRITE_CODES = frozenset(
    {
        RequestCode.REGISTER_BROKER,
        RequestCode.UNREGISTER_BROKER,
        RequestCode.QUERY_DATA_VERSION,  # an unchanged broker counts as alive: it keeps a route up
        RequestCode.DELETE_TOPIC_IN_NAMESRV,
        RequestCode.WIPE_WRITE_PERM_OF_BROKER,
        RequestCode.ADD_WRITE_PERM_OF_BROKER,
        RequestCode.UPDATE_NAMESRV_CONFIG,
        RequestCode.PUT_KV_CONFIG,
        RequestCode.DELETE_KV_CONFIG,
    }
)
ADMIN_CODES = ADMIN_CODES_4_9 | ACL_ADMIN_CODES | BROKER_ADMIN_WRITE_CODES | NAMESRV_WRITE_CODES


class AclError(Exception):
    """A request the ACL refuses, or an ACL file or update that is not valid."""


def check_permission(needed: int, owned: int) -> bool:
    if owned & DENY:
        return False
    if needed & ANY:
        return bool(owned & (PUB | SUB))
    return bool(needed & owned)


def parse_perm(text: str | None) -> int:
    """A perm name as 4.9 reads it: unknown text (or none) is DENY."""
    return DENY if text is None else _PERMS.get(str(text).strip(), DENY)


def split_resource(entry: str, kind: str) -> tuple[str, int]:
    """``name=PERM`` of a topicPerms (kind "topic") or groupPerms ("group") entry."""
    items = [s for s in str(entry).split("=") if s]  # StringUtils.split drops empty tokens
    if len(items) != 2:
        raise AclError(f"Parse resource permission failed for {kind}:{entry}")
    return items[0].strip(), parse_perm(items[1])


def check_resource_perms(entries: list[str]) -> None:
    """The stricter check of an update over the wire: ``Res=Perm`` with a known perm."""
    for entry in entries:
        items = [s for s in str(entry).split("=") if s]
        if len(items) != 2:
            raise AclError(
                f"Parse Resource format error for {entry}.\n"
                "The expected resource format is 'Res=Perm'. For example: topicA=SUB"
            )
        if items[1].strip() != "DENY" and parse_perm(items[1]) == DENY:
            raise AclError(
                f"Parse resource permission error for {entry}.\n"
                "The expected permissions are 'SUB' or 'PUB' or 'SUB|PUB' or 'PUB|SUB'."
            )
