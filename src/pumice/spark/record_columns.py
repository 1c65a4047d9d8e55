"""CommitLog records at known positions → one Arrow RecordBatch, built column by column.

The record format is ``pumice.common.message_decoder``'s. Where ``pumice._native`` is built,
one native walk over the records (``record_batch_columns``, native/src/record_columns.rs)
checks them and fills every column's Arrow buffers (ints, timestamps, offsets and data of
topic, body, msgIds, hosts IPv4 and IPv6, the properties map, KEYS, TAGS), wrapped here with
``pyarrow.Array.from_buffers``; compressed bodies are then inflated as below. Off that path (a
topic or properties string that is not UTF-8, records that do not add up) and with
``PUMICE_PURE=1`` the twin runs: it reads the same fields for thousands of records at once with
numpy and Arrow kernels instead of one record at a time, so a Spark task spends its time in C
loops rather than per-message Python:

=====================  ========================================================================
step                   how
=====================  ========================================================================
headers                the 88 bytes before BODY of every record, copied out in one Arrow
                       ``take`` and read as a numpy record array (``HEAD_DTYPE``)
validate               the store's rules (``scan_records``), vectorised: magic, TOTALSIZE in
                       bounds, BODYLENGTH, TOPICLENGTH and PROPERTIESLENGTH adding up to
                       TOTALSIZE; optionally the body CRC (``crc32`` per record)
body, topic,           the mapped bytes cut into pieces (header, body, topic length, topic,
properties             properties length, properties, gap…) as one binary array over the map,
                       no copy; ``take`` of every 7th piece copies each column out in C++;
                       strings are UTF-8 checked
properties map         the positions of \\x02 and \\x01 in the batch's properties bytes give
                       every pair's name and value (numpy), cut out the same way; a pair with
                       an empty name or value is dropped, as the store's decoder does
keys, tags             the KEYS and TAGS values of the map (null when absent)
offsetMsgId            STOREHOSTADDRESS, port and PHYSICALOFFSET bytes, hex-encoded with a
                       lookup table
msgId                  the UNIQ_KEY value of the map, else offsetMsgId (Java's
                       ``MessageClientExt.getMsgId()``)
hosts                  ``ip:port`` formatted once per distinct host, then taken per row
IPv6 hosts             (sysFlag 0x10/0x20 move the later fields) rare: those records' moved
                       fields come from the store's ``decode_message``
compressed bodies      SYSFLAG bit 0: each such body is inflated, ZLIB, LZ4 or ZSTD by bits 8-10
                       (``pumice.compression``; a body that does not inflate is left as stored,
                       and logged)
=====================  ========================================================================
"""

from __future__ import annotations

import ipaddress
import logging
from dataclasses import dataclass
from types import ModuleType

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pumice.common.message_const import MessageConst
from pumice.common.message_decoder import MESSAGE_MAGIC_CODE, MIN_RECORD_SIZE, crc32, decode_message
from pumice.common.message_sys_flag import MessageSysFlag
from pumice.compression import decompress
from pumice.native import NATIVE

_native = NATIVE  # the tests swap it to hold both paths to the same answers

log = logging.getLogger(__name__)

_HEX = np.frombuffer(b"0123456789ABCDEF", dtype=np.uint8)

# The record up to BODY with IPv4 hosts (88 bytes). An IPv6 born host moves every field after
# BORNHOST 12 bytes on, an IPv6 store host every field after STOREHOSTADDRESS; such records
# (rare) get those fields read again at their real offsets.
HEAD_DTYPE = np.dtype(
    [
        ("total", ">i4"),
        ("magic", ">u4"),
        ("body_crc", ">i4"),
        ("queue_id", ">i4"),
        ("flag", ">i4"),
        ("queue_offset", ">i8"),
        ("phys", ">i8"),
        ("sys_flag", ">i4"),
        ("born_ts", ">i8"),
        ("born_host", ">u8"),
        ("store_ts", ">i8"),
        ("store_host", ">u8"),
        ("reconsume", ">i4"),
        ("prepared", ">i8"),
        ("body_len", ">i4"),
    ]
)
HEAD_SIZE = HEAD_DTYPE.itemsize
assert HEAD_SIZE == 88
_HEAD_SPAN = np.arange(HEAD_SIZE, dtype=np.int64)
_SPANS = {w: np.arange(w, dtype=np.int64) for w in (1, 2, 4, 8, 12, 16, 20)}


