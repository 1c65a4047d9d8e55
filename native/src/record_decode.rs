//! The CommitLog record walk: a run of records (a pull body, a CommitLog file) to each record's
//! header fields, body, topic and properties string, and a properties string to its pairs. The
//! record table and the twins are in `src/pumice/common/message_decoder.py` (the record, the
//! properties), `src/pumice/client/message.py` (`decode_messages`, a pull body) and
//! `src/pumice/store/message_check.py` (`scan_records`, recovery's walk).
//!
//! A function answers `None` (or `Step::Off`) for input it does not take on its fast path, valid
//! or not (a negative body length, a field past its record, bad UTF-8): the Python twin then
//! gives the answer or the error, so both paths agree by construction there. Nothing here
//! panics: every read is bounds-checked.

pub const MESSAGE_MAGIC_CODE: u32 = 0xDAA3_20A7;
pub const BLANK_MAGIC_CODE: u32 = 0xCBD4_3194;
pub const BORNHOST_V6_FLAG: i32 = 0x10;
pub const STOREHOSTADDRESS_V6_FLAG: i32 = 0x20;
/// The smallest record: IPv4 hosts, empty body, topic and properties.
pub const MIN_RECORD_SIZE: i64 = 91;
const SYSFLAG_POSITION: usize = 36;
const PREFIX_SIZE: usize = 40;

pub const NAME_VALUE_SEPARATOR: char = '\u{1}';
pub const PROPERTY_SEPARATOR: char = '\u{2}';

fn be_u16(b: &[u8], p: usize) -> Option<u16> {
    let s = b.get(p..p.checked_add(2)?)?;
    Some(u16::from_be_bytes([s[0], s[1]]))
}

fn be_u32(b: &[u8], p: usize) -> Option<u32> {
    let s = b.get(p..p.checked_add(4)?)?;
    Some(u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
}

fn be_i32(b: &[u8], p: usize) -> Option<i32> {
    be_u32(b, p).map(|v| v as i32)
}

fn be_i64(b: &[u8], p: usize) -> Option<i64> {
    let s = b.get(p..p.checked_add(8)?)?;
    Some(i64::from_be_bytes([s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]]))
}

fn host_length(v6: bool) -> usize {
    if v6 {
        20
    } else {
        8
    }
}

/// The header's size for this sysFlag (88 with IPv4 hosts, 12 more for each IPv6 host).
pub fn head_size(sys_flag: i32) -> usize {
    72 + host_length(sys_flag & BORNHOST_V6_FLAG != 0) + host_length(sys_flag & STOREHOSTADDRESS_V6_FLAG != 0)
}

/// A record's header fields, TOTALSIZE … BODYLENGTH, in the order of the record table (each
/// host as its address bytes and port).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head<'a> {
    pub store_size: i32,
    pub magic: u32,
    pub body_crc: u32,
    pub queue_id: i32,
    pub flag: i32,
    pub queue_offset: i64,
    pub physical_offset: i64,
    pub sys_flag: i32,
    pub born_timestamp: i64,
    pub born_addr: &'a [u8],
    pub born_port: i32,
    pub store_timestamp: i64,
    pub store_addr: &'a [u8],
    pub store_port: i32,
    pub reconsume_times: i32,
    pub prepared_transaction_offset: i64,
    pub body_length: i32,
}

/// The header of the record at `pos` (None when it is past the end of `buf`).
pub fn head(buf: &[u8], pos: usize) -> Option<Head<'_>> {
    let sys_flag = be_i32(buf, pos.checked_add(SYSFLAG_POSITION)?)?;
    let born_len = host_length(sys_flag & BORNHOST_V6_FLAG != 0);
    let store_len = host_length(sys_flag & STOREHOSTADDRESS_V6_FLAG != 0);
    let h = buf.get(pos..pos.checked_add(72 + born_len + store_len)?)?;
    let b = 48; // BORNHOST
    let s = b + born_len + 8; // STOREHOSTADDRESS
    let r = s + store_len; // RECONSUMETIMES
    Some(Head {
        store_size: be_i32(h, 0)?,
        magic: be_u32(h, 4)?,
        body_crc: be_u32(h, 8)?,
        queue_id: be_i32(h, 12)?,
        flag: be_i32(h, 16)?,
        queue_offset: be_i64(h, 20)?,
        physical_offset: be_i64(h, 28)?,
        sys_flag,
        born_timestamp: be_i64(h, 40)?,
        born_addr: h.get(b..b + born_len - 4)?,
        born_port: be_i32(h, b + born_len - 4)?,
        store_timestamp: be_i64(h, b + born_len)?,
        store_addr: h.get(s..s + store_len - 4)?,
        store_port: be_i32(h, s + store_len - 4)?,
        reconsume_times: be_i32(h, r)?,
        prepared_transaction_offset: be_i64(h, r + 4)?,
        body_length: be_i32(h, r + 12)?,
    })
}

