//! The Spark reader's columns (the twin is `to_record_batch` in
//! `src/pumice/spark/record_columns.py`, its per-row steps `_properties` and the numpy/Arrow
//! code around it):
//!
//! | part | what |
//! |---|---|
//! | `property_columns` | a batch of properties strings (Arrow's offsets and data) to the pairs of each, as the buffers of an Arrow map array (each row's first pair, names, values), and the pair of each row that holds a picked name (KEYS, TAGS, UNIQ_KEY) |
//! | `walk_records` | the CommitLog records at given positions of a segment, checked as the store's scan checks them (magic, TOTALSIZE, the length fields adding up) and in order, each record's fields and where its body, topic and properties lie |
//! | `RecordColumns` | every other column of the batch from one walk: fixed-width ints, offsets and data of topic, body, offsetMsgId, msgId, hosts (`a.b.c.d:port`, `[v6]:port` as Python's `ipaddress` writes it), KEYS, TAGS (with a validity bitmap) |
//!
//! A pair is what lies between two `\x02` (or a string's ends); its name ends at its first
//! `\x01`; a pair with an empty name or value is dropped. Where a row repeats a picked name, the
//! last pair wins. Input the twin would not take, or takes off its usual path (offsets that
//! decrease or leave the data, a record that does not add up or overlaps the one before, a topic
//! or properties string that is not UTF-8), is answered None. Nothing here panics.

/// Arrow buffers of the pairs of `n` rows (offsets are i32, as Arrow's string and map arrays).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct PropertyColumns {
    /// n + 1: row i's pairs are `pair_offsets[i]..pair_offsets[i + 1]`
    pub pair_offsets: Vec<i32>,
    pub name_offsets: Vec<i32>,
    pub names: Vec<u8>,
    pub value_offsets: Vec<i32>,
    pub values: Vec<u8>,
    /// per picked name, per row: the index of the pair that holds it, or -1
    pub picks: Vec<Vec<i64>>,
}

fn offset(n: usize) -> Option<i32> {
    i32::try_from(n).ok()
}

/// The pairs of the strings `data[bounds[i]..bounds[i + 1]]`, or None.
pub fn property_columns(data: &[u8], bounds: &[i32], picked: &[&[u8]]) -> Option<PropertyColumns> {
    let rows = bounds.len().checked_sub(1)?;
    pairs_of(
        rows,
        picked,
        |row| {
            let lo = usize::try_from(*bounds.get(row)?).ok()?;
            let hi = usize::try_from(*bounds.get(row + 1)?).ok()?;
            data.get(lo..hi)
        },
        0,
    )
}

/// The pairs of the `rows` strings `string(row)` gives (None from it: None).
fn pairs_of<'a>(
    rows: usize,
    picked: &[&[u8]],
    string: impl Fn(usize) -> Option<&'a [u8]>,
    bytes: usize,
) -> Option<PropertyColumns> {
    let mut c = PropertyColumns {
        names: Vec::with_capacity(bytes / 2),
        values: Vec::with_capacity(bytes),
        pair_offsets: Vec::with_capacity(rows + 1),
        name_offsets: vec![0],
        value_offsets: vec![0],
        picks: vec![vec![-1; rows]; picked.len()],
    };
    c.pair_offsets.push(0);
    for row in 0..rows {
        let s = string(row)?;
        let mut pairs = c.name_offsets.len() - 1;
        for pair in s.split(|&b| b == 2) {
            let eq = match pair.iter().position(|&b| b == 1) {
                Some(eq) => eq,
                None => continue,
            };
            let (name, value) = (&pair[..eq], &pair[eq + 1..]);
            if name.is_empty() || value.is_empty() {
                continue;
            }
            for (k, want) in picked.iter().enumerate() {
                if name == *want {
                    c.picks[k][row] = pairs as i64;
                }
            }
            c.names.extend_from_slice(name);
            c.name_offsets.push(offset(c.names.len())?);
            c.values.extend_from_slice(value);
            c.value_offsets.push(offset(c.values.len())?);
            pairs += 1;
        }
        c.pair_offsets.push(offset(pairs)?);
    }
    Some(c)
}