def _gather(nb: np.ndarray, pos: np.ndarray, width: int) -> np.ndarray:
    """``width`` bytes at each position, as an (n, width) uint8 array."""
    return np.take(nb, (pos[:, None] + _SPANS[width]).ravel()).reshape(len(pos), width)


def _be(nb: np.ndarray, pos: np.ndarray, dtype: str) -> np.ndarray:
    """Big-endian ints (``>i4``, ``>u2``…) at each position, as int64."""
    width = np.dtype(dtype).itemsize
    return _gather(nb, pos, width).view(dtype)[:, 0].astype(np.int64)


@dataclass(slots=True)
class RecordLayout:
    """The records at ``starts`` of a mapped segment: their headers and where their parts are."""

    starts: np.ndarray  # int64 positions in the segment
    head: np.ndarray  # HEAD_DTYPE per record (fields past an IPv6 host are not valid there)
    sys_flag: np.ndarray  # int64
    total: np.ndarray
    born_shift: np.ndarray  # 12 when the born host is IPv6, else 0
    store_shift: np.ndarray  # 12 when the store host is IPv6, else 0
    body_pos: np.ndarray
    body_len: np.ndarray
    topic_len: np.ndarray
    props_len: np.ndarray
    valid: np.ndarray  # bool: the length fields add up (and the CRC matches, when checked)

    @property
    def any_v6(self) -> bool:
        return bool((self.sys_flag & 0x30).any())

    def take(self, index: np.ndarray | slice) -> RecordLayout:
        return RecordLayout(*(getattr(self, f)[index] for f in self.__slots__))  # type: ignore[attr-defined]


def _pieces(buf: pa.Buffer, cuts: np.ndarray) -> pa.Array:
    """A binary array over ``buf`` whose element i is ``buf[cuts[i]:cuts[i+1]]`` (no copy);
    ``cuts`` must not decrease and must fit an int32."""
    # Arrow trusts offsets: a bad one would read outside the buffer, so check them here
    if len(cuts) and (cuts[0] < 0 or cuts[-1] > buf.size or (np.diff(cuts) < 0).any()):
        raise ValueError("slices out of order or outside their buffer")
    if len(cuts) and cuts[-1] >= 1 << 31:
        raise ValueError("one batch spans 2 GiB or more of records: lower the batchSize option")
    return pa.Array.from_buffers(pa.binary(), len(cuts) - 1, [None, pa.py_buffer(cuts.astype(np.int32)), buf])


def _every(pieces: pa.Array, first: int, step: int, n: int) -> pa.Array:
    """Elements first, first + step, … (n of them) of ``pieces``, copied into one array."""
    return pieces.take(pa.array(np.arange(first, first + step * n, step, dtype=np.int64)))


def _heads(nb: np.ndarray, s: np.ndarray) -> np.ndarray:
    """The 88 bytes at each position, as HEAD_DTYPE records."""
    n = len(s)
    if len(nb) < HEAD_SIZE or n == 0:
        return np.zeros(n, dtype=HEAD_DTYPE)
    if n > 1 and (np.diff(s) >= HEAD_SIZE).all() and s[-1] - s[0] < 1 << 30:
        # the usual case, records in order: one Arrow take copies the headers out in C++
        base = int(s[0])
        window = nb[base : int(s[-1]) + HEAD_SIZE]
        cuts = np.empty((n, 2), dtype=np.int64)
        cuts[:, 0] = s - base
        cuts[:, 1] = cuts[:, 0] + HEAD_SIZE
        heads = _every(_pieces(pa.py_buffer(window), cuts.ravel()), 0, 2, n)
        return np.frombuffer(heads.buffers()[2], dtype=HEAD_DTYPE, count=n)
    return np.take(nb, (s[:, None] + _HEAD_SPAN).ravel()).view(HEAD_DTYPE)


