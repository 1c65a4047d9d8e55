//! The CommitLog record encode (the twins: `message_decoder.encode_record_bytes` and
//! `message_decoder.encode_batch_records`): one record from its fields, and the walk over a
//! SEND_BATCH_MESSAGE body that turns each of its messages into a record. `properties_holding`
//! walks the same body for the messages whose properties hold a name (the timer hook's look;
//! twin `message_decoder.batch_properties_holding_pure`).
//!
//! The record format is the table in `pumice.common.message_decoder`; QUEUEOFFSET,
//! PHYSICALOFFSET and STORETIMESTAMP are written as 0 (the CommitLog patches them under its
//! lock). A batch body is a run of messages, each:
//!
//! | offset | size | field                                 |
//! |--------|------|---------------------------------------|
//! | 0      | 4    | TOTALSIZE (22 + body + properties)    |
//! | 4      | 4    | MAGICCODE (not checked)               |
//! | 8      | 4    | BODYCRC (not checked: recomputed)     |
//! | 12     | 4    | FLAG                                  |
//! | 16     | 4    | BODYLENGTH                            |
//! | 20     | n    | BODY                                  |
//! | 20+n   | 2    | PROPERTIESLENGTH (signed)             |
//! | 22+n   | p    | PROPERTIES (UTF-8)                    |

use std::borrow::Cow;
use std::collections::HashMap;

pub const MESSAGE_MAGIC_CODE: u32 = 0xDAA3_20A7;
pub const BORNHOST_V6_FLAG: i32 = 0x10;
pub const STOREHOSTADDRESS_V6_FLAG: i32 = 0x20;
pub const MAX_PROPERTIES_LENGTH: usize = 32767;
/// TOTALSIZE … BODYLENGTH with two IPv4 hosts; 12 more bytes for each IPv6 host
const HEAD_SIZE_V4: usize = 88;
const BATCH_HEAD_SIZE: usize = 20;

const TAGS: &str = "TAGS";
const KEYS: &str = "KEYS";
const UNIQ: &str = "UNIQ_KEY";
const DELAY: &str = "DELAY";

/// A host: address bytes (4 or 16) and port.
#[derive(Clone, Copy, Debug)]
pub struct Host<'a> {
    pub addr: &'a [u8],
    pub port: i32,
}

/// The fields of a record that the caller gives (the rest are the body's, or patched later).
#[derive(Clone, Copy, Debug)]
pub struct RecordFields<'a> {
    pub queue_id: i32,
    pub flag: i32,
    pub sys_flag: i32,
    pub born_timestamp: i64,
    pub born_host: Host<'a>,
    pub store_host: Host<'a>,
    pub reconsume_times: i32,
    pub prepared_transaction_offset: i64,
}

impl RecordFields<'_> {
    /// Whether the hosts' address lengths are what the sysFlag's IPv6 bits say (else the
    /// twin, whose struct pads or cuts, decides).
    pub fn hosts_match(&self) -> bool {
        let want = |v6: bool| if v6 { 16 } else { 4 };
        self.born_host.addr.len() == want(self.sys_flag & BORNHOST_V6_FLAG != 0)
            && self.store_host.addr.len() == want(self.sys_flag & STOREHOSTADDRESS_V6_FLAG != 0)
    }

    pub fn head_size(&self) -> usize {
        HEAD_SIZE_V4
            + if self.sys_flag & BORNHOST_V6_FLAG != 0 { 12 } else { 0 }
            + if self.sys_flag & STOREHOSTADDRESS_V6_FLAG != 0 {
                12
            } else {
                0
            }
    }
}

/// `UtilAll.crc32`: CRC32 with the top bit cleared.
pub fn crc32(body: &[u8]) -> i32 {
    (crc32fast::hash(body) & 0x7FFF_FFFF) as i32
}

/// Java's `String.hashCode` over the UTF-16 code units, as a signed 32-bit int.
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)))
}

/// `tags_code`: the tagsCode of a TAGS value, 0 for none or empty.
pub fn tags_code(tags: Option<&str>) -> i32 {
    match tags {
        Some(t) if !t.is_empty() => java_string_hash(t),
        _ => 0,
    }
}

fn put_host(out: &mut Vec<u8>, h: &Host<'_>) {
    out.extend_from_slice(h.addr);
    out.extend_from_slice(&h.port.to_be_bytes());
}

