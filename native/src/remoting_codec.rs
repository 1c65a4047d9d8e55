//! The remoting frame codec's byte work: a frame (without its total-length field) to its header
//! fields and body, and header fields to a frame's head. The twins and the wire tables are in
//! `src/pumice/remoting/remoting_codec.py`.
//!
//! Every function answers `None` for input it does not take on its fast path, valid or not (a
//! JSON header with a `\u` escape or a float, a ROCKETMQ header with a bad length, ...): the
//! Python twin then gives the answer or the error, so both paths agree by construction there.
//! Nothing here panics: every read is bounds-checked.

use std::borrow::Cow;

pub const SERIALIZE_JSON: u8 = 0;
pub const SERIALIZE_ROCKETMQ: u8 = 1;

/// LanguageCode by its ordinal (pumice.remoting.remoting_command.LanguageCode).
pub const LANGUAGES: [&str; 13] = [
    "JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY", "OTHER", "HTTP", "GO", "PHP", "OMS", "RUST",
];
const LANGUAGE_OTHER: u8 = 7;

/// An extFields value as a header carries it (JSON headers: any scalar a client sent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExtValue<'a> {
    Str(Cow<'a, str>),
    Int(i64),
    Bool(bool),
    Null,
}

/// A decoded frame: what RemotingCommand is built from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame<'a> {
    pub serialize_type: u8,
    pub code: i64,
    pub opaque: i64,
    pub flag: i64,
    pub language: Cow<'a, str>,
    pub version: i64,
    pub remark: Option<Cow<'a, str>>,
    pub ext: Vec<(Cow<'a, str>, ExtValue<'a>)>,
    pub body: &'a [u8],
}

fn be_i16(b: &[u8], p: usize) -> Option<i16> {
    let s = b.get(p..p.checked_add(2)?)?;
    Some(i16::from_be_bytes([s[0], s[1]]))
}

fn be_i32(b: &[u8], p: usize) -> Option<i32> {
    let s = b.get(p..p.checked_add(4)?)?;
    Some(i32::from_be_bytes([s[0], s[1], s[2], s[3]]))
}

/// The span of the whole frame at `pos` (after its total-length field), or None when the
/// frame is incomplete or its length is outside 4..=max_frame_length (the twin raises then).
pub fn next_frame(buf: &[u8], pos: usize, max_frame_length: i64) -> Option<std::ops::Range<usize>> {
    let total = i64::from(be_i32(buf, pos)?);
    if total < 4 || total > max_frame_length {
        return None;
    }
    let start = pos.checked_add(4)?;
    let end = start.checked_add(usize::try_from(total).ok()?)?;
    if end > buf.len() {
        return None;
    }
    Some(start..end)
}

/// One frame without its leading total-length field: serHdr, header, body.
pub fn decode_frame(frame: &[u8]) -> Option<Frame<'_>> {
    let ser = be_i32(frame, 0)? as u32;
    let stype = (ser >> 24) as u8;
    let hlen = (ser & 0xFF_FFFF) as usize;
    let header = frame.get(4..4usize.checked_add(hlen)?)?;
    let body = frame.get(4 + hlen..)?;
    let mut f = match stype {
        SERIALIZE_JSON => decode_json_header(header)?,
        SERIALIZE_ROCKETMQ => decode_rocketmq_header(header)?,
        _ => return None,
    };
    f.body = body;
    Some(f)
}

// -- ROCKETMQ serialization ------------------------------------------------------------------

fn utf8(b: &[u8]) -> Option<&str> {
    std::str::from_utf8(b).ok()
}

