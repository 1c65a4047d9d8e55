//! The SEND_BATCH_MESSAGE body a producer sends: one record per message, back to back. The
//! table and the twin are in `src/pumice/client/message_batch.py` (`encode_batch_pure`).
//!
//! A record is written as it is read from Python (header, body, then each property), and its
//! length fields patched at its end; `end_record` answers None where the twin raises (the
//! properties longer than 32767 bytes, a record longer than an int), and the caller then runs
//! the twin. `properties_holding` reads such a body on the broker's side (the timer hook's look
//! for timer properties; twin `message_decoder.batch_properties_holding_pure`). Nothing here
//! panics.

pub const MAX_PROPERTIES_LENGTH: usize = 32767;
/// totalSize, magic, bodyCRC, flag, bodyLength
const HEAD_SIZE: usize = 20;

/// A batch body being written.
#[derive(Debug, Default)]
pub struct BatchWriter {
    pub out: Vec<u8>,
    start: usize,
    props_start: usize,
}

impl BatchWriter {
    pub fn with_capacity(n: usize) -> Self {
        BatchWriter {
            out: Vec::with_capacity(n),
            start: 0,
            props_start: 0,
        }
    }

    /// A record's head and body; its properties follow (`property`), then `end_record`.
    pub fn begin_record(&mut self, flag: i32, body: &[u8]) {
        self.start = self.out.len();
        self.out.extend_from_slice(&[0; 12]); // totalSize (patched), magic 0, bodyCRC 0
        self.out.extend_from_slice(&flag.to_be_bytes());
        self.out.extend_from_slice(&(body.len() as u32).to_be_bytes()); // checked in end_record
        self.out.extend_from_slice(body);
        self.out.extend_from_slice(&[0; 2]); // propertiesLength (patched)
        self.props_start = self.out.len();
    }

    /// One `name\x01value` pair, `\x02` before every pair but the first.
    pub fn property(&mut self, name: &str, value: &str) {
        if self.out.len() > self.props_start {
            self.out.push(2);
        }
        self.out.extend_from_slice(name.as_bytes());
        self.out.push(1);
        self.out.extend_from_slice(value.as_bytes());
    }