/// The record magic code (`MESSAGE_MAGIC_CODE`) and the smallest record (IPv4 hosts, nothing else).
pub const MESSAGE_MAGIC_CODE: u32 = 0xDAA3_20A7;
pub const MIN_RECORD_SIZE: usize = 91;
const BORNHOST_V6_FLAG: i32 = 0x10;
const STOREHOSTADDRESS_V6_FLAG: i32 = 0x20;

/// A host as stored: the address (4 or 16 bytes used) and the port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Host {
    pub addr: [u8; 16],
    pub v6: bool,
    pub port: i32,
}

/// One record's fields and where its parts lie in the segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub total: usize,
    pub queue_id: i32,
    pub queue_offset: i64,
    pub phys: i64,
    pub phys_raw: [u8; 8],
    pub sys_flag: i32,
    pub born_ts: i64,
    pub born: Host,
    pub store_ts: i64,
    pub store: Host,
    pub store_port_raw: [u8; 4],
    pub reconsume: i32,
    pub body: (usize, usize),
    pub topic: (usize, usize),
    pub props: (usize, usize),
}

fn be<const N: usize>(data: &[u8], at: usize) -> Option<[u8; N]> {
    let mut out = [0u8; N];
    out.copy_from_slice(data.get(at..at.checked_add(N)?)?);
    Some(out)
}

fn host(data: &[u8], at: usize, v6: bool) -> Option<(Host, [u8; 4], usize)> {
    let width = if v6 { 16 } else { 4 };
    let mut addr = [0u8; 16];
    addr[..width].copy_from_slice(data.get(at..at.checked_add(width)?)?);
    let port_raw: [u8; 4] = be(data, at + width)?;
    Some((
        Host {
            addr,
            v6,
            port: i32::from_be_bytes(port_raw),
        },
        port_raw,
        at + width + 4,
    ))
}

/// The record at `pos` of `data`, checked as the store's scan (and the reader's `layout`)
/// checks it; None where it does not add up.
pub fn read_record(data: &[u8], pos: usize) -> Option<Record> {
    let end_min = pos.checked_add(MIN_RECORD_SIZE)?;
    if end_min > data.len() {
        return None;
    }
    let total = i32::from_be_bytes(be(data, pos)?);
    let total = usize::try_from(total).ok().filter(|&t| t >= MIN_RECORD_SIZE)?;
    let end = pos.checked_add(total)?;
    let rec = data.get(pos..end)?;
    if u32::from_be_bytes(be(rec, 4)?) != MESSAGE_MAGIC_CODE {
        return None;
    }
    let sys_flag = i32::from_be_bytes(be(rec, 36)?);
    let (born, _, at) = host(rec, 48, sys_flag & BORNHOST_V6_FLAG != 0)?;
    let store_ts = i64::from_be_bytes(be(rec, at)?);
    let (store, store_port_raw, at) = host(rec, at + 8, sys_flag & STOREHOSTADDRESS_V6_FLAG != 0)?;
    let reconsume = i32::from_be_bytes(be(rec, at)?);
    let body_len = usize::try_from(i32::from_be_bytes(be(rec, at + 12)?)).ok()?;
    let body_at = at + 16;
    let topic_len_at = body_at.checked_add(body_len)?;
    let topic_len = usize::from(*rec.get(topic_len_at)?);
    let props_len_at = topic_len_at + 1 + topic_len;
    let props_len = usize::from(u16::from_be_bytes(be(rec, props_len_at)?));
    if props_len_at + 2 + props_len != total {
        return None;
    }
    let phys_raw: [u8; 8] = be(rec, 28)?;
    Some(Record {
        total,
        queue_id: i32::from_be_bytes(be(rec, 12)?),
        queue_offset: i64::from_be_bytes(be(rec, 20)?),
        phys: i64::from_be_bytes(phys_raw),
        phys_raw,
        sys_flag,
        born_ts: i64::from_be_bytes(be(rec, 40)?),
        born,
        store_ts,
        store,
        store_port_raw,
        reconsume,
        body: (pos + body_at, body_len),
        topic: (pos + topic_len_at + 1, topic_len),
        props: (pos + props_len_at + 2, props_len),
    })
}