/// One whole record: its header, body, topic and properties string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record<'a> {
    pub head: Head<'a>,
    pub body: &'a [u8],
    pub topic: &'a str,
    pub properties: &'a str,
}

/// A step of the walk over a pull body.
#[derive(Debug, PartialEq, Eq)]
pub enum Step<'a> {
    /// A record and where the next one starts.
    Record(Record<'a>, usize),
    /// Fewer than 4 bytes left: the body ends here, as the twin's loop does.
    End,
    /// Not on the fast path (a bad or truncated record, bad UTF-8): the twin decides.
    Off,
}

/// The record at `pos` of a pull body, as the client's `decode_messages` reads one: TOTALSIZE
/// inside the body, the body, topic and properties inside TOTALSIZE (bytes after the
/// properties, up to TOTALSIZE, are skipped as the twin skips them).
pub fn next_record(buf: &[u8], pos: usize) -> Step<'_> {
    let left = match buf.len().checked_sub(pos) {
        Some(n) => n,
        None => return Step::Off,
    };
    if left < 4 {
        return Step::End;
    }
    match record_at(buf, pos) {
        Some((r, next)) => Step::Record(r, next),
        None => Step::Off,
    }
}

fn record_at(buf: &[u8], pos: usize) -> Option<(Record<'_>, usize)> {
    let h = head(buf, pos)?;
    if h.magic != MESSAGE_MAGIC_CODE || h.store_size <= 0 || h.body_length < 0 {
        return None;
    }
    let record_end = pos.checked_add(h.store_size as usize)?;
    let rec = buf.get(pos..record_end)?;
    let mut p = head_size(h.sys_flag);
    let body = rec.get(p..p.checked_add(h.body_length as usize)?)?;
    p += body.len();
    let tlen = usize::from(*rec.get(p)?);
    let topic = std::str::from_utf8(rec.get(p + 1..p + 1 + tlen)?).ok()?;
    p += 1 + tlen;
    let plen = usize::from(be_u16(rec, p)?);
    let properties = std::str::from_utf8(rec.get(p + 2..p + 2 + plen)?).ok()?;
    Some((
        Record {
            head: h,
            body,
            topic,
            properties,
        },
        record_end,
    ))
}

/// A body's CRC32 (None: the twin decides).
pub type BodyCrc<'a> = dyn FnMut(&[u8]) -> Option<u32> + 'a;