def layout(nb: np.ndarray, starts: np.ndarray, check_crc: bool = False) -> RecordLayout:
    """Read and check the headers and length fields of the records at ``starts`` in ``nb``.

    A position that cannot hold a record reads the buffer's start instead, so nothing reads
    outside it; such records, like any whose fields do not add up, get ``valid = False``.
    """
    size = len(nb)
    starts = np.asarray(starts, dtype=np.int64)
    ok = (starts >= 0) & (starts + MIN_RECORD_SIZE <= size)
    if size < MIN_RECORD_SIZE:  # no record fits: read zeros, so nothing reads outside
        nb = np.zeros(MIN_RECORD_SIZE, dtype=np.uint8)
    s = np.where(ok, starts, 0)
    head = _heads(nb, s)
    total = head["total"].astype(np.int64)
    sys_flag = head["sys_flag"].astype(np.int64)
    ok &= (head["magic"] == MESSAGE_MAGIC_CODE) & (total >= MIN_RECORD_SIZE) & (s + total <= size)
    born_shift = ((sys_flag & MessageSysFlag.BORNHOST_V6_FLAG) != 0) * 12
    store_shift = ((sys_flag & MessageSysFlag.STOREHOSTADDRESS_V6_FLAG) != 0) * 12
    shift = born_shift + store_shift
    body_len = head["body_len"].astype(np.int64)
    if shift.any():
        moved = np.flatnonzero(shift)
        ok[moved] &= total[moved] >= HEAD_SIZE + shift[moved] + 3
        body_len[moved] = _be(nb, np.where(ok[moved], s[moved] + HEAD_SIZE - 4 + shift[moved], 0), ">i4")
    body_pos = s + HEAD_SIZE + shift
    ok &= (body_len >= 0) & (HEAD_SIZE + shift + body_len + 3 <= total)
    tpos = np.where(ok, body_pos + body_len, 0)
    topic_len = np.take(nb, tpos).astype(np.int64)
    ok &= HEAD_SIZE + shift + body_len + 3 + topic_len <= total
    props_len = _be(nb, np.where(ok, tpos + 1 + topic_len, 0), ">u2")
    ok &= HEAD_SIZE + shift + body_len + 3 + topic_len + props_len == total
    if check_crc:
        crcs = head["body_crc"]
        for i in np.flatnonzero(ok).tolist():
            b = int(body_pos[i])
            if crc32(nb[b : b + int(body_len[i])]) != crcs[i]:  # type: ignore[arg-type]  # a buffer
                ok[i] = False
    return RecordLayout(
        starts, head, sys_flag, total, born_shift, store_shift, body_pos, body_len, topic_len, props_len, ok
    )


def _strings(binary: pa.Array) -> pa.Array:
    try:
        return binary.cast(pa.string())  # checks UTF-8
    except pa.ArrowInvalid:  # not UTF-8 (Java writes UTF-8; this is damage): replace bad bytes
        return pa.array([v.decode("utf-8", "replace") for v in binary.to_pylist()], pa.string())


def _hex(rows: np.ndarray) -> pa.Array:
    """Each row of an (n, k) uint8 array as 2k upper-case hex characters."""
    n, k = rows.shape
    chars = np.empty((n, k, 2), dtype=np.uint8)
    chars[:, :, 0] = _HEX[rows >> 4]
    chars[:, :, 1] = _HEX[rows & 15]
    offsets = np.arange(0, (n + 1) * 2 * k, 2 * k, dtype=np.int32)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(chars.tobytes())])


def host_string(addr: bytes, port: int) -> str:
    """``ip:port``, or ``[ipv6]:port``."""
    if len(addr) == 4:
        return f"{addr[0]}.{addr[1]}.{addr[2]}.{addr[3]}:{port}"
    return f"[{ipaddress.IPv6Address(addr).compressed}]:{port}"


def _hosts(packed: np.ndarray) -> pa.Array:
    """IPv4 hosts packed as address (4 bytes) and port (4 bytes) in a uint64, as ``ip:port``:
    formatted once per distinct host, then taken per row."""
    uniq, inverse = np.unique(packed, return_inverse=True)
    names = [host_string((u >> 32).to_bytes(4, "big"), u & 0xFFFFFFFF) for u in uniq.tolist()]
    return pa.array(names, pa.string()).take(pa.array(inverse.reshape(-1).astype(np.int64)))


_PICKED = (
    MessageConst.PROPERTY_KEYS,
    MessageConst.PROPERTY_TAGS,
    MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
)
_PICKED_BYTES = [name.encode() for name in _PICKED]