/// Appends one record of `msg_len` bytes to `out`; the hosts must match the sysFlag
/// (`hosts_match`) and `topic_blob` is TOPICLENGTH + TOPIC.
pub fn write_record(
    out: &mut Vec<u8>,
    msg_len: i32,
    f: &RecordFields<'_>,
    flag: i32,
    body: &[u8],
    topic_blob: &[u8],
    properties: &[u8],
) {
    out.extend_from_slice(&msg_len.to_be_bytes());
    out.extend_from_slice(&MESSAGE_MAGIC_CODE.to_be_bytes());
    out.extend_from_slice(&crc32(body).to_be_bytes());
    out.extend_from_slice(&f.queue_id.to_be_bytes());
    out.extend_from_slice(&flag.to_be_bytes());
    out.extend_from_slice(&[0u8; 16]); // QUEUEOFFSET, PHYSICALOFFSET: patched under the lock
    out.extend_from_slice(&f.sys_flag.to_be_bytes());
    out.extend_from_slice(&f.born_timestamp.to_be_bytes());
    put_host(out, &f.born_host);
    out.extend_from_slice(&[0u8; 8]); // STORETIMESTAMP: patched under the lock
    put_host(out, &f.store_host);
    out.extend_from_slice(&f.reconsume_times.to_be_bytes());
    out.extend_from_slice(&f.prepared_transaction_offset.to_be_bytes());
    out.extend_from_slice(&(body.len() as i32).to_be_bytes());
    out.extend_from_slice(body);
    out.extend_from_slice(topic_blob);
    out.extend_from_slice(&(properties.len() as u16).to_be_bytes());
    out.extend_from_slice(properties);
}

/// One record (the fields' own flag), or None off the fast path: hosts that do not match the
/// sysFlag, a body, topic or properties too long for their length fields.
pub fn encode_record(f: &RecordFields<'_>, body: &[u8], topic_blob: &[u8], properties: &[u8]) -> Option<Vec<u8>> {
    if !f.hosts_match() || properties.len() > usize::from(u16::MAX) || topic_blob.is_empty() {
        return None;
    }
    let n = f.head_size() + body.len() + topic_blob.len() + 2 + properties.len();
    let msg_len = i32::try_from(n).ok()?;
    let mut out = Vec::with_capacity(n);
    write_record(&mut out, msg_len, f, f.flag, body, topic_blob, properties);
    Some(out)
}

/// What dispatch needs of one message of a batch.
#[derive(Debug, PartialEq, Eq)]
pub struct BatchMessage<'a> {
    pub size: usize,
    pub tags_code: i32,
    pub keys: Option<&'a str>,
    pub uniq: Option<&'a str>,
    pub properties: Cow<'a, str>,
}

/// Why a batch body is refused (MESSAGE_ILLEGAL); `remark` is the twin's text.
#[derive(Debug, PartialEq, Eq)]
pub enum BatchError {
    Truncated(usize),
    BadRecord(usize),
    BadProperties(usize),
    NotUtf8(usize),
    Delayed(usize),
    PropertiesTooLong(usize),
    TooBig(usize, i64),
    OverMax(i64),
}

impl BatchError {
    pub fn remark(&self) -> String {
        match self {
            BatchError::Truncated(pos) => format!("batch body truncated at byte {}", pos),
            BatchError::BadRecord(pos) => format!("bad batch record at byte {}", pos),
            BatchError::BadProperties(pos) => format!("bad batch record properties at byte {}", pos),
            BatchError::NotUtf8(pos) => format!("batch record properties at byte {} are not UTF-8", pos),
            BatchError::Delayed(i) => {
                format!(
                    "message {} of the batch has a delay level; batches cannot be delayed",
                    i
                )
            }
            BatchError::PropertiesTooLong(n) => format!("properties are {} bytes, the limit is 32767", n),
            BatchError::TooBig(n, max) => format!("message is {} bytes, maxMessageSize is {}", n, max),
            BatchError::OverMax(max) => format!("the batch's records are over {} bytes (maxMessageSize)", max),
        }
    }
}