/// `scan_records`: walk valid records of `buf[pos..limit]`; (end, records, hit_blank) as the
/// twin answers, or None off the fast path (`pos`/`limit` outside `buf`, a header read past
/// the end of `buf`, or `crc` failing). `crc`, when given, is the body's CRC32 (top bit not
/// yet cleared), checked against BODYCRC.
pub fn scan_records(
    buf: &[u8],
    mut pos: usize,
    limit: usize,
    mut crc: Option<&mut BodyCrc<'_>>,
) -> Option<(usize, u64, bool)> {
    if pos > limit || limit > buf.len() {
        return None;
    }
    let mut records = 0u64;
    let blank_end =
        |pos: usize, total: i32, magic: u32| magic == BLANK_MAGIC_CODE && i64::from(total) == (limit - pos) as i64;
    while limit - pos >= PREFIX_SIZE {
        let total = be_i32(buf, pos)?;
        let magic = be_u32(buf, pos + 4)?;
        if magic != MESSAGE_MAGIC_CODE {
            return Some((pos, records, blank_end(pos, total, magic)));
        }
        if i64::from(total) < MIN_RECORD_SIZE || i64::from(total) > (limit - pos) as i64 {
            return Some((pos, records, false));
        }
        let sys_flag = be_i32(buf, pos + SYSFLAG_POSITION)?;
        let p = pos + head_size(sys_flag);
        let blen = i64::from(be_i32(buf, p - 4)?);
        let end = pos + total as usize;
        if blen < 0 || p as i64 + blen + 3 > end as i64 {
            return Some((pos, records, false));
        }
        let t = p + blen as usize;
        let tl = usize::from(*buf.get(t)?);
        if t + 3 + tl > end || t + 3 + tl + usize::from(be_u16(buf, t + 1 + tl)?) != end {
            return Some((pos, records, false));
        }
        if let Some(f) = crc.as_mut() {
            if f(buf.get(p..t)?)? & 0x7FFF_FFFF != be_u32(buf, pos + 8)? {
                return Some((pos, records, false));
            }
        }
        records += 1;
        pos = end;
    }
    if limit - pos >= 8 {
        let total = be_i32(buf, pos)?;
        let magic = be_u32(buf, pos + 4)?;
        return Some((pos, records, blank_end(pos, total, magic)));
    }
    Some((pos, records, false))
}

