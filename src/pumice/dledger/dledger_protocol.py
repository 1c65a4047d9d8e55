"""The DLedger protocol: request codes and the JSON bodies peers exchange (dledger 0.3.1.2,
``protocol/*.java``), written as fastjson writes them and read as leniently as fastjson reads them.

Frames are ordinary remoting frames on the ``dLegerPeers`` port: a request has the code below and
no extFields; a response has remoting code 200, no extFields and no remark, the request's opaque,
and the real outcome in the body's ``code`` (DLEDGER.md §2.1).

Request codes (``DLedgerRequestCode``):

=====  ===================  ==================================  ==========================
code   name                 request body                        response body
=====  ===================  ==================================  ==========================
50000  METADATA             MetadataRequest                     MetadataResponse
50001  APPEND               AppendEntryRequest                  AppendEntryResponse
50002  GET                  GetEntriesRequest                   GetEntriesResponse
51001  VOTE                 VoteRequest                         VoteResponse
51002  HEART_BEAT           HeartBeatRequest                    HeartBeatResponse
51003  PULL                 PullEntriesRequest                  (none: DLedger answers nothing)
51004  PUSH                 PushEntryRequest                    PushEntryResponse
51005  LEADERSHIP_TRANSFER  LeadershipTransferRequest           LeadershipTransferResponse
=====  ===================  ==================================  ==========================

Every body has ``RequestOrResponse``'s fields: ``group``, ``remoteId`` (the addressee),
``localId`` (the sender), ``code`` (int, 200), ``leaderId``, ``term`` (long, -1). The JSON:

* fields in alphabetical order; ``null`` fields left out; primitives always written;
* ``byte[]`` as Base64; enums by name; an entry as ``{"body","bodyCrc","chainCrc","channel",
  "index","magic","pos","size","term"}``;
* getters without a field are written too: PushEntryRequest's ``batch``, ``count``,
  ``firstEntryIndex``, ``lastEntryIndex`` (and ``totalSize``, a field that counts only the batch);
* on reading, unknown fields are ignored and missing ones keep their defaults; a body that is
  not a JSON object, or a field of the wrong type, raises ``DLedgerProtocolError``.
"""

from __future__ import annotations

import base64
import binascii
from enum import Enum, IntEnum
from typing import Any, ClassVar, TypeVar

import orjson

from pumice.dledger.dledger_entry import DLedgerEntry
from pumice.dledger.dledger_response_code import DLedgerResponseCode


class DLedgerRequestCode(IntEnum):
    METADATA = 50000
    APPEND = 50001
    GET = 50002
    VOTE = 51001
    HEART_BEAT = 51002
    PULL = 51003
    PUSH = 51004
    LEADERSHIP_TRANSFER = 51005


class DLedgerProtocolError(ValueError):
    """A body that cannot be read as the message it should be."""


class VoteResult(Enum):
    UNKNOWN = "UNKNOWN"
    ACCEPT = "ACCEPT"
    REJECT_UNKNOWN_LEADER = "REJECT_UNKNOWN_LEADER"
    REJECT_UNEXPECTED_LEADER = "REJECT_UNEXPECTED_LEADER"
    REJECT_EXPIRED_VOTE_TERM = "REJECT_EXPIRED_VOTE_TERM"
    REJECT_ALREADY_VOTED = "REJECT_ALREADY_VOTED"
    REJECT_ALREADY_HAS_LEADER = "REJECT_ALREADY_HAS_LEADER"
    REJECT_TERM_NOT_READY = "REJECT_TERM_NOT_READY"
    REJECT_TERM_SMALL_THAN_LEDGER = "REJECT_TERM_SMALL_THAN_LEDGER"
    REJECT_EXPIRED_LEDGER_TERM = "REJECT_EXPIRED_LEDGER_TERM"
    REJECT_SMALL_LEDGER_END_INDEX = "REJECT_SMALL_LEDGER_END_INDEX"
    REJECT_TAKING_LEADERSHIP = "REJECT_TAKING_LEADERSHIP"


class PushType(Enum):
    APPEND = "APPEND"
    COMMIT = "COMMIT"
    COMPARE = "COMPARE"
    TRUNCATE = "TRUNCATE"


# -- field kinds ----------------------------------------------------------------------------

_I32 = (-(1 << 31), (1 << 31) - 1)
_I64 = (-(1 << 63), (1 << 63) - 1)


def _number(name: str, v: Any, bounds: tuple[int, int]) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        raise DLedgerProtocolError(f"field {name!r} is not a number: {v!r}")
    try:
        n = int(v)
    except ValueError:
        raise DLedgerProtocolError(f"field {name!r} is not a number: {v!r}") from None
    if not bounds[0] <= n <= bounds[1]:
        raise DLedgerProtocolError(f"field {name!r} is out of range: {n}")
    return n