def _properties(props: pa.Array) -> tuple[pa.Array, pa.Array, pa.Array, pa.Array]:
    """The properties strings as a map array, plus the KEYS, TAGS and UNIQ_KEY values (or null).

    A pair is what lies between two \\x02 (or a string's ends); its name ends at its first
    \\x01. The pairs are cut natively (``pumice._native.property_columns``, straight into the
    map array's buffers) where built; the twin ``_properties_pure`` is the reference.
    """
    n = len(props)
    _, off_buf, data_buf = props.buffers()
    if data_buf is None:
        data_buf = pa.py_buffer(b"")
    if _native is not None:
        bounds32 = np.frombuffer(off_buf, dtype=np.int32, count=n + 1, offset=props.offset * 4)
        data = np.frombuffer(data_buf, dtype=np.uint8)  # format B: what the native call reads
        cols = _native.property_columns(data, bounds32.view(np.uint8), _PICKED_BYTES)
        if cols is not None:
            pair_offsets, name_offsets, names_data, value_offsets, values_data, *picks = cols
            k = len(name_offsets) // 4 - 1
            names = pa.Array.from_buffers(pa.string(), k, [None, pa.py_buffer(name_offsets), pa.py_buffer(names_data)])
            values = pa.Array.from_buffers(
                pa.string(), k, [None, pa.py_buffer(value_offsets), pa.py_buffer(values_data)]
            )
            mapping = pa.MapArray.from_arrays(pa.array(np.frombuffer(pair_offsets, dtype=np.int32)), names, values)
            picked = [values.take(pa.array(p := np.frombuffer(b, dtype=np.int64), mask=p < 0)) for b in picks]
            return mapping, picked[0], picked[1], picked[2]
    return _properties_pure(props)


def _properties_pure(props: pa.Array) -> tuple[pa.Array, pa.Array, pa.Array, pa.Array]:
    """``_properties``' twin: vectorised over the batch's properties bytes with numpy."""
    n = len(props)
    _, off_buf, data_buf = props.buffers()
    bounds = np.frombuffer(off_buf, dtype=np.int32, count=n + 1, offset=props.offset * 4).astype(np.int64)
    if data_buf is None:
        data_buf = pa.py_buffer(b"")
    # a slice's data buffer holds the rows before it too: look only at the slice's own bytes
    lo = int(bounds[0])
    data = np.frombuffer(data_buf, dtype=np.uint8)[lo : bounds[-1]]
    seps = np.flatnonzero(data == 2) + lo
    ones = np.flatnonzero(data == 1) + lo
    # A pair starts at each string's start and after each \x02. Merge the two sorted lists of
    # starts; where they meet at one position, the start after a string's trailing \x02 (an
    # empty pair of that string) goes before the next string's first pair.
    m = len(seps)
    k = n + m
    from_sep = np.zeros(k, dtype=bool)
    at_string = np.arange(n, dtype=np.int64) + np.searchsorted(seps + 1, bounds[:-1], side="right")
    at_sep = np.arange(m, dtype=np.int64) + np.searchsorted(bounds[:-1], seps + 1, side="left")
    starts = np.empty(k, dtype=np.int64)
    rows = np.empty(k, dtype=np.int64)
    starts[at_string], rows[at_string] = bounds[:-1], np.arange(n, dtype=np.int64)
    starts[at_sep], rows[at_sep] = seps + 1, np.searchsorted(bounds, seps, side="right") - 1
    from_sep[at_sep] = True
    # a pair ends at the \x02 before the next pair of its string, or at its string's end
    ends = bounds[rows + 1]
    inner = np.flatnonzero(from_sep[1:])
    ends[inner] = starts[inner + 1] - 1
    eq = np.append(ones, np.iinfo(np.int64).max)[np.searchsorted(ones, starts)]
    keep = (eq > starts) & (eq < ends - 1)  # a name and a value, both non-empty
    starts, rows, ends, eq = starts[keep], rows[keep], ends[keep], eq[keep]
    # pieces name, \\x01, value, gap, name, …: the names are every 4th from 0, the values from 2
    k = len(starts)
    cuts = np.empty((k, 4), dtype=np.int64)
    cuts[:, 0], cuts[:, 1], cuts[:, 2], cuts[:, 3] = starts, eq, eq + 1, ends
    pieces = _pieces(data_buf, cuts.ravel()) if k else pa.array([], pa.binary())
    names = _every(pieces, 0, 4, k).cast(pa.string())
    values = _every(pieces, 2, 4, k).cast(pa.string())
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(np.bincount(rows, minlength=n), out=offsets[1:])
    mapping = pa.MapArray.from_arrays(pa.array(offsets), names, values)
    picked = []
    for name in _PICKED:
        hit = np.flatnonzero(pc.equal(names, name).to_numpy(zero_copy_only=False))
        pick = np.full(n, -1, dtype=np.int64)
        pick[rows[hit]] = hit  # a repeated name: the last one wins, as in the store's decoder
        picked.append(values.take(pa.array(pick, mask=pick < 0)))
    return mapping, picked[0], picked[1], picked[2]


