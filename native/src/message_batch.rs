//! The SEND_BATCH_MESSAGE body a producer sends: one record per message, back to back. The
//! table and the twin are in `src/pumice/client/message_batch.py` (`encode_batch_pure`).
//!
//! A record is written as it is read from Python (header, body, then each property), and its
//! length fields patched at its end; `end_record` answers None where the twin raises (the
//! properties longer than 32767 bytes, a record longer than an int), and the caller then runs
//! the twin. Nothing here panics.

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
}