def _bytes(name: str, v: Any) -> bytes:
    if not isinstance(v, str):
        raise DLedgerProtocolError(f"field {name!r} is not Base64 text")
    try:
        return base64.b64decode(v, validate=True)
    except (binascii.Error, ValueError):
        raise DLedgerProtocolError(f"field {name!r} is not valid Base64") from None


def _read(kind: str, name: str, v: Any) -> Any:
    if kind == "str":
        if not isinstance(v, (str, int)) or isinstance(v, bool):
            raise DLedgerProtocolError(f"field {name!r} is not text: {v!r}")
        return str(v)
    if kind == "int":
        return _number(name, v, _I32)
    if kind == "long":
        return _number(name, v, _I64)
    if kind == "bool":
        if not isinstance(v, bool):
            raise DLedgerProtocolError(f"field {name!r} is not a boolean: {v!r}")
        return v
    if kind == "bytes":
        return _bytes(name, v)
    if kind == "entry":
        return entry_from_json(v)
    if kind == "entries":
        if not isinstance(v, list):
            raise DLedgerProtocolError(f"field {name!r} is not a list")
        return [entry_from_json(e) for e in v]
    if kind == "longs":
        if not isinstance(v, list):
            raise DLedgerProtocolError(f"field {name!r} is not a list")
        return [_number(name, e, _I64) for e in v]
    if kind == "bytes_list":
        if not isinstance(v, list):
            raise DLedgerProtocolError(f"field {name!r} is not a list")
        return [_bytes(name, e) for e in v]
    if kind == "map":
        if not isinstance(v, dict):
            raise DLedgerProtocolError(f"field {name!r} is not an object")
        return {str(k): str(x) for k, x in v.items()}
    if kind == "vote_result":
        try:
            return VoteResult(v)
        except ValueError:
            raise DLedgerProtocolError(f"field {name!r}: unknown vote result {v!r}") from None
    if kind == "push_type":
        try:
            return PushType(v)
        except ValueError:
            raise DLedgerProtocolError(f"field {name!r}: unknown push type {v!r}") from None
    raise AssertionError(kind)


def _write(kind: str, v: Any) -> Any:
    if kind in ("bytes",):
        return base64.b64encode(v).decode()
    if kind == "entry":
        return entry_to_json(v)
    if kind == "entries":
        return [entry_to_json(e) for e in v]
    if kind == "bytes_list":
        return [base64.b64encode(b).decode() for b in v]
    if kind in ("vote_result", "push_type"):
        return v.value
    if kind == "map":
        return dict(sorted(v.items()))
    return v


_ENTRY_FIELDS = (
    ("body", "body", "bytes"),
    ("bodyCrc", "body_crc", "int"),
    ("chainCrc", "chain_crc", "int"),
    ("channel", "channel", "int"),
    ("index", "index", "long"),
    ("magic", "magic", "int"),
    ("pos", "pos", "long"),
    ("size", "size", "int"),
    ("term", "term", "long"),
)


def entry_to_json(entry: DLedgerEntry) -> dict[str, Any]:
    """An entry as fastjson writes a ``DLedgerEntry`` (its size as set, not recomputed)."""
    return {
        "body": base64.b64encode(entry.body).decode(),
        "bodyCrc": entry.body_crc,
        "chainCrc": entry.chain_crc,
        "channel": entry.channel,
        "index": entry.index,
        "magic": entry.magic,
        "pos": entry.pos,
        "size": entry.size,
        "term": entry.term,
    }


def entry_from_json(obj: Any) -> DLedgerEntry:
    if not isinstance(obj, dict):
        raise DLedgerProtocolError("an entry is not a JSON object")
    entry = DLedgerEntry()
    for json_name, attr, kind in _ENTRY_FIELDS:
        v = obj.get(json_name)
        if v is not None:
            setattr(entry, attr, _read(kind, json_name, v))
    return entry


# -- the messages ---------------------------------------------------------------------------

M = TypeVar("M", bound="RequestOrResponse")


