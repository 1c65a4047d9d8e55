//! The ConsumeQueue walk of a pull (`getMessage`), the native form of
//! `pumice.store.consume_queue.scan_units` (the twin is the reference).
//!
//! One unit, big-endian, 20 bytes: commitLogOffset (i64), size (i32), tagsCode (i64). The walk
//! takes units from index `i` while the caps allow, keeps those whose tagsCode is in the pull's
//! set (an extension address, `<= MAX_ADDR`, is unknown here and kept: 4.9's rule when the
//! unit is gone), and returns the records inside the CommitLog file the caller holds. It stops
//! at a unit whose record is not plainly inside that file (another file, past the readable
//! end, a size off the plain range): the caller handles that unit and walks on after it.

/// `Integer.MIN_VALUE - 1`: tagsCodes at or below it address a ConsumeQueueExt unit.
pub const MAX_ADDR: i64 = -(1i64 << 31) - 1;
pub const UNIT_SIZE: usize = 20;

/// The caps of one pull (`MessageStoreConfig`'s transfer limits and the request's own).
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub max_count: i64,
    /// records further than this behind `max_offset_py` are "on disk"
    pub memory: i64,
    pub max_offset_py: i64,
    pub bytes_mem: i64,
    pub count_mem: i64,
    pub bytes_disk: i64,
    pub count_disk: i64,
    pub byte_cap: i64,
}

/// Where the walk is: the next unit, what it took so far, and the CommitLog file held,
/// `[lo, hi)` with `readable` bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cursor {
    pub i: usize,
    pub count: i64,
    pub total: i64,
    pub max_phy_pulling: i64,
    pub next_phy_file_start: i64,
    pub lo: i64,
    pub hi: i64,
    pub readable: i64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// every unit up to `n` was walked
    End,
    /// a cap was reached at unit `i` (not taken)
    Full,
    /// unit `i` passed the caps and the filter, but its record is not plainly in the held file
    Window,
}

fn unit(buf: &[u8], i: usize) -> Option<(i64, i64, i64)> {
    let start = i.checked_mul(UNIT_SIZE)?;
    let u = buf.get(start..start.checked_add(UNIT_SIZE)?)?;
    let mut off = [0u8; 8];
    let mut size = [0u8; 4];
    let mut code = [0u8; 8];
    off.copy_from_slice(u.get(0..8)?);
    size.copy_from_slice(u.get(8..12)?);
    code.copy_from_slice(u.get(12..20)?);
    Some((
        i64::from_be_bytes(off),
        i64::from(i32::from_be_bytes(size)),
        i64::from_be_bytes(code),
    ))
}

/// Walk units `cur.i..n` (n capped at the whole units in `buf`); the records taken are pushed
/// to `spans` as (unit index, position in the held file, size). `codes` is sorted. Returns why it stopped;
/// `cur` says where.
pub fn scan(
    buf: &[u8],
    n: usize,
    codes: Option<&[i64]>,
    lim: &Limits,
    cur: &mut Cursor,
    spans: &mut Vec<(usize, usize, usize)>,
) -> Stop {
    let n = n.min(buf.len() / UNIT_SIZE);
    while cur.i < n {
        let (offset, size, code) = match unit(buf, cur.i) {
            Some(u) => u,
            None => return Stop::End,
        };
        cur.max_phy_pulling = offset;
        if cur.next_phy_file_start != -1 && offset < cur.next_phy_file_start {
            cur.i += 1;
            continue;
        }
        if cur.count > 0 {
            if lim.max_count <= cur.count {
                return Stop::Full;
            }
            let next_total = cur.total.saturating_add(size);
            if lim.max_offset_py.saturating_sub(offset) > lim.memory {
                if next_total > lim.bytes_disk || cur.count > lim.count_disk.saturating_sub(1) {
                    return Stop::Full;
                }
            } else if next_total > lim.bytes_mem || cur.count > lim.count_mem.saturating_sub(1) {
                return Stop::Full;
            }
            if next_total > lim.byte_cap {
                return Stop::Full;
            }
        }
        if let Some(set) = codes {
            if code > MAX_ADDR && set.binary_search(&code).is_err() {
                cur.i += 1;
                continue;
            }
        }
        // the record plainly inside the held file: anything else is the caller's
        if size <= 0 || offset < cur.lo || offset >= cur.hi || offset - cur.lo + size > cur.readable {
            return Stop::Window;
        }
        spans.push((cur.i, (offset - cur.lo) as usize, size as usize));
        cur.total += size;
        cur.count += 1;
        cur.next_phy_file_start = -1;
        cur.i += 1;
    }
    Stop::End
}