/// The records at `starts`, in CommitLog order without overlap, their topics and properties
/// UTF-8; else None.
pub fn walk_records(data: &[u8], starts: &[i64]) -> Option<Vec<Record>> {
    let mut out: Vec<Record> = Vec::with_capacity(starts.len());
    let mut next = 0usize;
    for &s in starts {
        let pos = usize::try_from(s).ok()?;
        if pos < next {
            return None;
        }
        let r = read_record(data, pos)?;
        std::str::from_utf8(part(data, r.topic)?).ok()?;
        std::str::from_utf8(part(data, r.props)?).ok()?;
        next = pos + r.total;
        out.push(r);
    }
    Some(out)
}

/// `data[at..at + len]`.
pub fn part(data: &[u8], (at, len): (usize, usize)) -> Option<&[u8]> {
    data.get(at..at.checked_add(len)?)
}

/// A string (or binary) column: Arrow's int32 offsets and data, and its validity bitmap where
/// some row is null.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct StringColumn {
    pub offsets: Vec<i32>,
    pub data: Vec<u8>,
    pub validity: Option<Vec<u8>>,
}

impl StringColumn {
    fn with_rows(rows: usize, bytes: usize, nullable: bool) -> StringColumn {
        let mut offsets = Vec::with_capacity(rows + 1);
        offsets.push(0);
        StringColumn {
            offsets,
            data: Vec::with_capacity(bytes),
            validity: if nullable { Some(vec![0; (rows + 7) / 8]) } else { None },
        }
    }

    /// A value (its validity bit set, when the column has a bitmap).
    fn push(&mut self, v: &[u8]) -> Option<()> {
        let row = self.offsets.len() - 1;
        if let Some(bits) = self.validity.as_mut() {
            *bits.get_mut(row / 8)? |= 1 << (row % 8);
        }
        self.data.extend_from_slice(v);
        self.offsets.push(offset(self.data.len())?);
        Some(())
    }

    /// A null (its bit left clear; an empty slot in the data).
    fn push_null(&mut self) -> Option<()> {
        self.validity.as_ref()?;
        self.offsets.push(offset(self.data.len())?);
        Some(())
    }
}

/// Where each host's string already is in a column's data (a batch has few hosts: the first
/// few are kept, looked up in order, cheaper than hashing every row's).
#[derive(Default)]
struct HostsSeen(Vec<(Host, bool, usize, usize)>);

const HOSTS_KEPT: usize = 16;