/// The ROCKETMQ binary header (table in the Python module's docstring).
pub fn decode_rocketmq_header(h: &[u8]) -> Option<Frame<'_>> {
    let code = be_i16(h, 0)?;
    let lang = *h.get(2)? as i8;
    let version = be_i16(h, 3)?;
    let opaque = be_i32(h, 5)?;
    let flag = be_i32(h, 9)?;
    let mut p = 13usize;
    let rlen = usize::try_from(be_i32(h, p)?).ok()?;
    p += 4;
    let remark_bytes = h.get(p..p.checked_add(rlen)?)?;
    let remark = if rlen == 0 {
        None
    } else {
        Some(Cow::Borrowed(utf8(remark_bytes)?))
    };
    p += rlen;
    let elen = usize::try_from(be_i32(h, p)?).ok()?;
    p += 4;
    let end = p.checked_add(elen)?;
    let ext_bytes = h.get(..end)?;
    let mut ext = Vec::new();
    while p < end {
        let klen = usize::try_from(be_i16(ext_bytes, p)?).ok()?;
        p += 2;
        let key = utf8(ext_bytes.get(p..p.checked_add(klen)?)?)?;
        p += klen;
        let vlen = usize::try_from(be_i32(ext_bytes, p)?).ok()?;
        p += 4;
        let value = utf8(ext_bytes.get(p..p.checked_add(vlen)?)?)?;
        p += vlen;
        ext.push((Cow::Borrowed(key), ExtValue::Str(Cow::Borrowed(value))));
    }
    let language = usize::try_from(lang)
        .ok()
        .and_then(|i| LANGUAGES.get(i))
        .copied()
        .unwrap_or("OTHER");
    Some(Frame {
        serialize_type: SERIALIZE_ROCKETMQ,
        code: code.into(),
        opaque: opaque.into(),
        flag: flag.into(),
        language: Cow::Borrowed(language),
        version: version.into(),
        remark,
        ext,
        body: &[],
    })
}

/// The ROCKETMQ binary header of these fields; `None` where a field does not fit its width.
pub fn encode_rocketmq_header(
    code: i64,
    language: &str,
    version: i64,
    opaque: i64,
    flag: i64,
    remark: &str,
    ext: &[(&str, &str)],
) -> Option<Vec<u8>> {
    let lang = LANGUAGES
        .iter()
        .position(|l| *l == language)
        .map_or(LANGUAGE_OTHER, |i| i as u8);
    let ext_len: usize = ext.iter().map(|(k, v)| 6 + k.len() + v.len()).sum();
    let mut out = Vec::with_capacity(21 + remark.len() + ext_len);
    out.extend_from_slice(&i16::try_from(code).ok()?.to_be_bytes());
    out.push(lang);
    out.extend_from_slice(&i16::try_from(version).ok()?.to_be_bytes());
    out.extend_from_slice(&i32::try_from(opaque).ok()?.to_be_bytes());
    out.extend_from_slice(&i32::try_from(flag).ok()?.to_be_bytes());
    out.extend_from_slice(&i32::try_from(remark.len()).ok()?.to_be_bytes());
    out.extend_from_slice(remark.as_bytes());
    out.extend_from_slice(&i32::try_from(ext_len).ok()?.to_be_bytes());
    for (k, v) in ext {
        out.extend_from_slice(&i16::try_from(k.len()).ok()?.to_be_bytes());
        out.extend_from_slice(k.as_bytes());
        out.extend_from_slice(&i32::try_from(v.len()).ok()?.to_be_bytes());
        out.extend_from_slice(v.as_bytes());
    }
    Some(out)
}

// -- JSON serialization ----------------------------------------------------------------------

/// A JSON value of the fast path: scalars, and objects of scalars (extFields).
enum Json<'a> {
    Scalar(ExtValue<'a>),
    Object(Vec<(Cow<'a, str>, ExtValue<'a>)>),
}

fn hex4(b: &[u8], p: usize) -> Option<u32> {
    let digits = std::str::from_utf8(b.get(p..p.checked_add(4)?)?).ok()?;
    if !digits.bytes().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(digits, 16).ok()
}

/// The character of the `\u` escape (four hex digits; a surrogate pair: two escapes) at `p`, and its length.
fn unicode_escape(b: &[u8], p: usize) -> Option<(char, usize)> {
    let hi = hex4(b, p + 2)?;
    if (0xDC00..0xE000).contains(&hi) {
        return None;
    }
    if !(0xD800..0xDC00).contains(&hi) {
        return Some((char::from_u32(hi)?, 6));
    }
    if b.get(p + 6..p + 8)? != b"\\u" {
        return None;
    }
    let lo = hex4(b, p + 8)?;
    if !(0xDC00..0xE000).contains(&lo) {
        return None;
    }
    Some((char::from_u32(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00))?, 12))
}