class RequestOrResponse:
    """The fields every DLedger body carries; subclasses add theirs in ``FIELDS``:
    (JSON name, attribute, kind, default, written when null)."""

    BASE_FIELDS: ClassVar[tuple[tuple[str, str, str, Any], ...]] = (
        ("group", "group", "str", None),
        ("remoteId", "remote_id", "str", None),
        ("localId", "local_id", "str", None),
        ("code", "code", "int", 200),
        ("leaderId", "leader_id", "str", None),
        ("term", "term", "long", -1),
    )
    FIELDS: ClassVar[tuple[tuple[str, str, str, Any], ...]] = ()

    group: str | None
    remote_id: str | None
    local_id: str | None
    code: int
    leader_id: str | None
    term: int

    def __init__(self, **kwargs: Any) -> None:
        for _, attr, _, default in self.BASE_FIELDS + self.FIELDS:
            setattr(self, attr, list(default) if isinstance(default, list) else default)
        for k, v in kwargs.items():
            if not hasattr(self, k):
                raise TypeError(f"{type(self).__name__} has no field {k!r}")
            setattr(self, k, v)

    def __repr__(self) -> str:
        fields = ", ".join(f"{a}={getattr(self, a)!r}" for _, a, _, _ in self.BASE_FIELDS + self.FIELDS)
        return f"{type(self).__name__}({fields})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self.to_json_dict() == other.to_json_dict()  # type: ignore[attr-defined]

    __hash__ = None  # type: ignore[assignment]

    def derived(self) -> dict[str, Any]:
        """Getters without a field, written by fastjson (PushEntryRequest's)."""
        return {}

    def to_json_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for json_name, attr, kind, _ in self.BASE_FIELDS + self.FIELDS:
            v = getattr(self, attr)
            if v is not None:
                out[json_name] = _write(kind, v)
        out.update(self.derived())
        return out

    def encode(self) -> bytes:
        """The body as fastjson's ``JSON.toJSONBytes`` writes it."""
        return orjson.dumps(self.to_json_dict(), option=orjson.OPT_SORT_KEYS)

    @classmethod
    def decode(cls: type[M], body: bytes | bytearray | memoryview | None) -> M:
        if not body:
            raise DLedgerProtocolError(f"{cls.__name__}: the request has no body")
        try:
            obj = orjson.loads(bytes(body))
        except orjson.JSONDecodeError as e:
            raise DLedgerProtocolError(f"{cls.__name__}: the body is not JSON: {e}") from None
        if not isinstance(obj, dict):
            raise DLedgerProtocolError(f"{cls.__name__}: the body is not a JSON object")
        msg = cls()
        for json_name, attr, kind, _ in cls.BASE_FIELDS + cls.FIELDS:
            v = obj.get(json_name)
            if v is not None:
                try:
                    setattr(msg, attr, _read(kind, json_name, v))
                except DLedgerProtocolError as e:
                    raise DLedgerProtocolError(f"{cls.__name__}: {e}") from None
        return msg

    def copy_base_info(self: M, other: RequestOrResponse) -> M:
        """DLedger's ``copyBaseInfo``: group, term, code, localId, remoteId, leaderId."""
        self.group = other.group
        self.term = other.term
        self.code = other.code
        self.local_id = other.local_id
        self.remote_id = other.remote_id
        self.leader_id = other.leader_id
        return self


class MetadataRequest(RequestOrResponse):
    pass


class MetadataResponse(RequestOrResponse):
    FIELDS = (("peers", "peers", "map", None),)
    peers: dict[str, str] | None


class AppendEntryRequest(RequestOrResponse):
    FIELDS: ClassVar[tuple[tuple[str, str, str, Any], ...]] = (("body", "body", "bytes", None),)
    body: bytes | None


class AppendEntryResponse(RequestOrResponse):
    FIELDS = (("index", "index", "long", -1), ("pos", "pos", "long", -1))
    index: int
    pos: int


class BatchAppendEntryRequest(AppendEntryRequest):
    FIELDS = (("body", "body", "bytes", None), ("batchMsgs", "batch_msgs", "bytes_list", None))
    batch_msgs: list[bytes] | None


class GetEntriesRequest(RequestOrResponse):
    FIELDS = (
        ("beginIndex", "begin_index", "long", None),
        ("maxSize", "max_size", "int", 0),
        ("indexList", "index_list", "longs", None),
    )
    begin_index: int | None
    max_size: int
    index_list: list[int] | None


class GetEntriesResponse(RequestOrResponse):
    FIELDS = (("entries", "entries", "entries", []),)
    entries: list[DLedgerEntry]


class VoteRequest(RequestOrResponse):
    FIELDS = (("ledgerEndIndex", "ledger_end_index", "long", -1), ("ledgerEndTerm", "ledger_end_term", "long", -1))
    ledger_end_index: int
    ledger_end_term: int