impl StringColumn {
    fn push_host(&mut self, seen: &mut HostsSeen, h: &Host, signed_port: bool) -> Option<()> {
        if h.v6 && is_v4_mapped(&h.addr) {
            return None; // Python 3.13 writes these ::ffff:a.b.c.d, 3.11 in hextets: the twin's to say
        }
        let lo = self.data.len();
        match seen.0.iter().find(|e| e.0 == *h && e.1 == signed_port) {
            Some(&(_, _, at, len)) => self.data.extend_from_within(at..at.checked_add(len)?),
            None => {
                host_into(&mut self.data, h, signed_port);
                if seen.0.len() < HOSTS_KEPT {
                    seen.0.push((*h, signed_port, lo, self.data.len() - lo));
                }
            }
        }
        self.offsets.push(offset(self.data.len())?);
        Some(())
    }
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

fn hex_into(out: &mut Vec<u8>, bytes: &[u8]) {
    for &b in bytes {
        out.push(HEX[usize::from(b >> 4)]);
        out.push(HEX[usize::from(b & 15)]);
    }
}

/// `::ffff:0:0/96`, whose text depends on the Python version (the walk leaves it to the twin).
pub fn is_v4_mapped(addr: &[u8; 16]) -> bool {
    addr[..10].iter().all(|&b| b == 0) && addr[10] == 0xff && addr[11] == 0xff
}

/// Python's `ipaddress.IPv6Address(addr).compressed` (3.11: an IPv4-mapped address too is
/// written in hextets); the longest run of two or more zero hextets (the first such) is `::`.
pub fn ipv6_compressed(addr: &[u8; 16]) -> String {
    let mut h = [0u16; 8];
    for (i, x) in h.iter_mut().enumerate() {
        *x = u16::from_be_bytes([addr[2 * i], addr[2 * i + 1]]);
    }
    let (mut best, mut best_len, mut run, mut run_len) = (0usize, 0usize, 0usize, 0usize);
    for (i, &x) in h.iter().enumerate() {
        if x == 0 {
            if run_len == 0 {
                run = i;
            }
            run_len += 1;
            if run_len > best_len {
                best = run;
                best_len = run_len;
            }
        } else {
            run_len = 0;
        }
    }
    let hex = |xs: &[u16]| xs.iter().map(|x| format!("{:x}", x)).collect::<Vec<_>>().join(":");
    if best_len > 1 {
        format!("{}::{}", hex(&h[..best]), hex(&h[best + best_len..]))
    } else {
        hex(&h)
    }
}

/// `host_string` of the twin: `a.b.c.d:port` or `[v6]:port`. The twin formats the port of a
/// record with no IPv6 host unsigned (its hosts are packed into a uint64), signed otherwise.
pub fn host_into(out: &mut Vec<u8>, h: &Host, signed_port: bool) {
    use std::io::Write;
    let port = if signed_port {
        i64::from(h.port)
    } else {
        i64::from(h.port as u32)
    };
    // writing into a Vec does not fail
    let _ = if h.v6 {
        write!(out, "[{}]:{}", ipv6_compressed(&h.addr), port)
    } else {
        let a = &h.addr;
        write!(out, "{}.{}.{}.{}:{}", a[0], a[1], a[2], a[3], port)
    };
}

/// The batch's columns but bodies and brokerName (bodies: `body_offsets`, then `fill_bodies`).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct RecordColumns {
    pub queue_id: Vec<i32>,
    pub queue_offset: Vec<i64>,
    pub phys: Vec<i64>,
    /// microseconds (the stored milliseconds × 1000, wrapping as numpy's int64 does)
    pub born_us: Vec<i64>,
    pub store_us: Vec<i64>,
    pub reconsume: Vec<i32>,
    pub sys_flag: Vec<i32>,
    pub topic: StringColumn,
    pub offset_msg_id: StringColumn,
    pub msg_id: StringColumn,
    pub born_host: StringColumn,
    pub store_host: StringColumn,
    pub props: PropertyColumns,
    /// one per picked name but the last (UNIQ_KEY: it makes msgId)
    pub picked: Vec<StringColumn>,
}

