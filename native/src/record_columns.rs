//! The Spark reader's properties columns: a batch of properties strings (Arrow's offsets and
//! data) to the pairs of each, as the buffers of an Arrow map array (each row's first pair,
//! names, values), and the pair of each row that holds a picked name (KEYS, TAGS, UNIQ_KEY).
//! The twin is `_properties` in `src/pumice/spark/record_columns.py`.
//!
//! A pair is what lies between two `\x02` (or a string's ends); its name ends at its first
//! `\x01`; a pair with an empty name or value is dropped. Where a row repeats a picked name, the
//! last pair wins. Input the twin would not take (offsets that decrease or leave the data) is
//! answered None. Nothing here panics.

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
    let mut c = PropertyColumns {
        pair_offsets: Vec::with_capacity(rows + 1),
        name_offsets: vec![0],
        value_offsets: vec![0],
        picks: vec![vec![-1; rows]; picked.len()],
        ..PropertyColumns::default()
    };
    c.pair_offsets.push(0);
    for row in 0..rows {
        let lo = usize::try_from(*bounds.get(row)?).ok()?;
        let hi = usize::try_from(*bounds.get(row + 1)?).ok()?;
        let s = data.get(lo..hi)?;
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
}
