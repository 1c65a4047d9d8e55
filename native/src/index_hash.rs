//! Java's `String.hashCode` over UTF-16 code units and `IndexFile.indexKeyHashMethod`, the
//! native form of `pumice.common.java_hash` (`java_string_hash`, `index_key_hash`,
//! `index_key_hashes`; those twins are the reference).
//!
//! A Rust `&str` holds no lone surrogate; a Python key that does is off this path (the PyO3
//! layer answers None and the twin hashes it).

/// `s.hashCode()`: `h = 31 * h + unit` over the UTF-16 code units (a supplementary character
/// counts as its two surrogates), wrapping at 32 bits.
pub fn java_string_hash(s: &str) -> i32 {
    let mut h: u32 = 0;
    if s.is_ascii() {
        for &b in s.as_bytes() {
            h = h.wrapping_mul(31).wrapping_add(u32::from(b));
        }
    } else {
        for unit in s.encode_utf16() {
            h = h.wrapping_mul(31).wrapping_add(u32::from(unit));
        }
    }
    h as i32
}

/// `IndexFile.indexKeyHashMethod`: `abs(hashCode)`, with `Integer.MIN_VALUE` mapped to 0.
pub fn index_key_hash(key: &str) -> i64 {
    let h = java_string_hash(key);
    if h == i32::MIN {
        0
    } else {
        i64::from(h).abs()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_java_values() {
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("a"), 97);
        assert_eq!(java_string_hash("TagA"), 2_598_919);
        // "polygenelubricants".hashCode() is Integer.MIN_VALUE
        assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
        assert_eq!(index_key_hash("polygenelubricants"), 0);
        assert_eq!(java_string_hash("hello world"), 1_794_106_052);
    }

    #[test]
    fn utf16_units_and_surrogate_pairs() {
        // é is one unit (0xE9); U+1F600 is the pair D83D DE00
        assert_eq!(java_string_hash("é"), 0xE9);
        let pair = (0xD83Du32.wrapping_mul(31).wrapping_add(0xDE00)) as i32;
        assert_eq!(java_string_hash("\u{1F600}"), pair);
    }

    #[test]
    fn index_hash_is_non_negative() {
        for k in ["T#k", "T#\u{1F600}", "x", "polygenelubricants", ""] {
            assert!(index_key_hash(k) >= 0);
            assert_eq!(
                index_key_hash(k),
                i64::from(java_string_hash(k)).abs() * i64::from(java_string_hash(k) != i32::MIN)
            );
        }
    }
}