/// Every column of the records `recs` of `data` but bodies; the last of `picked` is the
/// UNIQ_KEY name, whose value is the msgId (else the offsetMsgId).
pub fn record_columns(data: &[u8], recs: &[Record], picked: &[&[u8]]) -> Option<RecordColumns> {
    let n = recs.len();
    let props_bytes = recs.iter().map(|r| r.props.1).sum();
    let props = pairs_of(n, picked, |row| part(data, recs.get(row)?.props), props_bytes)?;
    let mut c = RecordColumns {
        queue_id: Vec::with_capacity(n),
        queue_offset: Vec::with_capacity(n),
        phys: Vec::with_capacity(n),
        born_us: Vec::with_capacity(n),
        store_us: Vec::with_capacity(n),
        reconsume: Vec::with_capacity(n),
        sys_flag: Vec::with_capacity(n),
        topic: StringColumn::with_rows(n, n * 16, false),
        offset_msg_id: StringColumn::with_rows(n, n * 32, false),
        msg_id: StringColumn::with_rows(n, n * 32, false),
        born_host: StringColumn::with_rows(n, n * 20, false),
        store_host: StringColumn::with_rows(n, n * 20, false),
        props: PropertyColumns::default(),
        picked: (1..picked.len())
            .map(|_| StringColumn::with_rows(n, n * 8, true))
            .collect(),
    };
    let mut id = Vec::with_capacity(56);
    // a batch's rows share a few hosts: each is formatted once, then copied
    let (mut born_seen, mut store_seen) = (HostsSeen::default(), HostsSeen::default());
    for (row, r) in recs.iter().enumerate() {
        c.queue_id.push(r.queue_id);
        c.queue_offset.push(r.queue_offset);
        c.phys.push(r.phys);
        c.born_us.push(r.born_ts.wrapping_mul(1000));
        c.store_us.push(r.store_ts.wrapping_mul(1000));
        c.reconsume.push(r.reconsume);
        c.sys_flag.push(r.sys_flag);
        c.topic.push(part(data, r.topic)?)?;
        id.clear();
        hex_into(&mut id, &r.store.addr[..if r.store.v6 { 16 } else { 4 }]);
        hex_into(&mut id, &r.store_port_raw);
        hex_into(&mut id, &r.phys_raw);
        c.offset_msg_id.push(&id)?;
        let signed = r.sys_flag & (BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG) != 0;
        c.born_host.push_host(&mut born_seen, &r.born, signed)?;
        c.store_host.push_host(&mut store_seen, &r.store, signed)?;
        let value = |k: usize| -> Option<Option<&[u8]>> {
            let pick = *props.picks.get(k)?.get(row)?;
            if pick < 0 {
                return Some(None);
            }
            let i = usize::try_from(pick).ok()?;
            let lo = usize::try_from(*props.value_offsets.get(i)?).ok()?;
            let hi = usize::try_from(*props.value_offsets.get(i + 1)?).ok()?;
            Some(Some(props.values.get(lo..hi)?))
        };
        let last = picked.len().checked_sub(1)?;
        for k in 0..last {
            let col = c.picked.get_mut(k)?;
            match value(k)? {
                Some(v) => col.push(v)?,
                None => col.push_null()?,
            }
        }
        match value(last)? {
            Some(v) => c.msg_id.push(v)?,
            None => c.msg_id.push(&id)?,
        }
    }
    c.props = props;
    Some(c)
}

/// The bodies' int32 offsets (None past 2 GiB: the twin's limit too).
pub fn body_offsets(recs: &[Record]) -> Option<Vec<i32>> {
    let mut out = Vec::with_capacity(recs.len() + 1);
    let mut at = 0usize;
    out.push(0);
    for r in recs {
        at = at.checked_add(r.body.1)?;
        out.push(offset(at)?);
    }
    Some(out)
}