    /// The record's lengths; None when the properties pass 32767 bytes or the record an int.
    pub fn end_record(&mut self) -> Option<()> {
        let plen = self.out.len() - self.props_start;
        let body_len = self.props_start - 2 - (self.start + HEAD_SIZE);
        let total = self.out.len() - self.start;
        if plen > MAX_PROPERTIES_LENGTH || i32::try_from(total).is_err() {
            return None;
        }
        let s = self.start;
        self.out
            .get_mut(s..s + 4)?
            .copy_from_slice(&(total as u32).to_be_bytes());
        self.out
            .get_mut(s + 16..s + 20)?
            .copy_from_slice(&(body_len as u32).to_be_bytes());
        let p = self.props_start - 2;
        self.out
            .get_mut(p..p + 2)?
            .copy_from_slice(&(plen as u16).to_be_bytes());
        Some(())
    }
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

fn be_i32(b: &[u8], at: usize) -> Option<i32> {
    Some(i32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// Each record of a batch body (as the broker reads one: totalSize, magic, bodyCRC, flag,
/// bodyLength, body, a signed short propertiesLength, properties) whose properties hold one of
/// `needles`: (its index, where its properties start, where they end), in order. The walk steps
/// by totalSize and stops at the first record that is malformed (a totalSize not above 0, a
/// negative bodyLength, no room for propertiesLength); properties running past the end are cut
/// there. `message_decoder.batch_properties_holding_pure` is the twin.
pub fn properties_holding(body: &[u8], needles: &[&[u8]]) -> Vec<(usize, usize, usize)> {
    let mut out = Vec::new();
    let (mut pos, mut index) = (0usize, 0usize);
    while pos.checked_add(HEAD_SIZE).map_or(false, |end| end <= body.len()) {
        let (total, body_len) = match (be_i32(body, pos), be_i32(body, pos + 16)) {
            (Some(t), Some(b)) => (t, b),
            _ => break,
        };
        if total <= 0 || body_len < 0 {
            break;
        }
        let at = (pos + HEAD_SIZE).saturating_add(body_len as usize);
        let plen = match body.get(at..at.saturating_add(2)) {
            Some(p) => i16::from_be_bytes([p[0], p[1]]),
            None => break,
        };
        let start = at + 2;
        let end = (start + plen.max(0) as usize).min(body.len());
        if needles.iter().any(|n| contains(&body[start..end], n)) {
            out.push((index, start, end));
        }
        pos = pos.saturating_add(total as usize);
        index += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_back_to_back() {
        let mut w = BatchWriter::with_capacity(64);
        w.begin_record(7, b"ab");
        w.property("UNIQ_KEY", "X");
        w.property("WAIT", "true");
        w.end_record().unwrap();
        w.begin_record(-1, b"");
        w.end_record().unwrap();
        let props = b"UNIQ_KEY\x01X\x02WAIT\x01true";
        let mut want = Vec::new();
        want.extend_from_slice(&((22 + 2 + props.len()) as i32).to_be_bytes());
        want.extend_from_slice(&[0; 8]);
        want.extend_from_slice(&7i32.to_be_bytes());
        want.extend_from_slice(&2i32.to_be_bytes());
        want.extend_from_slice(b"ab");
        want.extend_from_slice(&(props.len() as u16).to_be_bytes());
        want.extend_from_slice(props);
        want.extend_from_slice(&22i32.to_be_bytes());
        want.extend_from_slice(&[0; 8]);
        want.extend_from_slice(&(-1i32).to_be_bytes());
        want.extend_from_slice(&[0; 6]);
        assert_eq!(w.out, want);
    }

    #[test]
    fn properties_past_32767_bytes_are_the_twins() {
        let mut w = BatchWriter::default();
        w.begin_record(0, b"x");
        let long = "v".repeat(MAX_PROPERTIES_LENGTH - 2);
        w.property("k", &long);
        assert!(w.end_record().is_some());
        w.begin_record(0, b"x");
        w.property("kk", &long);
        assert!(w.end_record().is_none());
    }

    fn record(body: &[u8], props: &[u8]) -> Vec<u8> {
        let mut r = Vec::new();
        r.extend_from_slice(&((22 + body.len() + props.len()) as i32).to_be_bytes());
        r.extend_from_slice(&[0; 12]);
        r.extend_from_slice(&(body.len() as i32).to_be_bytes());
        r.extend_from_slice(body);
        r.extend_from_slice(&(props.len() as i16).to_be_bytes());
        r.extend_from_slice(props);
        r
    }

    #[test]
    fn properties_holding_looks_at_properties_only() {
        let needles: [&[u8]; 2] = [b"TIMER_DEL", b"__STARTDELIVERTIME"];
        let mut b = record(b"TIMER_DELAY_SEC in a body", b"KEYS\x01k");
        b.extend(record(b"x", b"TIMER_DELAY_SEC\x015"));
        b.extend(record(b"", b""));
        b.extend(record(b"y", b"A\x01b\x02__STARTDELIVERTIME\x019"));
        let found = properties_holding(&b, &needles);
        assert_eq!(found.iter().map(|f| f.0).collect::<Vec<_>>(), vec![1, 3]);
        let (_, s, e) = found[0];
        assert_eq!(&b[s..e], b"TIMER_DELAY_SEC\x015");
    }

    #[test]
    fn properties_holding_stops_at_a_malformed_record() {
        let needles: [&[u8]; 1] = [b"T"];
        let mut b = record(b"", b"T");
        b.extend_from_slice(&0i32.to_be_bytes()); // totalSize 0
        b.extend_from_slice(&[0; 16]);
        b.extend(record(b"", b"T"));
        assert_eq!(properties_holding(&b, &needles).len(), 1);
        let mut cut = record(b"ab", b"TTTT");
        cut.truncate(cut.len() - 2); // properties cut at the end: what is there is searched
        assert_eq!(properties_holding(&cut, &needles), vec![(0, 24, 26)]);
        assert!(properties_holding(&cut[..23], &needles).is_empty()); // no room for the length
        assert!(properties_holding(&[], &needles).is_empty());
        let mut neg = record(b"ab", b"T");
        neg[16..20].copy_from_slice(&(-1i32).to_be_bytes());
        assert!(properties_holding(&neg, &needles).is_empty());
        let empty: [&[u8]; 1] = [b""];
        assert_eq!(properties_holding(&record(b"", b""), &empty), vec![(0, 22, 22)]);
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
}