def _inflate(bodies: pa.Array, sys_flag: np.ndarray, offsets: np.ndarray) -> pa.Array:
    compressed = (sys_flag & MessageSysFlag.COMPRESSED_FLAG) != 0
    if not compressed.any():
        return bodies
    out: list[bytes] = []
    for i in np.flatnonzero(compressed).tolist():
        raw = bodies[i].as_py()
        try:
            out.append(decompress(raw, int(sys_flag[i])))
        except ValueError as e:
            log.warning(
                "record at commitLogOffset %d: compressed body does not inflate (%s); left as stored",
                int(offsets[i]),
                e,
            )
            out.append(raw)
    return pc.replace_with_mask(bodies, pa.array(compressed), pa.array(out, pa.binary()))


def _patch(arr: pa.Array, rows: np.ndarray, values: list, typ: pa.DataType) -> pa.Array:
    mask = np.zeros(len(arr), dtype=bool)
    mask[rows] = True
    return pc.replace_with_mask(arr, pa.array(mask), pa.array(values, typ))


def to_record_batch(
    nb: np.ndarray,
    lay: RecordLayout,
    *,
    broker_name: str,
    schema: pa.Schema,
    queue_offsets: np.ndarray | None = None,
) -> pa.RecordBatch:
    """Decode the (valid) records of ``lay`` into a batch of the data source schema.

    ``nb`` is the whole mapped segment as uint8; ``queue_offsets`` replaces the records'
    QUEUEOFFSET (the ConsumeQueue path knows each entry's position).
    """
    if _native is not None and lay.valid.all():
        batch = _native_record_batch(
            _native, nb, lay, broker_name=broker_name, schema=schema, queue_offsets=queue_offsets
        )
        if batch is not None:
            return batch
    n = len(lay.starts)
    head = lay.head
    if n > 1 and (np.diff(lay.starts) < lay.total[:-1]).any():
        raise ValueError("records must be in CommitLog order and must not overlap")
    # pieces header, body, TOPICLENGTH, topic, PROPERTIESLENGTH, properties, gap, header, …
    base = int(lay.starts[0]) if n else 0
    window = nb[base : int(lay.starts[-1] + lay.total[-1]) if n else 0]
    cuts = np.empty((n, 7), dtype=np.int64)
    cuts[:, 0] = lay.starts
    cuts[:, 1] = lay.body_pos
    cuts[:, 2] = lay.body_pos + lay.body_len
    cuts[:, 3] = cuts[:, 2] + 1
    cuts[:, 4] = cuts[:, 3] + lay.topic_len
    cuts[:, 5] = cuts[:, 4] + 2
    cuts[:, 6] = lay.starts + lay.total
    pieces = _pieces(pa.py_buffer(window), cuts.ravel() - base) if n else pa.array([], pa.binary())
    bodies = _every(pieces, 1, 7, n)
    topics = _strings(_every(pieces, 3, 7, n))
    props = _strings(_every(pieces, 5, 7, n))
    properties, keys, tags, uniq_keys = _properties(props)
    phys = head["phys"].astype(np.int64)
    store_ts = head["store_ts"].astype(np.int64)
    reconsume = head["reconsume"].astype(np.int32)
    raw_ids = np.empty((n, 16), dtype=np.uint8)
    head_bytes = head.view(np.uint8).reshape(n, HEAD_SIZE)
    raw_ids[:, :8] = head_bytes[:, 64:72]  # STOREHOSTADDRESS (IPv4) and port
    raw_ids[:, 8:] = head_bytes[:, 28:36]  # PHYSICALOFFSET
    offset_ids = _hex(raw_ids)
    born_hosts = _hosts(head["born_host"].astype(np.uint64))
    store_hosts = _hosts(head["store_host"].astype(np.uint64))
    if lay.any_v6:  # rare: let the store's decoder read these records whole
        rows = np.flatnonzero(lay.sys_flag & 0x30)
        msgs = [decode_message(nb, p) for p in lay.starts[rows].tolist()]  # type: ignore[arg-type]  # a buffer
        store_ts[rows] = [m.store_timestamp for m in msgs]
        reconsume[rows] = [m.reconsume_times for m in msgs]
        offset_ids = _patch(offset_ids, rows, [m.msg_id for m in msgs], pa.string())
        born_hosts = _patch(born_hosts, rows, [host_string(*m.born_host) for m in msgs], pa.string())
        store_hosts = _patch(store_hosts, rows, [host_string(*m.store_host) for m in msgs], pa.string())
    ts = pa.timestamp("us", tz="UTC")
    columns = {
        "topic": topics,
        "brokerName": pa.repeat(pa.scalar(broker_name, pa.string()), n),
        "queueId": pa.array(head["queue_id"].astype(np.int32)),
        "queueOffset": pa.array(
            head["queue_offset"].astype(np.int64) if queue_offsets is None else queue_offsets.astype(np.int64)
        ),
        "commitLogOffset": pa.array(phys),
        "msgId": pc.coalesce(uniq_keys, offset_ids),
        "offsetMsgId": offset_ids,
        "keys": keys,
        "tags": tags,
        "body": _inflate(bodies, lay.sys_flag, phys),
        "properties": properties,
        "bornTimestamp": pa.array(head["born_ts"].astype(np.int64) * 1000, ts),
        "storeTimestamp": pa.array(store_ts * 1000, ts),
        "bornHost": born_hosts,
        "storeHost": store_hosts,
        "reconsumeTimes": pa.array(reconsume),
        "sysFlag": pa.array(lay.sys_flag.astype(np.int32)),
    }
    return pa.RecordBatch.from_arrays([columns[f.name] for f in schema], schema=schema)


