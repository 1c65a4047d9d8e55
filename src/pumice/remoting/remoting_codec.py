"""The remoting frame and its two header serializations, sans-IO.

Frame, big-endian:

======  ==========  ============================================================
size    field       meaning
======  ==========  ============================================================
4       total       4 + headerLen + bodyLen (does not count itself)
4       serHdr      (serializeType << 24) | headerLen; serializeType 0 JSON, 1 ROCKETMQ
h       header      JSON object, or the ROCKETMQ binary header below
b       body        opaque bytes; their meaning depends on the code
======  ==========  ============================================================

ROCKETMQ binary header: code (int16), language (int8), version (int16), opaque (int32),
flag (int32), remark length (int32) + UTF-8 remark, extFields length (int32) + entries of
key length (int16) + key + value length (int32) + value.

``FrameDecoder.feed(bytes)`` returns the commands completed so far and keeps the rest;
``encode(command)`` returns the frame's parts (header bytes, then the body unchanged, for
writev or a zero-copy send). A frame that is too large, a header that does not parse or a
header without a code raises ``RemotingCodecError``: the connection is not usable after it.

Native twins (``pumice._native``, native/src/remoting_codec.rs; ``pumice.native`` says which
runs): ``FrameDecoder.feed``'s frame loop, ``decode_frame`` and ``encode``'s head are done
natively where the extension is loaded.
The native function answers None for input off its fast path, valid or not (a JSON ``\\u``
escape, a float, a bad length, a non-str value); ``decode_frame_pure`` and ``encode_head_pure``,
the reference, then give the answer or raise the error.
"""

from __future__ import annotations

import re
import struct
from typing import Any

import orjson

from pumice.native import NATIVE
from pumice.remoting.remoting_command import LanguageCode, RemotingCommand, SerializeType

DEFAULT_MAX_FRAME_LENGTH = 16 * 1024 * 1024  # com.rocketmq.remoting.frameMaxLength
# unfinished frames' bytes over all of a server's connections (Pumice's own serverMaxPartialFrameBytes)
DEFAULT_MAX_PARTIAL_FRAME_BYTES = 256 * 1024 * 1024

_INT2 = struct.Struct(">ii")
_BIN_FIXED = struct.Struct(">hbhii")  # code, language, version, opaque, flag
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_LANG_BY_CODE = {c.value: c.name for c in LanguageCode}
_DIGITS = re.compile(r"-?[0-9]{1,10}")
_SERIALIZE_TYPES = (SerializeType.JSON, SerializeType.ROCKETMQ)
_native = NATIVE


class RemotingCodecError(ValueError):
    """The byte stream cannot be decoded; ``opaque`` is set when the header got that far."""

    def __init__(self, message: str, opaque: int | None = None) -> None:
        super().__init__(message)
        self.opaque = opaque


# -- headers ---------------------------------------------------------------------------


def _json_header(cmd: RemotingCommand) -> bytes:
    obj: dict[str, Any] = {
        "code": cmd.code,
        "language": cmd.language,
        "version": cmd.version,
        "opaque": cmd.opaque,
        "flag": cmd.flag,
        "serializeTypeCurrentRPC": "JSON",
    }
    if cmd.remark is not None:
        obj["remark"] = cmd.remark
    if cmd.ext_fields:
        obj["extFields"] = {
            k: v if type(v) is str else _to_wire_str(v) for k, v in cmd.ext_fields.items() if v is not None
        }
    return orjson.dumps(obj)