#[cfg(test)]
mod tests {
    use super::*;

    fn units(entries: &[(i64, i32, i64)]) -> Vec<u8> {
        let mut b = Vec::new();
        for &(o, s, c) in entries {
            b.extend_from_slice(&o.to_be_bytes());
            b.extend_from_slice(&s.to_be_bytes());
            b.extend_from_slice(&c.to_be_bytes());
        }
        b
    }

    const OPEN: Limits = Limits {
        max_count: 32,
        memory: 1 << 40,
        max_offset_py: 1000,
        bytes_mem: 1 << 20,
        count_mem: 32,
        bytes_disk: 1 << 20,
        count_disk: 8,
        byte_cap: 1 << 62,
    };

    fn cursor() -> Cursor {
        Cursor {
            i: 0,
            count: 0,
            total: 0,
            max_phy_pulling: 0,
            next_phy_file_start: -1,
            lo: 0,
            hi: 1000,
            readable: 600,
        }
    }

    #[test]
    fn takes_records_in_the_window_and_filters_by_code() {
        let buf = units(&[(0, 100, 5), (100, 100, 6), (200, 100, 5), (300, 100, MAX_ADDR)]);
        let mut cur = cursor();
        let mut spans = Vec::new();
        assert_eq!(scan(&buf, 4, Some(&[5]), &OPEN, &mut cur, &mut spans), Stop::End);
        assert_eq!(spans, vec![(0, 0, 100), (2, 200, 100), (3, 300, 100)]);
        assert_eq!((cur.i, cur.count, cur.total, cur.max_phy_pulling), (4, 3, 300, 300));
    }

    #[test]
    fn stops_at_caps_and_outside_the_window() {
        let buf = units(&[(0, 100, 0), (100, 100, 0), (900, 100, 0)]);
        let lim = Limits { max_count: 1, ..OPEN };
        let (mut cur, mut spans) = (cursor(), Vec::new());
        assert_eq!(scan(&buf, 3, None, &lim, &mut cur, &mut spans), Stop::Full);
        assert_eq!((cur.i, spans.len()), (1, 1));
        let (mut cur, mut spans) = (cursor(), Vec::new());
        assert_eq!(scan(&buf, 3, None, &OPEN, &mut cur, &mut spans), Stop::Window);
        assert_eq!((cur.i, spans.len(), cur.max_phy_pulling), (2, 2, 900)); // past readable
    }

    #[test]
    fn hostile_units_never_panic() {
        let buf = units(&[(i64::MIN, i32::MIN, 0), (i64::MAX, i32::MAX, 0), (-5, -1, 0)]);
        let mut cur = cursor();
        cur.count = 1;
        cur.total = i64::MAX;
        let lim = Limits {
            max_count: i64::MAX,
            count_disk: i64::MIN,
            count_mem: i64::MIN,
            ..OPEN
        };
        let mut spans = Vec::new();
        let _ = scan(&buf, usize::MAX, None, &lim, &mut cur, &mut spans);
        let mut cur = cursor();
        assert_eq!(scan(&buf[..45], 99, None, &OPEN, &mut cur, &mut spans), Stop::Window);
        assert_eq!(scan(&[], 5, None, &OPEN, &mut cursor(), &mut spans), Stop::End);
    }
}