_TS = pa.timestamp("us", tz="UTC")


def _column(typ: pa.DataType, n: int, *buffers: bytes | None) -> pa.Array:
    return pa.Array.from_buffers(typ, n, [None if b is None else pa.py_buffer(b) for b in buffers])


def _native_record_batch(
    native: ModuleType,
    nb: np.ndarray,
    lay: RecordLayout,
    *,
    broker_name: str,
    schema: pa.Schema,
    queue_offsets: np.ndarray | None,
) -> pa.RecordBatch | None:
    """``to_record_batch`` from one native walk over the records (``record_batch_columns``),
    every column's buffers filled in Rust; None off its path (the caller runs the twin)."""
    n = len(lay.starts)
    starts = np.ascontiguousarray(lay.starts, dtype=np.int64)
    cols = native.record_batch_columns(nb, starts.view(np.uint8), _PICKED_BYTES)
    if cols is None:
        return None
    queue_id, queue_offset, phys, born_us, store_us, reconsume, sys_flag = cols[:7]
    topic_off, topic_data, body_off, body_data, oid_off, oid_data, mid_off, mid_data = cols[7:15]
    born_off, born_data, store_off, store_data = cols[15:19]
    pair_offsets, name_offsets, names_data, value_offsets, values_data = cols[19:24]
    keys_valid, keys_off, keys_data, tags_valid, tags_off, tags_data = cols[24:30]
    k = len(name_offsets) // 4 - 1
    names = _column(pa.string(), k, None, name_offsets, names_data)
    values = _column(pa.string(), k, None, value_offsets, values_data)
    phys_arr = _column(pa.int64(), n, None, phys)
    flags = np.frombuffer(sys_flag, dtype=np.int32)
    bodies = _column(pa.binary(), n, None, body_off, body_data)
    columns = {
        "topic": _column(pa.string(), n, None, topic_off, topic_data),
        "brokerName": pa.repeat(pa.scalar(broker_name, pa.string()), n),
        "queueId": _column(pa.int32(), n, None, queue_id),
        "queueOffset": (
            _column(pa.int64(), n, None, queue_offset)
            if queue_offsets is None
            else pa.array(queue_offsets.astype(np.int64))
        ),
        "commitLogOffset": phys_arr,
        "msgId": _column(pa.string(), n, None, mid_off, mid_data),
        "offsetMsgId": _column(pa.string(), n, None, oid_off, oid_data),
        "keys": _column(pa.string(), n, keys_valid, keys_off, keys_data),
        "tags": _column(pa.string(), n, tags_valid, tags_off, tags_data),
        "body": _inflate(bodies, flags, np.frombuffer(phys, dtype=np.int64)) if n else bodies,
        "properties": pa.MapArray.from_arrays(pa.array(np.frombuffer(pair_offsets, dtype=np.int32)), names, values),
        "bornTimestamp": _column(_TS, n, None, born_us),
        "storeTimestamp": _column(_TS, n, None, store_us),
        "bornHost": _column(pa.string(), n, None, born_off, born_data),
        "storeHost": _column(pa.string(), n, None, store_off, store_data),
        "reconsumeTimes": _column(pa.int32(), n, None, reconsume),
        "sysFlag": _column(pa.int32(), n, None, sys_flag),
    }
    return pa.RecordBatch.from_arrays([columns[f.name] for f in schema], schema=schema)
