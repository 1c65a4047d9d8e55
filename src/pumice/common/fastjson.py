"""fastjson's JSON: maps whose keys are not strings, written bare, as RocketMQ 4.9 writes them.

fastjson (RocketMQ 4.9's ``RemotingSerializable``) writes a ``Map`` key that is not a String
as the key's own JSON, unquoted; that is not standard JSON, but it is what every Java client
reads (fastjson2, the 5.x clients' parser, reads only this form for an object key):

======================================  ===============================================
Java map                                fastjson's text
======================================  ===============================================
``Map<MessageQueue, Long>``             ``{{"brokerName":"b","queueId":3,"topic":"T"}:5}``
                                        (the key's fields sorted, compact)
``Map<Integer, Long>``                  ``{0:5}``
``Map<String, Long>``                   ``{"k":5}``
======================================  ===============================================

``dumps`` writes an ``ObjectKey`` (a str holding the key's compact JSON) bare, every other
key quoted (an int key as its digits in quotes, as orjson's OPT_NON_STR_KEYS); orjson itself
refuses an ``ObjectKey`` (a str subclass) as a key, so such a map cannot go out quoted by
mistake. ``loads`` reads standard JSON (orjson) and, when that fails, fastjson's: a bare
object or array key comes back as a plain str of its compact JSON, a bare number key as its
text, so a reader sees one form whichever a peer wrote.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

_WS = re.compile(rb"[ \t\n\r]*")
_STRING = re.compile(rb'"(?:[^"\\\x00-\x1f]|\\.)*"', re.S)
_NUMBER = re.compile(rb"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_LITERALS = {b"t": (b"true", True), b"f": (b"false", False), b"n": (b"null", None)}
_MAX_DEPTH = 256  # as orjson's limit: bodies come from the network
# fastjson's keys made standard, in one pass: a string is skipped whole (so nothing inside one
# matches); a flat object or a number followed by ':' can only be a key
_BARE_KEY = re.compile(
    rb'"(?:[^"\\]|\\.)*"'
    rb'|(\{[^{}\[\]"]*(?:"(?:[^"\\]|\\.)*"[^{}\[\]"]*)*\})(?=\s*:)'
    rb"|(-?[0-9]+(?:\.[0-9]+)?)(?=\s*:)",
    re.S,
)


class ObjectKey(str):
    """A map key that is an object (a MessageQueue): its compact JSON, written bare by ``dumps``.
    It equals and hashes as that string."""

    __slots__ = ()


def dumps(value: Any) -> bytes:
    """JSON as fastjson writes it: ``ObjectKey`` keys bare, the rest as orjson writes them."""
    if isinstance(value, dict):
        if not any(isinstance(k, ObjectKey) or isinstance(v, _CONTAINERS) for k, v in value.items()):
            return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)  # a leaf: orjson's speed
        return b"{" + b",".join(_key(k) + b":" + dumps(v) for k, v in value.items()) + b"}"
    if isinstance(value, (list, tuple)):
        return b"[" + b",".join(dumps(v) for v in value) + b"]"
    return orjson.dumps(value)


_CONTAINERS = (dict, list, tuple)


def _key(key: Any) -> bytes:
    if isinstance(key, ObjectKey):
        return key.encode()
    return orjson.dumps(key if isinstance(key, str) else str(key))


def loads(raw: bytes | bytearray | memoryview | str) -> Any:
    """Standard JSON or fastjson's (bare object and number keys). Raises ``orjson.JSONDecodeError``."""
    data = raw.encode() if isinstance(raw, str) else bytes(raw)
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        pass
    try:  # the usual case (flat MessageQueue keys), at orjson's speed
        return orjson.loads(_BARE_KEY.sub(_quote_key, data))
    except orjson.JSONDecodeError:
        pass
    parser = _Parser(data)  # nested keys, or not JSON at all (its error says where)
    value = parser.value(0)
    parser.end()
    return value


def _quote_key(m: re.Match[bytes]) -> bytes:
    if m.group(1) is not None:
        return orjson.dumps(dumps(orjson.loads(m.group(1))).decode())
    if m.group(2) is not None:
        return b'"' + m.group(2) + b'"'
    return m.group(0)


class _Parser:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def fail(self, what: str) -> orjson.JSONDecodeError:
        return orjson.JSONDecodeError(what, self.data.decode("utf-8", "replace"), self.pos)

    def skip(self) -> int:
        self.pos = _WS.match(self.data, self.pos).end()  # type: ignore[union-attr]  # matches ""
        return self.data[self.pos] if self.pos < len(self.data) else -1

    def end(self) -> None:
        if self.skip() != -1:
            raise self.fail("trailing characters")

    def value(self, depth: int) -> Any:
        if depth > _MAX_DEPTH:
            raise self.fail("nested too deep")
        c = self.skip()
        if c == 0x7B:  # {
            return self.object(depth)
        if c == 0x5B:  # [
            return self.array(depth)
        if c == 0x22:  # "
            m = _STRING.match(self.data, self.pos)
            if m is None:
                raise self.fail("unterminated string")
            self.pos = m.end()
            return orjson.loads(m.group())
        m = _NUMBER.match(self.data, self.pos)
        if m is not None:
            self.pos = m.end()
            return orjson.loads(m.group())
        literal = _LITERALS.get(self.data[self.pos : self.pos + 1])
        if literal is not None and self.data.startswith(literal[0], self.pos):
            self.pos += len(literal[0])
            return literal[1]
        raise self.fail("expected a value")

    def object(self, depth: int) -> dict[str, Any]:
        self.pos += 1
        out: dict[str, Any] = {}
        if self.skip() == 0x7D:  # }
            self.pos += 1
            return out
        while True:
            start = self.skip()
            key = self.value(depth + 1)
            if isinstance(key, (dict, list)):
                key = dumps(key).decode()
            elif start != 0x22:  # a bare number (or literal): its text, as a quoted key would be
                key = "null" if key is None else str(key).lower() if isinstance(key, bool) else str(key)
            if self.skip() != 0x3A:  # :
                raise self.fail("expected ':'")
            self.pos += 1
            out[key] = self.value(depth + 1)
            c = self.skip()
            self.pos += 1
            if c == 0x7D:
                return out
            if c != 0x2C:  # ,
                self.pos -= 1
                raise self.fail("expected ',' or '}'")

    def array(self, depth: int) -> list[Any]:
        self.pos += 1
        out: list[Any] = []
        if self.skip() == 0x5D:  # ]
            self.pos += 1
            return out
        while True:
            out.append(self.value(depth + 1))
            c = self.skip()
            self.pos += 1
            if c == 0x5D:
                return out
            if c != 0x2C:
                self.pos -= 1
                raise self.fail("expected ',' or ']'")