def _to_wire_str(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _header_int(v: object) -> int | None:
    """A header number: a JSON int, or its digits in a string (fastjson reads both); None else."""
    if type(v) is int:
        return v
    if isinstance(v, str) and _DIGITS.fullmatch(v):
        return int(v)
    return None


def _parse_json_header(raw: bytes | memoryview) -> RemotingCommand:
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise RemotingCodecError(f"the header is not JSON: {e}") from None
    if not isinstance(obj, dict):
        raise RemotingCodecError("the header is not a JSON object")
    opaque = _header_int(obj.get("opaque"))
    code = _header_int(obj.get("code"))
    if code is None:
        raise RemotingCodecError("the header has no integer 'code'", opaque)
    ext = obj.get("extFields") or {}
    if not isinstance(ext, dict):
        raise RemotingCodecError("'extFields' is not an object", opaque)
    remark = obj.get("remark")
    version = _header_int(obj.get("version", 0))
    flag = _header_int(obj.get("flag", 0))
    return RemotingCommand(
        code=code,
        opaque=opaque or 0,
        flag=flag or 0,
        language=str(obj.get("language", "OTHER")),
        version=version or 0,
        remark=remark if isinstance(remark, str) else None,
        ext_fields=ext,
        serialize_type=SerializeType.JSON,
    )


def _binary_header(cmd: RemotingCommand) -> bytes:
    lang = LanguageCode[cmd.language].value if cmd.language in LanguageCode.__members__ else LanguageCode.OTHER
    out = bytearray(_BIN_FIXED.pack(cmd.code, lang, cmd.version, cmd.opaque, cmd.flag))
    remark = cmd.remark.encode() if cmd.remark else b""
    out += _I32.pack(len(remark)) + remark
    ext = bytearray()
    for k, v in cmd.ext_fields.items():
        if v is None:
            continue
        kb, vb = k.encode(), _to_wire_str(v).encode()
        ext += _I16.pack(len(kb)) + kb + _I32.pack(len(vb)) + vb
    out += _I32.pack(len(ext)) + ext
    return bytes(out)


def _parse_binary_header(raw: bytes | memoryview) -> RemotingCommand:
    mv = memoryview(raw)
    try:
        code, lang, version, opaque, flag = _BIN_FIXED.unpack_from(mv, 0)
        p = _BIN_FIXED.size
        (rlen,) = _I32.unpack_from(mv, p)
        p += 4
        if rlen < 0 or p + rlen > len(mv):
            raise RemotingCodecError("bad remark length", opaque)
        remark = str(mv[p : p + rlen], "utf-8") if rlen else None
        p += rlen
        (elen,) = _I32.unpack_from(mv, p)
        p += 4
        end = p + elen
        if elen < 0 or end > len(mv):
            raise RemotingCodecError("bad extFields length", opaque)
        ext: dict[str, Any] = {}
        while p < end:
            (klen,) = _I16.unpack_from(mv, p)
            p += 2
            key = str(mv[p : p + klen], "utf-8")
            p += klen
            (vlen,) = _I32.unpack_from(mv, p)
            p += 4
            if klen < 0 or vlen < 0 or p + vlen > end:
                raise RemotingCodecError("bad extFields entry", opaque)
            ext[key] = str(mv[p : p + vlen], "utf-8")
            p += vlen
    except (struct.error, UnicodeDecodeError) as e:
        raise RemotingCodecError(f"bad ROCKETMQ header: {e}") from None
    return RemotingCommand(
        code=code,
        opaque=opaque,
        flag=flag,
        language=_LANG_BY_CODE.get(lang, "OTHER"),
        version=version,
        remark=remark,
        ext_fields=ext,
        serialize_type=SerializeType.ROCKETMQ,
    )


# -- frames ----------------------------------------------------------------------------


def encode(cmd: RemotingCommand) -> list[bytes | bytearray | memoryview]:
    """The frame of ``cmd`` as parts: length and header bytes, then the body as given.

    Body parts (a pull response's record views) are joined into one buffer here (measured:
    cheaper than one write part per small record).
    """
    # many small record views: one copy into one buffer beats a write part per record
    body = cmd.body if cmd.body_parts is None else b"".join(cmd.body_parts)
    head = None
    if _native is not None:
        head = _native.encode_head(
            cmd.serialize_type, cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag, cmd.remark,
            cmd.ext_fields, len(body),
        )  # fmt: skip
    if head is None:
        head = encode_head_pure(cmd, len(body))
    return [head, body] if len(body) else [head]


def encode_head_pure(cmd: RemotingCommand, body_len: int) -> bytes:
    """The frame's head (total length, serHdr, header) before a body of ``body_len`` bytes."""
    header = _binary_header(cmd) if cmd.serialize_type is SerializeType.ROCKETMQ else _json_header(cmd)
    return _INT2.pack(4 + len(header) + body_len, (int(cmd.serialize_type) << 24) | len(header)) + header


def encode_bytes(cmd: RemotingCommand) -> bytes:
    return b"".join(bytes(p) for p in encode(cmd))


def decode_frame(frame: bytes | memoryview) -> RemotingCommand:
    """One frame without its leading total-length field (serHdr, header, body)."""
    if _native is not None:
        cmd = _native.decode_frame(frame, RemotingCommand, _SERIALIZE_TYPES)
        if cmd is not None:
            return cmd
    return decode_frame_pure(frame)


def decode_frame_pure(frame: bytes | memoryview) -> RemotingCommand:
    """``decode_frame``'s twin, the reference."""
    mv = memoryview(frame)
    if len(mv) < 4:
        raise RemotingCodecError("frame shorter than its header length field")
    (ser,) = _I32.unpack_from(mv, 0)
    stype = (ser >> 24) & 0xFF
    hlen = ser & 0xFFFFFF
    if 4 + hlen > len(mv):
        raise RemotingCodecError(f"header length {hlen} is past the end of a {len(mv) + 4}-byte frame")
    raw = mv[4 : 4 + hlen]
    if stype == SerializeType.JSON:
        cmd = _parse_json_header(raw)
    elif stype == SerializeType.ROCKETMQ:
        cmd = _parse_binary_header(raw)
    else:
        raise RemotingCodecError(f"unknown serialize type {stype}")
    cmd.body = bytes(mv[4 + hlen :])
    return cmd


class FrameDecoder:
    """Splits a byte stream into commands; keeps an incomplete frame for the next feed."""

    def __init__(self, max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH) -> None:
        self.max_frame_length = max_frame_length
        self._buf = bytearray()

    def feed(self, data: bytes | bytearray | memoryview) -> list[RemotingCommand]:
        buf = self._buf
        buf += data
        out: list[RemotingCommand] = []
        pos = 0
        if _native is not None:  # the whole frames it takes; the loop below does the rest, and raises
            done = _native.decode_frames(buf, self.max_frame_length, RemotingCommand, _SERIALIZE_TYPES)
            if done is not None:
                out, pos = done
        n = len(buf)
        while n - pos >= 4:
            (total,) = _I32.unpack_from(buf, pos)
            if total < 4 or total > self.max_frame_length:
                raise RemotingCodecError(f"frame length {total} is outside 4..{self.max_frame_length} (frameMaxLength)")
            if n - pos - 4 < total:
                break
            out.append(decode_frame(memoryview(buf)[pos + 4 : pos + 4 + total]))
            pos += 4 + total
        if pos:
            del buf[:pos]
        return out

    @property
    def buffered(self) -> int:
        return len(self._buf)

    def clear(self) -> None:
        """Drop an unfinished frame (the connection is going), freeing its bytes now."""
        self._buf = bytearray()