struct Parser<'a> {
    s: &'a str,
    p: usize,
}

impl<'a> Parser<'a> {
    fn ws(&mut self) {
        let b = self.s.as_bytes();
        while let Some(c) = b.get(self.p) {
            if !matches!(c, b' ' | b'\t' | b'\n' | b'\r') {
                break;
            }
            self.p += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.s.as_bytes().get(self.p).copied()
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        if self.peek()? != c {
            return None;
        }
        self.p += 1;
        Some(())
    }

    fn literal(&mut self, word: &str) -> Option<()> {
        if !self.s.get(self.p..)?.starts_with(word) {
            return None;
        }
        self.p += word.len();
        Some(())
    }

    /// A string without raw control characters or lone surrogates (those are the twin's).
    fn string(&mut self) -> Option<Cow<'a, str>> {
        self.eat(b'"')?;
        let start = self.p;
        let b = self.s.as_bytes();
        let mut owned: Option<String> = None;
        let mut run = start;
        loop {
            let c = *b.get(self.p)?;
            match c {
                b'"' => {
                    let tail = self.s.get(run..self.p)?;
                    self.p += 1;
                    return Some(match owned {
                        None => Cow::Borrowed(tail),
                        Some(mut o) => {
                            o.push_str(tail);
                            Cow::Owned(o)
                        }
                    });
                }
                b'\\' => {
                    let o = owned.get_or_insert_with(String::new);
                    o.push_str(self.s.get(run..self.p)?);
                    if *b.get(self.p + 1)? == b'u' {
                        // properties carry \u0001 and \u0002 (orjson's escapes of 4.9's separators)
                        let (c, len) = unicode_escape(b, self.p)?;
                        o.push(c);
                        self.p += len;
                        run = self.p;
                        continue;
                    }
                    let esc = match *b.get(self.p + 1)? {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        _ => return None,
                    };
                    o.push(esc);
                    self.p += 2;
                    run = self.p;
                }
                0..=0x1F => return None,
                _ => self.p += 1,
            }
        }
    }

    /// An integer without fraction or exponent that fits i64; `-0` and the rest are the twin's.
    fn int(&mut self) -> Option<i64> {
        let b = self.s.as_bytes();
        let start = self.p;
        if self.peek() == Some(b'-') {
            self.p += 1;
        }
        let digits = self.p;
        while matches!(b.get(self.p), Some(b'0'..=b'9')) {
            self.p += 1;
        }
        let n = self.p - digits;
        if n == 0 || (n > 1 && b[digits] == b'0') || matches!(self.peek(), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        let text = self.s.get(start..self.p)?;
        if text == "-0" {
            return None;
        }
        text.parse().ok()
    }

    fn scalar(&mut self) -> Option<ExtValue<'a>> {
        Some(match self.peek()? {
            b'"' => ExtValue::Str(self.string()?),
            b't' => {
                self.literal("true")?;
                ExtValue::Bool(true)
            }
            b'f' => {
                self.literal("false")?;
                ExtValue::Bool(false)
            }
            b'n' => {
                self.literal("null")?;
                ExtValue::Null
            }
            _ => ExtValue::Int(self.int()?),
        })
    }