class VoteResponse(RequestOrResponse):
    FIELDS = (("voteResult", "vote_result", "vote_result", VoteResult.UNKNOWN),)
    vote_result: VoteResult

    @classmethod
    def answering(cls, request: VoteRequest, term: int, result: VoteResult) -> VoteResponse:
        """``new VoteResponse(request).term(t).voteResult(r)``: the request's base info kept."""
        resp = cls().copy_base_info(request)
        resp.term = term
        resp.vote_result = result
        return resp


class HeartBeatRequest(RequestOrResponse):
    pass


class HeartBeatResponse(RequestOrResponse):
    pass


class PullEntriesRequest(RequestOrResponse):
    FIELDS = (("beginIndex", "begin_index", "long", None),)
    begin_index: int | None


class PushEntryRequest(RequestOrResponse):
    FIELDS = (
        ("commitIndex", "commit_index", "long", -1),
        ("type", "type", "push_type", PushType.APPEND),
        ("entry", "entry", "entry", None),
        ("batchEntry", "batch_entry", "entries", []),
        ("totalSize", "total_size", "int", 0),
    )
    commit_index: int
    type: PushType
    entry: DLedgerEntry | None
    batch_entry: list[DLedgerEntry]
    total_size: int

    def add_entry(self, entry: DLedgerEntry) -> None:
        if self.batch_entry and self.batch_entry[0].index + len(self.batch_entry) != entry.index:
            raise DLedgerProtocolError("batch push wrong order")
        self.batch_entry.append(entry)
        self.total_size += entry.size

    @property
    def is_batch(self) -> bool:
        return bool(self.batch_entry)

    @property
    def count(self) -> int:
        return len(self.batch_entry) if self.batch_entry else (1 if self.entry is not None else 0)

    @property
    def first_entry_index(self) -> int:
        if self.batch_entry:
            return self.batch_entry[0].index
        return self.entry.index if self.entry is not None else -1

    @property
    def last_entry_index(self) -> int:
        if self.batch_entry:
            return self.batch_entry[-1].index
        return self.entry.index if self.entry is not None else -1

    def entries(self) -> list[DLedgerEntry]:
        return list(self.batch_entry) if self.batch_entry else ([self.entry] if self.entry is not None else [])

    def derived(self) -> dict[str, Any]:
        return {
            "batch": self.is_batch,
            "count": self.count,
            "firstEntryIndex": self.first_entry_index,
            "lastEntryIndex": self.last_entry_index,
        }


class PushEntryResponse(RequestOrResponse):
    FIELDS = (
        ("index", "index", "long", None),
        ("beginIndex", "begin_index", "long", 0),
        ("endIndex", "end_index", "long", 0),
        ("count", "count", "int", 0),
    )
    index: int | None
    begin_index: int
    end_index: int
    count: int


class LeadershipTransferRequest(RequestOrResponse):
    FIELDS = (
        ("transferId", "transfer_id", "str", None),
        ("transfereeId", "transferee_id", "str", None),
        ("takeLeadershipLedgerIndex", "take_leadership_ledger_index", "long", 0),
    )
    transfer_id: str | None
    transferee_id: str | None
    take_leadership_ledger_index: int


class LeadershipTransferResponse(RequestOrResponse):
    pass


REQUEST_TYPES: dict[int, type[RequestOrResponse]] = {
    DLedgerRequestCode.METADATA: MetadataRequest,
    DLedgerRequestCode.APPEND: AppendEntryRequest,
    DLedgerRequestCode.GET: GetEntriesRequest,
    DLedgerRequestCode.VOTE: VoteRequest,
    DLedgerRequestCode.HEART_BEAT: HeartBeatRequest,
    DLedgerRequestCode.PULL: PullEntriesRequest,
    DLedgerRequestCode.PUSH: PushEntryRequest,
    DLedgerRequestCode.LEADERSHIP_TRANSFER: LeadershipTransferRequest,
}

RESPONSE_TYPES: dict[int, type[RequestOrResponse]] = {
    DLedgerRequestCode.METADATA: MetadataResponse,
    DLedgerRequestCode.APPEND: AppendEntryResponse,
    DLedgerRequestCode.GET: GetEntriesResponse,
    DLedgerRequestCode.VOTE: VoteResponse,
    DLedgerRequestCode.HEART_BEAT: HeartBeatResponse,
    DLedgerRequestCode.PUSH: PushEntryResponse,
    DLedgerRequestCode.LEADERSHIP_TRANSFER: LeadershipTransferResponse,
}


def error_response(cls: type[M], request: RequestOrResponse, code: DLedgerResponseCode, leader_id: str | None) -> M:
    """DLedgerServer's answer to a refused request: the request's base info, ``code`` and this
    node's leader."""
    resp = cls().copy_base_info(request)
    resp.code = int(code)
    resp.leader_id = leader_id
    return resp