fn be_i32(raw: &[u8], at: usize) -> Option<i32> {
    let b = raw.get(at..at.checked_add(4)?)?;
    Some(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

fn be_i16(raw: &[u8], at: usize) -> Option<i16> {
    let b = raw.get(at..at.checked_add(2)?)?;
    Some(i16::from_be_bytes([b[0], b[1]]))
}

/// `needle` occurs in `hay` (an empty needle everywhere, as Python's `in`): a scan for its first
/// byte, then a compare there (a compare at every position, `windows`, cost ten times more).
fn contains(hay: &[u8], needle: &[u8]) -> bool {
    let (first, n) = match needle.first() {
        Some(&b) => (b, needle.len()),
        None => return true,
    };
    let mut i = 0;
    while i + n <= hay.len() {
        match hay[i..=hay.len() - n].iter().position(|&b| b == first) {
            Some(p) => i += p,
            None => return false,
        }
        if &hay[i..i + n] == needle {
            return true;
        }
        i += 1;
    }
    false
}

/// Each message of a batch body whose properties hold one of `needles`: (its index, where its
/// properties start, where they end), in order. The walk steps by TOTALSIZE and stops at the
/// first message that is malformed (a TOTALSIZE not above 0, a negative BODYLENGTH, no room for
/// PROPERTIESLENGTH); properties running past the end are cut there.
pub fn properties_holding(raw: &[u8], needles: &[&[u8]]) -> Vec<(usize, usize, usize)> {
    let mut out = Vec::new();
    let (mut pos, mut index) = (0usize, 0usize);
    while pos.checked_add(BATCH_HEAD_SIZE).map_or(false, |end| end <= raw.len()) {
        let (total, body_len) = match (be_i32(raw, pos), be_i32(raw, pos + 16)) {
            (Some(t), Some(b)) if t > 0 && b >= 0 => (t, b),
            _ => break,
        };
        let at = (pos + BATCH_HEAD_SIZE).saturating_add(body_len as usize);
        let plen = match be_i16(raw, at) {
            Some(p) => p,
            None => break,
        };
        let start = at + 2;
        let end = (start + plen.max(0) as usize).min(raw.len());
        if needles.iter().any(|n| contains(&raw[start..end], n)) {
            out.push((index, start, end));
        }
        pos = pos.saturating_add(total as usize);
        index += 1;
    }
    out
}

/// The messages of a batch body as records appended to `out` (each with the message's flag
/// and its properties, then `suffix` after a \x02), and what dispatch needs of each. None off
/// the fast path (hosts not matching the sysFlag, an empty topic blob).
pub fn encode_batch<'a>(
    raw: &'a [u8],
    f: &RecordFields<'_>,
    topic_blob: &[u8],
    suffix: &str,
    max_size: i64,
    out: &mut Vec<u8>,
) -> Option<Result<Vec<BatchMessage<'a>>, BatchError>> {
    if !f.hosts_match() || topic_blob.is_empty() {
        return None;
    }
    let fixed = f.head_size() + topic_blob.len() + 2;
    let mut msgs = Vec::new();
    let (mut pos, mut start) = (0usize, 0i64);
    while pos < raw.len() {
        let r = walk_one(raw, pos, msgs.len(), f, topic_blob, fixed, suffix, max_size, out);
        let (msg, total) = match r {
            Ok(m) => m,
            Err(e) => return Some(Err(e)),
        };
        start += msg.size as i64;
        msgs.push(msg);
        if start > max_size {
            return Some(Err(BatchError::OverMax(max_size)));
        }
        pos += total;
    }
    Some(Ok(msgs))
}

