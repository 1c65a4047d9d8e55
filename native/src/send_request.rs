//! The fields of a send request's header (SendMessageRequestHeader, or V2's one-letter names)
//! as the broker's send path reads them (the twin: `send_message_processor.send_header_fields_pure`).
//!
//! | v2 | name                  | read as                       |
//! |----|-----------------------|-------------------------------|
//! | a  | producerGroup         | str, required                 |
//! | b  | topic                 | str, required                 |
//! | e  | queueId               | int32, absent: -1             |
//! | f  | sysFlag               | int32, absent: 0              |
//! | g  | bornTimestamp         | int64, absent: 0              |
//! | h  | flag                  | int32, absent: 0              |
//! | i  | properties            | str, absent: ""               |
//! | j  | reconsumeTimes        | int32, absent: 0              |
//! | m  | batch                 | bool, absent: false           |
//!
//! c defaultTopic, d defaultTopicQueueNums, k unitMode, l maxReconsumeTimes and n brokerName
//! are renamed only (read where they are needed).

/// V2's letters and the names they stand for (`send_message_processor.V2_NAMES`).
pub const V2_NAMES: [(&str, &str); 14] = [
    ("a", "producerGroup"),
    ("b", "topic"),
    ("c", "defaultTopic"),
    ("d", "defaultTopicQueueNums"),
    ("e", "queueId"),
    ("f", "sysFlag"),
    ("g", "bornTimestamp"),
    ("h", "flag"),
    ("i", "properties"),
    ("j", "reconsumeTimes"),
    ("k", "unitMode"),
    ("l", "maxReconsumeTimes"),
    ("m", "batch"),
    ("n", "brokerName"),
];

/// The name a V2 letter stands for; any other key is kept.
pub fn v2_name(key: &str) -> &str {
    if key.len() == 1 {
        for (letter, name) in V2_NAMES.iter() {
            if *letter == key {
                return name;
            }
        }
    }
    key
}

/// A header number as the fast path takes it: an optional '-' and 1 to 19 ASCII digits, within
/// `bits` (32 or 64). Anything else (spaces, '+', '_', other digits, out of range) is None:
/// the twin parses or refuses it.
pub fn parse_number(s: &str, bits: u32) -> Option<i64> {
    let digits = s.strip_prefix('-').unwrap_or(s);
    if digits.is_empty() || digits.len() > 19 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: i64 = s.parse().ok()?;
    in_range(n, bits)
}

/// `n` if it fits a signed integer of `bits` bits.
pub fn in_range(n: i64, bits: u32) -> Option<i64> {
    if bits >= 64 {
        return Some(n);
    }
    let half = 1i64 << (bits - 1);
    if -half <= n && n < half {
        Some(n)
    } else {
        None
    }
}

/// `ext_bool` on the fast path: "true" or "false" exactly.
pub fn parse_bool(s: &str) -> Option<bool> {
    match s {
        "true" => Some(true),
        "false" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(v2_name("b"), "topic");
        assert_eq!(v2_name("n"), "brokerName");
        assert_eq!(v2_name("z"), "z");
        assert_eq!(v2_name("topic"), "topic");
        assert_eq!(v2_name(""), "");
    }

    #[test]
    fn numbers() {
        assert_eq!(parse_number("42", 32), Some(42));
        assert_eq!(parse_number("-2147483648", 32), Some(-2_147_483_648));
        assert_eq!(parse_number("2147483648", 32), None);
        assert_eq!(parse_number("9223372036854775807", 64), Some(i64::MAX));
        assert_eq!(parse_number("9999999999999999999", 64), None);
        assert_eq!(parse_number("007", 32), Some(7));
        for bad in ["", "-", "+1", " 1", "1_0", "١", "1.0", "--1", "12345678901234567890"] {
            assert_eq!(parse_number(bad, 64), None, "{:?}", bad);
        }
        assert_eq!(in_range(i64::MIN, 64), Some(i64::MIN));
        assert_eq!(in_range(-129, 8), None);
    }

    #[test]
    fn bools() {
        assert_eq!(parse_bool("true"), Some(true));
        assert_eq!(parse_bool("false"), Some(false));
        assert_eq!(parse_bool("1"), None);
        assert_eq!(parse_bool("TRUE"), None);
    }
}