    /// `{ "key": value, ... }` after its `{`, calling `each` on every member.
    fn members(&mut self, mut each: impl FnMut(&mut Self, Cow<'a, str>) -> Option<()>) -> Option<()> {
        self.ws();
        if self.peek()? == b'}' {
            self.p += 1;
            return Some(());
        }
        loop {
            self.ws();
            let key = self.string()?;
            self.ws();
            self.eat(b':')?;
            self.ws();
            each(self, key)?;
            self.ws();
            match self.peek()? {
                b',' => self.p += 1,
                b'}' => {
                    self.p += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    fn value(&mut self) -> Option<Json<'a>> {
        if self.peek()? != b'{' {
            return Some(Json::Scalar(self.scalar()?));
        }
        self.p += 1;
        let mut out = Vec::new();
        self.members(|p, key| {
            // every member in order, repeats too: the PyO3 layer fills a dict with them (a repeated
            // key keeps its first place and its last value, as the twin's). No lookup here: a
            // search per key made a header of many keys quadratic, before any ACL check
            out.push((key, p.scalar()?));
            Some(())
        })?;
        Some(Json::Object(out))
    }
}

/// `_header_int`: a JSON int, or its digits in a string (`-?[0-9]{1,10}`), else `None`.
fn header_int(v: &Json<'_>) -> Option<i64> {
    match v {
        Json::Scalar(ExtValue::Int(n)) => Some(*n),
        Json::Scalar(ExtValue::Str(s)) => {
            let d = s.strip_prefix('-').unwrap_or(s);
            if (1..=10).contains(&d.len()) && d.bytes().all(|c| c.is_ascii_digit()) {
                s.parse().ok()
            } else {
                None
            }
        }
        _ => None,
    }
}

/// A JSON header as `_parse_json_header` reads it; `None` off the fast path and on any error.
pub fn decode_json_header(h: &[u8]) -> Option<Frame<'_>> {
    let s = std::str::from_utf8(h).ok()?;
    let mut p = Parser { s, p: 0 };
    p.ws();
    p.eat(b'{')?;
    let (mut code, mut opaque, mut flag, mut version) = (None, None, None, None);
    let (mut language, mut remark, mut ext) = (None, None, None);
    p.members(|p, key| {
        let v = p.value()?;
        match &*key {
            "code" => code = Some(v),
            "opaque" => opaque = Some(v),
            "flag" => flag = Some(v),
            "version" => version = Some(v),
            "language" => language = Some(v),
            "remark" => remark = Some(v),
            "extFields" => ext = Some(v),
            _ => {}
        }
        Some(())
    })?;
    p.ws();
    if p.p != s.len() {
        return None;
    }
    let code = header_int(code.as_ref()?)?;
    let int_or_0 = |v: Option<Json<'_>>| v.as_ref().and_then(header_int).unwrap_or(0);
    let language = match language {
        None => Cow::Borrowed("OTHER"),
        Some(Json::Scalar(ExtValue::Str(l))) => l,
        Some(_) => return None, // str() of another type: the twin's
    };
    let remark = match remark {
        Some(Json::Scalar(ExtValue::Str(r))) => Some(r),
        _ => None,
    };
    let ext = match ext {
        Some(Json::Object(members)) => members,
        // `obj.get("extFields") or {}`: a falsy scalar is no fields, a truthy one an error (twin's)
        None | Some(Json::Scalar(ExtValue::Null | ExtValue::Bool(false) | ExtValue::Int(0))) => Vec::new(),
        Some(Json::Scalar(ExtValue::Str(s))) if s.is_empty() => Vec::new(),
        Some(_) => return None,
    };
    Some(Frame {
        serialize_type: SERIALIZE_JSON,
        code,
        opaque: int_or_0(opaque),
        flag: int_or_0(flag),
        language,
        version: int_or_0(version),
        remark,
        ext,
        body: &[],
    })
}

fn json_str(out: &mut Vec<u8>, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    let b = s.as_bytes();
    let mut run = 0;
    for (i, &c) in b.iter().enumerate() {
        let esc: &[u8] = match c {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x08 => b"\\b",
            0x0C => b"\\f",
            0..=0x1F => &[],
            _ => continue,
        };
        out.extend_from_slice(&b[run..i]);
        if esc.is_empty() {
            out.extend_from_slice(b"\\u00");
            out.push(HEX[usize::from(c >> 4)]);
            out.push(HEX[usize::from(c & 0xF)]);
        } else {
            out.extend_from_slice(esc);
        }
        run = i + 1;
    }
    out.extend_from_slice(&b[run..]);
    out.push(b'"');
}

/// The JSON header `_json_header` writes (orjson's bytes: compact, only `"`, `\` and control
/// characters escaped). `ext` is `None` when the command has no extFields at all.
pub fn encode_json_header(
    code: i64,
    language: &str,
    version: i64,
    opaque: i64,
    flag: i64,
    remark: Option<&str>,
    ext: Option<&[(&str, &str)]>,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(128 + ext.map_or(0, |e| e.iter().map(|(k, v)| k.len() + v.len() + 6).sum()));
    out.extend_from_slice(b"{\"code\":");
    out.extend_from_slice(code.to_string().as_bytes());
    out.extend_from_slice(b",\"language\":");
    json_str(&mut out, language);
    out.extend_from_slice(b",\"version\":");
    out.extend_from_slice(version.to_string().as_bytes());
    out.extend_from_slice(b",\"opaque\":");
    out.extend_from_slice(opaque.to_string().as_bytes());
    out.extend_from_slice(b",\"flag\":");
    out.extend_from_slice(flag.to_string().as_bytes());
    out.extend_from_slice(b",\"serializeTypeCurrentRPC\":\"JSON\"");
    if let Some(r) = remark {
        out.extend_from_slice(b",\"remark\":");
        json_str(&mut out, r);
    }
    if let Some(ext) = ext {
        out.extend_from_slice(b",\"extFields\":{");
        for (i, (k, v)) in ext.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            json_str(&mut out, k);
            out.push(b':');
            json_str(&mut out, v);
        }
        out.push(b'}');
    }
    out.push(b'}');
    out
}

/// The frame's head: total length, serHdr, then the header (the body follows it unchanged).
pub fn frame_head(serialize_type: u8, header: &[u8], body_len: usize) -> Option<Vec<u8>> {
    if header.len() > 0xFF_FFFF {
        return None;
    }
    let total = i32::try_from(4usize.checked_add(header.len())?.checked_add(body_len)?).ok()?;
    let mut out = Vec::with_capacity(8 + header.len());
    out.extend_from_slice(&total.to_be_bytes());
    out.extend_from_slice(&((u32::from(serialize_type) << 24) | header.len() as u32).to_be_bytes());
    out.extend_from_slice(header);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(stype: u8, header: &[u8], body: &[u8]) -> Vec<u8> {
        let mut f = ((u32::from(stype) << 24) | header.len() as u32).to_be_bytes().to_vec();
        f.extend_from_slice(header);
        f.extend_from_slice(body);
        f
    }

    #[test]
    fn json_header_round_trip() {
        let h = encode_json_header(
            10,
            "JAVA",
            399,
            7,
            0,
            Some("a \"q\"\n\u{1}"),
            Some(&[("topic", "T"), ("k", "é")]),
        );
        assert_eq!(
            std::str::from_utf8(&h).unwrap(),
            "{\"code\":10,\"language\":\"JAVA\",\"version\":399,\"opaque\":7,\"flag\":0,\
             \"serializeTypeCurrentRPC\":\"JSON\",\"remark\":\"a \\\"q\\\"\\n\\u0001\",\
             \"extFields\":{\"topic\":\"T\",\"k\":\"é\"}}"
        );
        let d = decode_json_header(&h).unwrap();
        assert_eq!(d.remark.as_deref(), Some("a \"q\"\n\u{1}"));
        let pair = decode_json_header(br#"{"code":1,"remark":"\ud83d\ude00\u00E9"}"#).unwrap();
        assert_eq!(pair.remark.as_deref(), Some("\u{1F600}é"));
        assert!(
            decode_json_header(br#"{"code":1,"remark":"\ud83d"}"#).is_none(),
            "a lone surrogate"
        );
        assert!(decode_json_header(br#"{"code":1,"remark":"\u00G0"}"#).is_none());
        let h = encode_json_header(
            10,
            "JAVA",
            399,
            7,
            0,
            Some("a \"q\"\n\t"),
            Some(&[("topic", "T"), ("k", "é")]),
        );
        let f = frame(SERIALIZE_JSON, &h, b"body");
        let d = decode_frame(&f).unwrap();
        assert_eq!((d.code, d.opaque, d.version, &*d.language), (10, 7, 399, "JAVA"));
        assert_eq!(d.remark.as_deref(), Some("a \"q\"\n\t"));
        assert_eq!(d.ext[1], (Cow::Borrowed("k"), ExtValue::Str(Cow::Borrowed("é"))));
        assert_eq!(d.body, b"body");
    }

    #[test]
    fn json_header_numbers_as_fastjson_reads_them() {
        let d = decode_json_header(br#"{"code":"12","opaque":"x","flag":true,"extFields":{"a":1,"a":null}}"#).unwrap();
        assert_eq!((d.code, d.opaque, d.flag, d.version), (12, 0, 0, 0));
        assert_eq!(
            d.ext,
            vec![
                (Cow::Borrowed("a"), ExtValue::Int(1)),
                (Cow::Borrowed("a"), ExtValue::Null)
            ]
        );
        assert!(decode_json_header(br#"{"code":"12345678901"}"#).is_none());
        assert!(decode_json_header(br#"{"code":1.5}"#).is_none());
        assert!(decode_json_header(br#"{"code":1,"extFields":"x"}"#).is_none());
        assert!(decode_json_header(br#"{"code":1} x"#).is_none());
    }

    #[test]
    fn rocketmq_header_round_trip_and_bad_lengths() {
        let h = encode_rocketmq_header(310, "CPP", 399, -5, 2, "why", &[("k", "v"), ("topic", "T")]).unwrap();
        let f = frame(SERIALIZE_ROCKETMQ, &h, b"");
        let d = decode_frame(&f).unwrap();
        assert_eq!(
            (d.code, &*d.language, d.version, d.opaque, d.flag),
            (310, "CPP", 399, -5, 2)
        );
        assert_eq!(d.remark.as_deref(), Some("why"));
        assert_eq!(d.ext.len(), 2);
        for cut in 0..h.len() {
            assert!(decode_rocketmq_header(&h[..cut]).is_none(), "cut at {cut}");
        }
        let mut neg = h.clone();
        neg[13..17].copy_from_slice(&(-1i32).to_be_bytes());
        assert!(decode_rocketmq_header(&neg).is_none());
        assert!(encode_rocketmq_header(1 << 20, "JAVA", 0, 0, 0, "", &[]).is_none());
    }

    #[test]
    fn frames_with_lengths_past_the_end() {
        assert!(decode_frame(&[0, 0, 0]).is_none());
        assert!(decode_frame(&[0, 0, 0, 9, b'{']).is_none());
        assert!(decode_frame(&[2, 0, 0, 0]).is_none());
        assert!(decode_frame(&[0xFF, 0xFF, 0xFF, 0xFF]).is_none());
    }

    #[test]
    fn frames_split_within_their_lengths() {
        let mut buf = frame_head(0, b"{}", 1).unwrap();
        buf.push(b'x');
        let end = buf.len();
        buf.extend_from_slice(&[0, 0, 0, 9, 0]);
        assert_eq!(next_frame(&buf, 0, 1 << 24), Some(4..end));
        assert_eq!(next_frame(&buf, end, 1 << 24), None, "incomplete");
        assert_eq!(next_frame(&buf, 0, 4), None, "over the maximum");
        assert_eq!(next_frame(&[0, 0, 0, 3, 0, 0, 0], 0, 16), None, "under 4");
        assert_eq!(next_frame(&[0xFF, 0xFF, 0xFF, 0xFF], 0, 16), None, "negative");
        assert_eq!(next_frame(&buf, usize::MAX, 16), None);
    }

    #[test]
    fn frame_head_lengths() {
        assert_eq!(
            frame_head(1, b"ab", 3).unwrap(),
            vec![0, 0, 0, 9, 1, 0, 0, 2, b'a', b'b']
        );
        assert!(frame_head(0, &vec![0; 1 << 24], 0).is_none());
    }
}