/// `string_to_message_properties`' pairs, in order: each `\x02`-separated segment split at its
/// first `\x01`, kept when both name and value are non-empty (a later duplicate name replaces
/// the earlier value where the caller keeps a map).
pub fn properties(s: &str) -> impl Iterator<Item = (&str, &str)> {
    s.split(PROPERTY_SEPARATOR).filter_map(|pair| {
        let (name, value) = match pair.find(NAME_VALUE_SEPARATOR) {
            Some(i) => (&pair[..i], &pair[i + 1..]),
            None => (pair, ""),
        };
        if name.is_empty() || value.is_empty() {
            None
        } else {
            Some((name, value))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record with IPv4 or IPv6 hosts, as message_decoder.encode_record writes one.
    fn record(sys_flag: i32, body: &[u8], topic: &str, props: &str, phys: i64) -> Vec<u8> {
        let born: &[u8] = if sys_flag & BORNHOST_V6_FLAG != 0 {
            &[1; 16]
        } else {
            &[127, 0, 0, 1]
        };
        let store: &[u8] = if sys_flag & STOREHOSTADDRESS_V6_FLAG != 0 {
            &[2; 16]
        } else {
            &[10, 0, 0, 2]
        };
        let size = head_size(sys_flag) + body.len() + 1 + topic.len() + 2 + props.len();
        let mut r = Vec::new();
        r.extend_from_slice(&(size as i32).to_be_bytes());
        r.extend_from_slice(&MESSAGE_MAGIC_CODE.to_be_bytes());
        r.extend_from_slice(&7u32.to_be_bytes()); // body crc
        r.extend_from_slice(&3i32.to_be_bytes()); // queue id
        r.extend_from_slice(&0i32.to_be_bytes()); // flag
        r.extend_from_slice(&5i64.to_be_bytes()); // queue offset
        r.extend_from_slice(&phys.to_be_bytes());
        r.extend_from_slice(&sys_flag.to_be_bytes());
        r.extend_from_slice(&11i64.to_be_bytes()); // born timestamp
        r.extend_from_slice(born);
        r.extend_from_slice(&4000i32.to_be_bytes());
        r.extend_from_slice(&12i64.to_be_bytes()); // store timestamp
        r.extend_from_slice(store);
        r.extend_from_slice(&10911i32.to_be_bytes());
        r.extend_from_slice(&1i32.to_be_bytes()); // reconsume
        r.extend_from_slice(&0i64.to_be_bytes()); // prepared
        r.extend_from_slice(&(body.len() as i32).to_be_bytes());
        r.extend_from_slice(body);
        r.push(topic.len() as u8);
        r.extend_from_slice(topic.as_bytes());
        r.extend_from_slice(&(props.len() as u16).to_be_bytes());
        r.extend_from_slice(props.as_bytes());
        assert_eq!(r.len(), size);
        r
    }

    fn walk(buf: &[u8]) -> Option<Vec<Record<'_>>> {
        let mut out = Vec::new();
        let mut pos = 0;
        loop {
            match next_record(buf, pos) {
                Step::Record(r, next) => {
                    out.push(r);
                    pos = next;
                }
                Step::End => return Some(out),
                Step::Off => return None,
            }
        }
    }

    #[test]
    fn walks_ipv4_and_ipv6_records() {
        let mut buf = record(0, b"hello", "T", "TAGS\u{1}a\u{2}KEYS\u{1}k", 0);
        let first = buf.len() as i64;
        buf.extend(record(
            BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG,
            b"",
            "Topic",
            "",
            first,
        ));
        buf.extend_from_slice(&[0, 0, 0]); // fewer than 4 bytes left: ignored
        let rs = walk(&buf).unwrap();
        assert_eq!(rs.len(), 2);
        assert_eq!(rs[0].body, b"hello");
        assert_eq!(rs[0].topic, "T");
        assert_eq!(rs[0].properties, "TAGS\u{1}a\u{2}KEYS\u{1}k");
        assert_eq!(rs[0].head.born_addr, &[127, 0, 0, 1]);
        assert_eq!(rs[0].head.store_port, 10911);
        assert_eq!(rs[1].head.born_addr, &[1; 16]);
        assert_eq!(rs[1].head.store_addr, &[2; 16]);
        assert_eq!(rs[1].head.physical_offset, first);
        assert_eq!(rs[1].topic, "Topic");
    }

    #[test]
    fn anything_odd_is_off_the_fast_path() {
        let good = record(0, b"body", "T", "a\u{1}b", 0);
        for cut in 4..good.len() {
            assert_eq!(walk(&good[..cut]), None, "truncated at {}", cut);
        }
        let mut bad_magic = good.clone();
        bad_magic[4] ^= 1;
        assert_eq!(walk(&bad_magic), None);
        let mut negative_body = good.clone();
        negative_body[84..88].copy_from_slice(&(-1i32).to_be_bytes());
        assert_eq!(walk(&negative_body), None);
        let mut huge_body = good.clone();
        huge_body[84..88].copy_from_slice(&i32::MAX.to_be_bytes());
        assert_eq!(walk(&huge_body), None);
        let mut bad_utf8 = good.clone();
        let t = 88 + 4 + 1;
        bad_utf8[t] = 0xff;
        assert_eq!(walk(&bad_utf8), None);
        let mut zero_size = good;
        zero_size[0..4].copy_from_slice(&0i32.to_be_bytes());
        assert_eq!(walk(&zero_size), None);
        assert_eq!(next_record(b"ab", 5), Step::Off);
    }

    #[test]
    fn scan_counts_records_and_finds_the_blank() {
        let mut buf = record(0, b"x", "T", "", 0);
        let first = buf.len();
        buf.extend(record(STOREHOSTADDRESS_V6_FLAG, b"yy", "T", "k\u{1}v", 0));
        let used = buf.len();
        buf.extend_from_slice(&(16i32).to_be_bytes());
        buf.extend_from_slice(&BLANK_MAGIC_CODE.to_be_bytes());
        buf.extend_from_slice(&[0; 8]);
        assert_eq!(scan_records(&buf, 0, buf.len(), None), Some((used, 2, true)));
        let mut crc_of_x = |b: &[u8]| Some(if b == b"x" { 7 } else { 0 });
        assert_eq!(
            scan_records(&buf, 0, buf.len(), Some(&mut crc_of_x)),
            Some((first, 1, false))
        );
        assert_eq!(scan_records(&buf, 0, buf.len() + 1, None), None);
        assert_eq!(scan_records(&buf, 3, 2, None), None);
        assert_eq!(scan_records(&[0; 100], 0, 100, None), Some((0, 0, false)));
    }

    #[test]
    fn properties_skip_empty_names_and_values() {
        let got: Vec<_> = properties("a\u{1}1\u{2}\u{2}\u{1}x\u{2}b\u{1}\u{2}c\u{1}3\u{1}4\u{2}d").collect();
        assert_eq!(got, vec![("a", "1"), ("c", "3\u{1}4")]);
        assert_eq!(properties("").count(), 0);
    }
}