#[allow(clippy::too_many_arguments)]
fn walk_one<'a>(
    raw: &'a [u8],
    pos: usize,
    index: usize,
    f: &RecordFields<'_>,
    topic_blob: &[u8],
    fixed: usize,
    suffix: &str,
    max_size: i64,
    out: &mut Vec<u8>,
) -> Result<(BatchMessage<'a>, usize), BatchError> {
    if raw.len() - pos < 22 {
        return Err(BatchError::Truncated(pos));
    }
    let field = |at: usize| be_i32(raw, pos + at).ok_or(BatchError::Truncated(pos));
    let (total, flag, bl) = (field(0)?, field(12)?, field(16)?);
    let p = pos + BATCH_HEAD_SIZE;
    let bl = usize::try_from(bl).map_err(|_| BatchError::BadRecord(pos))?;
    if p + bl + 2 > raw.len() {
        return Err(BatchError::BadRecord(pos));
    }
    let body = &raw[p..p + bl];
    let plen = be_i16(raw, p + bl).ok_or(BatchError::BadRecord(pos))?;
    let p = p + bl + 2;
    let plen = usize::try_from(plen).map_err(|_| BatchError::BadProperties(pos))?;
    if p + plen > raw.len() || i64::from(total) != (22 + bl + plen) as i64 {
        return Err(BatchError::BadProperties(pos));
    }
    let (mut tags, mut keys, mut uniq) = (None, None, None);
    let props: Cow<'a, str> = if plen > 0 {
        let ps = std::str::from_utf8(&raw[p..p + plen]).map_err(|_| BatchError::NotUtf8(pos))?;
        for pair in ps.split('\x02') {
            let (name, value) = match pair.find('\x01') {
                Some(i) => (&pair[..i], &pair[i + 1..]),
                None => (pair, ""),
            };
            match name {
                TAGS => tags = Some(value),
                KEYS => keys = Some(value),
                UNIQ => uniq = Some(value),
                DELAY if !value.is_empty() => return Err(BatchError::Delayed(index)),
                _ => {}
            }
        }
        if suffix.is_empty() {
            Cow::Borrowed(ps)
        } else {
            let kept = ps.trim_end_matches('\x02');
            let mut s = String::with_capacity(kept.len() + 1 + suffix.len());
            s.push_str(kept);
            s.push('\x02');
            s.push_str(suffix);
            Cow::Owned(s)
        }
    } else {
        Cow::Owned(suffix.to_owned())
    };
    let pl = props.len();
    if pl > MAX_PROPERTIES_LENGTH {
        return Err(BatchError::PropertiesTooLong(pl));
    }
    let n = fixed + bl + pl;
    if n as i64 > max_size {
        return Err(BatchError::TooBig(n, max_size));
    }
    // n ≤ max_size here, and a body is at most i32::MAX bytes: n fits i32 unless max_size
    // is past it, which no config allows
    let msg_len = i32::try_from(n).map_err(|_| BatchError::TooBig(n, max_size))?;
    write_record(out, msg_len, f, flag, body, topic_blob, props.as_bytes());
    let msg = BatchMessage {
        size: n,
        tags_code: tags_code(tags),
        keys,
        uniq,
        properties: props,
    };
    Ok((msg, total as usize))
}

/// `string_to_message_properties`: the pairs of a properties string in the order a Python dict
/// keeps them (a name seen again takes the later value in its first place); a pair needs a
/// non-empty name and value, the value is all after the name's first \x01.
pub fn parse_properties(s: &str) -> Vec<(&str, &str)> {
    let mut out: Vec<(&str, &str)> = Vec::new();
    if s.is_empty() {
        return out;
    }
    // where each name is in `out`: a search of `out` per pair made a string of many pairs
    // quadratic (a producer could stall the broker's loop with one send)
    let mut at: HashMap<&str, usize> = HashMap::new();
    for pair in s.split('\x02') {
        let (name, value) = match pair.find('\x01') {
            Some(i) => (&pair[..i], &pair[i + 1..]),
            None => (pair, ""),
        };
        if name.is_empty() || value.is_empty() {
            continue;
        }
        match at.get(name) {
            Some(&i) => out[i].1 = value,
            None => {
                at.insert(name, out.len());
                out.push((name, value));
            }
        }
    }
    out
}