/// The bodies one after another into `out` (as long as the last body offset); false where a
/// body is not in `data` or `out` has not their size.
pub fn fill_bodies(data: &[u8], recs: &[Record], out: &mut [u8]) -> bool {
    let mut at = 0usize;
    for r in recs {
        let (src, dst) = match (part(data, r.body), out.get_mut(at..at + r.body.1)) {
            (Some(s), Some(d)) => (s, d),
            _ => return false,
        };
        dst.copy_from_slice(src);
        at += r.body.1;
    }
    at == out.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_of_each_row() {
        let data = b"TAGS\x01a\x02KEYS\x01k\x02\x02\x01x\x02TAGS\x01b\x02y\x01\x02z\x011\x012";
        let split = 25; // the second string starts at "y"
        assert_eq!(&data[split..split + 2], b"y\x01");
        let c = property_columns(
            data,
            &[0, 0, split as i32, data.len() as i32],
            &[b"TAGS", b"KEYS", b"UNIQ_KEY"],
        )
        .unwrap();
        assert_eq!(c.pair_offsets, vec![0, 0, 3, 4]);
        assert_eq!(c.names, b"TAGSKEYSTAGSz");
        assert_eq!(c.name_offsets, vec![0, 4, 8, 12, 13]);
        assert_eq!(c.values, b"akb1\x012");
        assert_eq!(c.value_offsets, vec![0, 1, 2, 3, 6]);
        assert_eq!(c.picks, vec![vec![-1, 2, -1], vec![-1, 1, -1], vec![-1, -1, -1]]);
    }

    #[test]
    fn bad_offsets_are_the_twins() {
        assert_eq!(property_columns(b"ab", &[0, 3], &[]), None);
        assert_eq!(property_columns(b"ab", &[2, 1], &[]), None);
        assert_eq!(property_columns(b"ab", &[-1, 1], &[]), None);
        assert_eq!(property_columns(b"ab", &[], &[]), None);
        assert!(property_columns(b"", &[0], &[]).is_some());
    }

    /// A record as the store writes it (the table in message_decoder.py).
    fn record(phys: i64, sys_flag: i32, born: &[u8], store: &[u8], body: &[u8], topic: &[u8], props: &[u8]) -> Vec<u8> {
        let mut r = Vec::new();
        r.extend_from_slice(&0i32.to_be_bytes()); // TOTALSIZE, set below
        r.extend_from_slice(&MESSAGE_MAGIC_CODE.to_be_bytes());
        r.extend_from_slice(&7i32.to_be_bytes()); // BODYCRC (not checked here)
        r.extend_from_slice(&3i32.to_be_bytes()); // QUEUEID
        r.extend_from_slice(&0i32.to_be_bytes()); // FLAG
        r.extend_from_slice(&9i64.to_be_bytes()); // QUEUEOFFSET
        r.extend_from_slice(&phys.to_be_bytes());
        r.extend_from_slice(&sys_flag.to_be_bytes());
        r.extend_from_slice(&1i64.to_be_bytes()); // BORNTIMESTAMP
        r.extend_from_slice(born);
        r.extend_from_slice(&40000i32.to_be_bytes());
        r.extend_from_slice(&2i64.to_be_bytes()); // STORETIMESTAMP
        r.extend_from_slice(store);
        r.extend_from_slice(&10911i32.to_be_bytes());
        r.extend_from_slice(&4i32.to_be_bytes()); // RECONSUMETIMES
        r.extend_from_slice(&0i64.to_be_bytes()); // PREPARED
        r.extend_from_slice(&(body.len() as i32).to_be_bytes());
        r.extend_from_slice(body);
        r.push(topic.len() as u8);
        r.extend_from_slice(topic);
        r.extend_from_slice(&(props.len() as u16).to_be_bytes());
        r.extend_from_slice(props);
        let total = (r.len() as i32).to_be_bytes();
        r[..4].copy_from_slice(&total);
        r
    }

    const V6: [u8; 16] = [0x20, 1, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];

    fn two_records() -> (Vec<u8>, Vec<i64>) {
        let mut data = record(
            0,
            0,
            &[127, 0, 0, 1],
            &[10, 0, 0, 5],
            b"hello",
            b"T",
            b"KEYS\x01k\x02UNIQ_KEY\x01U",
        );
        let second = data.len() as i64;
        data.extend(record(second, 0x30, &V6, &V6, b"", b"Topic", b"TAGS\x01t"));
        (data, vec![0, second])
    }

    #[test]
    fn one_walk_fills_every_column() {
        let (data, starts) = two_records();
        let recs = walk_records(&data, &starts).unwrap();
        assert_eq!(recs[1].body.1, 0);
        let c = record_columns(&data, &recs, &[b"KEYS", b"TAGS", b"UNIQ_KEY"]).unwrap();
        assert_eq!(c.queue_id, vec![3, 3]);
        assert_eq!(c.phys, vec![0, starts[1]]);
        assert_eq!((c.born_us[0], c.store_us[1], c.reconsume[1]), (1000, 2000, 4));
        assert_eq!(c.topic.data, b"TTopic");
        assert_eq!(c.born_host.data, b"127.0.0.1:40000[2001:db8::1]:40000".to_vec());
        assert_eq!(c.store_host.data, b"10.0.0.5:10911[2001:db8::1]:10911".to_vec());
        assert_eq!(&c.offset_msg_id.data[..32], b"0A00000500002A9F0000000000000000");
        assert_eq!(c.offset_msg_id.offsets, vec![0, 32, 88]);
        assert_eq!(&c.msg_id.data[..1], b"U");
        assert_eq!(&c.msg_id.data[1..], &c.offset_msg_id.data[32..]);
        assert_eq!(
            (c.picked[0].data.as_slice(), c.picked[0].validity.as_deref()),
            (&b"k"[..], Some(&[1u8][..]))
        );
        assert_eq!(
            (c.picked[1].data.as_slice(), c.picked[1].validity.as_deref()),
            (&b"t"[..], Some(&[2u8][..]))
        );
        let offsets = body_offsets(&recs).unwrap();
        assert_eq!(offsets, vec![0, 5, 5]);
        let mut out = vec![0u8; 5];
        assert!(fill_bodies(&data, &recs, &mut out));
        assert_eq!(out, b"hello");
        assert!(!fill_bodies(&data, &recs, &mut [0u8; 4]));
    }

    #[test]
    fn damaged_records_are_none() {
        let (data, starts) = two_records();
        assert!(walk_records(&data[..data.len() - 1], &starts).is_none()); // cut
        assert!(walk_records(&data, &[starts[1], 0]).is_none()); // out of order
        assert!(walk_records(&data, &[0, 1]).is_none()); // overlapping
        assert!(walk_records(&data, &[-1]).is_none());
        assert!(walk_records(&data, &[i64::MAX]).is_none());
        assert!(walk_records(&[], &[0]).is_none());
        assert_eq!(walk_records(&data, &[]), Some(vec![]));
        for at in [0usize, 4, 85, 86, 87, 95, 96, 97] {
            let mut bad = data.clone();
            bad[at] ^= 0xFF; // TOTALSIZE, magic, BODYLENGTH, TOPICLENGTH, PROPERTIESLENGTH
            assert!(walk_records(&bad, &starts[..1]).is_none(), "byte {}", at);
        }
        let mut bad = data.clone();
        let t = data.iter().position(|&b| b == b'T').unwrap();
        bad[t] = 0xFF; // a topic that is not UTF-8
        assert!(walk_records(&bad, &starts).is_none());
    }

    #[test]
    fn ipv6_as_python_writes_it() {
        let mut a = [0u8; 16];
        assert_eq!(ipv6_compressed(&a), "::");
        a[15] = 1;
        assert_eq!(ipv6_compressed(&a), "::1");
        a[10] = 0xff;
        a[11] = 0xff;
        assert_eq!(ipv6_compressed(&a), "::ffff:0:1"); // IPv4-mapped, still hextets
        assert!(is_v4_mapped(&a));
        let b = [0, 1, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 3];
        assert_eq!(ipv6_compressed(&b), "1:0:0:2::3"); // the longest run
        let c = [0, 1, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 3, 0, 4];
        assert_eq!(ipv6_compressed(&c), "1::2:0:0:3:4"); // the first of equal runs
        let d = [0, 1, 0, 0, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0, 7];
        assert_eq!(ipv6_compressed(&d), "1:0:2:3:4:5:6:7"); // one zero is no run
    }
}