/// The offset msgIds of a batch's records, comma-joined (`message_decoder.join_message_ids`):
/// `prefix` (store host address and port in hex) and each offset as 16 upper-case hex digits,
/// two's complement as Java's putLong.
pub fn join_message_ids(prefix: &str, offsets: &[i64]) -> String {
    let mut out = String::with_capacity(offsets.len() * (prefix.len() + 17));
    for (i, o) in offsets.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(prefix);
        out.push_str(&format!("{:016X}", *o as u64));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOCAL: [u8; 4] = [127, 0, 0, 1];

    fn fields(sys_flag: i32, born: &[u8], store: &[u8]) -> RecordFields<'static> {
        let leak = |b: &[u8]| -> &'static [u8] { Box::leak(b.to_vec().into_boxed_slice()) };
        RecordFields {
            queue_id: 3,
            flag: 7,
            sys_flag,
            born_timestamp: 1_700_000_000_000,
            born_host: Host {
                addr: leak(born),
                port: 54321,
            },
            store_host: Host {
                addr: leak(store),
                port: 10911,
            },
            reconsume_times: 2,
            prepared_transaction_offset: 9,
        }
    }

    fn batch_message(flag: i32, body: &[u8], props: &[u8]) -> Vec<u8> {
        let mut m = Vec::new();
        m.extend_from_slice(&((22 + body.len() + props.len()) as i32).to_be_bytes());
        m.extend_from_slice(&0i32.to_be_bytes());
        m.extend_from_slice(&0i32.to_be_bytes());
        m.extend_from_slice(&flag.to_be_bytes());
        m.extend_from_slice(&(body.len() as i32).to_be_bytes());
        m.extend_from_slice(body);
        m.extend_from_slice(&(props.len() as i16).to_be_bytes());
        m.extend_from_slice(props);
        m
    }

    #[test]
    fn crc_and_hash_are_javas() {
        assert_eq!(crc32(b"hello"), 0x3610_a686);
        assert_eq!(java_string_hash("TagA"), 2_598_919);
        assert_eq!(java_string_hash("é😀"), {
            let units: Vec<u16> = "é😀".encode_utf16().collect();
            units
                .iter()
                .fold(0i32, |h, &c| h.wrapping_mul(31).wrapping_add(i32::from(c)))
        });
        assert_eq!(tags_code(Some("")), 0);
        assert_eq!(tags_code(None), 0);
    }

    #[test]
    fn properties() {
        assert_eq!(parse_properties(""), vec![]);
        assert_eq!(parse_properties("a\x011\x02b\x012\x02"), vec![("a", "1"), ("b", "2")]);
        assert_eq!(
            parse_properties("a\x011\x02b\x012\x02a\x013"),
            vec![("a", "3"), ("b", "2")]
        );
        assert_eq!(
            parse_properties("\x01x\x02y\x01\x02z\x02w\x01v\x01u"),
            vec![("w", "v\x01u")]
        );
    }

    #[test]
    fn message_ids() {
        assert_eq!(join_message_ids("AB", &[]), "");
        assert_eq!(
            join_message_ids("AB", &[1, 255]),
            "AB0000000000000001,AB00000000000000FF"
        );
        assert_eq!(join_message_ids("", &[-1]), "FFFFFFFFFFFFFFFF");
    }

    #[test]
    fn record_layout() {
        let f = fields(0, &LOCAL, &LOCAL);
        let rec = encode_record(&f, b"hello", b"\x05Topic", b"a\x01b").unwrap();
        assert_eq!(rec.len(), 88 + 5 + 6 + 2 + 3);
        assert_eq!(&rec[0..4], &(rec.len() as i32).to_be_bytes());
        assert_eq!(&rec[8..12], &0x3610_a686i32.to_be_bytes());
        assert_eq!(&rec[16..20], &7i32.to_be_bytes());
        assert_eq!(&rec[84..88], &5i32.to_be_bytes());
        assert_eq!(&rec[88..93], b"hello");
        assert_eq!(&rec[rec.len() - 5..], b"\x00\x03a\x01b");
    }

    #[test]
    fn ipv6_hosts_and_mismatch() {
        let v6 = [0u8; 16];
        let f = fields(BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG, &v6, &v6);
        assert_eq!(encode_record(&f, b"", b"\x01T", b"").unwrap().len(), 112 + 2 + 2);
        assert!(encode_record(&fields(BORNHOST_V6_FLAG, &LOCAL, &LOCAL), b"", b"\x01T", b"").is_none());
        assert!(encode_record(&fields(0, &v6, &LOCAL), b"", b"\x01T", b"").is_none());
    }

    #[test]
    fn batch_walk() {
        let f = fields(0, &LOCAL, &LOCAL);
        let mut raw = batch_message(1, b"ab", b"TAGS\x01TagA\x02KEYS\x01k1\x02UNIQ_KEY\x01U1\x02");
        raw.extend(batch_message(2, b"", b""));
        let mut out = Vec::new();
        let msgs = encode_batch(&raw, &f, b"\x01T", "CLUSTER\x01c", 1 << 20, &mut out)
            .unwrap()
            .unwrap();
        assert_eq!(msgs.len(), 2);
        assert_eq!(msgs[0].tags_code, java_string_hash("TagA"));
        assert_eq!(msgs[0].keys, Some("k1"));
        assert_eq!(msgs[0].uniq, Some("U1"));
        assert_eq!(
            msgs[0].properties,
            "TAGS\x01TagA\x02KEYS\x01k1\x02UNIQ_KEY\x01U1\x02CLUSTER\x01c"
        );
        assert_eq!(msgs[1].properties, "CLUSTER\x01c");
        assert_eq!(out.len(), msgs[0].size + msgs[1].size);
        assert_eq!(&out[16..20], &1i32.to_be_bytes());
    }

    #[test]
    fn batch_refusals() {
        let f = fields(0, &LOCAL, &LOCAL);
        let walk = |raw: &[u8], max: i64| {
            let mut out = Vec::new();
            encode_batch(raw, &f, b"\x01T", "", max, &mut out)
                .unwrap()
                .map(|m| m.len())
        };
        let good = batch_message(0, b"abc", b"");
        assert_eq!(walk(&good[..21], 1 << 20), Err(BatchError::Truncated(0)));
        let mut bad_len = good.clone();
        bad_len[16..20].copy_from_slice(&(-1i32).to_be_bytes());
        assert_eq!(walk(&bad_len, 1 << 20), Err(BatchError::BadRecord(0)));
        let mut bad_total = good.clone();
        bad_total[0..4].copy_from_slice(&99i32.to_be_bytes());
        assert_eq!(walk(&bad_total, 1 << 20), Err(BatchError::BadProperties(0)));
        assert_eq!(
            walk(&batch_message(0, b"", b"\xff\x01a"), 1 << 20),
            Err(BatchError::NotUtf8(0))
        );
        let mut delayed = good.clone();
        delayed.extend(batch_message(0, b"", b"DELAY\x013"));
        assert_eq!(walk(&delayed, 1 << 20), Err(BatchError::Delayed(1)));
        assert_eq!(walk(&good, 50), Err(BatchError::TooBig(88 + 2 + 2 + 3, 50)));
        assert_eq!(
            BatchError::OverMax(5).remark(),
            "the batch's records are over 5 bytes (maxMessageSize)"
        );
    }

    #[test]
    fn contains_as_pythons_in() {
        assert!(contains(b"abc", b""));
        assert!(contains(b"", b""));
        assert!(!contains(b"", b"a"));
        assert!(contains(b"xxab", b"ab"));
        assert!(contains(b"aab", b"ab"));
        assert!(!contains(b"a", b"ab"));
        assert!(!contains(b"aaxb", b"ab"));
        assert!(contains(b"ab", b"ab"));
    }

    #[test]
    fn properties_holding_looks_at_properties_only() {
        let needles: [&[u8]; 2] = [b"TIMER_DEL", b"__STARTDELIVERTIME"];
        let mut b = batch_message(0, b"TIMER_DELAY_SEC in a body", b"KEYS\x01k");
        b.extend(batch_message(0, b"x", b"TIMER_DELAY_SEC\x015"));
        b.extend(batch_message(0, b"", b""));
        b.extend(batch_message(0, b"y", b"A\x01b\x02__STARTDELIVERTIME\x019"));
        let found = properties_holding(&b, &needles);
        assert_eq!(found.iter().map(|f| f.0).collect::<Vec<_>>(), vec![1, 3]);
        let (_, s, e) = found[0];
        assert_eq!(&b[s..e], b"TIMER_DELAY_SEC\x015");
    }

    #[test]
    fn properties_holding_stops_at_a_malformed_message() {
        let needles: [&[u8]; 1] = [b"T"];
        let mut b = batch_message(0, b"", b"T");
        b.extend_from_slice(&0i32.to_be_bytes()); // TOTALSIZE 0
        b.extend_from_slice(&[0; 16]);
        b.extend(batch_message(0, b"", b"T"));
        assert_eq!(properties_holding(&b, &needles).len(), 1);
        let mut cut = batch_message(0, b"ab", b"TTTT");
        cut.truncate(cut.len() - 2); // properties cut at the end: what is there is searched
        assert_eq!(properties_holding(&cut, &needles), vec![(0, 24, 26)]);
        assert!(properties_holding(&cut[..23], &needles).is_empty()); // no room for the length
        assert!(properties_holding(&[], &needles).is_empty());
        let mut neg = batch_message(0, b"ab", b"T");
        neg[16..20].copy_from_slice(&(-1i32).to_be_bytes());
        assert!(properties_holding(&neg, &needles).is_empty());
        let empty: [&[u8]; 1] = [b""];
        assert_eq!(
            properties_holding(&batch_message(0, b"", b""), &empty),
            vec![(0, 22, 22)]
        );
    }
}
