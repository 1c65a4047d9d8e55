//! The PyO3 layer of the pull path and the dispatch entries: `scan_units`
//! (`consume_queue.scan_units`'s twin) and the index key hashes (`java_hash`'s). Each answers
//! None where the Python values are not the plain types its fast path takes; the caller then
//! runs the twin.

use pyo3::prelude::*;
use pyo3::types::{PyList, PySlice, PyString, PyTuple};

use crate::consume_queue_scan as cqs;
use crate::index_hash;

use super::with_bytes;

fn ints<const N: usize>(t: &Bound<'_, PyTuple>) -> Option<[i64; N]> {
    if t.len() != N {
        return None;
    }
    let mut out = [0i64; N];
    for (slot, item) in out.iter_mut().zip(t.iter()) {
        *slot = item.extract::<i64>().ok()?;
    }
    Some(out)
}

/// `scan_units(buf, n, codes, limits, cursor, view)`: `(stop, cursor, records, entries)`, the
/// records slices of `view` (the held CommitLog file's map), or None.
#[pyfunction]
fn scan_units(
    py: Python<'_>,
    buf: &Bound<'_, PyAny>,
    n: i64,
    codes: &Bound<'_, PyAny>,
    limits: &Bound<'_, PyTuple>,
    cursor: &Bound<'_, PyTuple>,
    view: &Bound<'_, PyAny>,
) -> Option<(u8, PyObject, PyObject, PyObject)> {
    let mut set: Option<Vec<i64>> = None;
    if !codes.is_none() {
        let mut v = Vec::new();
        for c in codes.iter().ok()? {
            v.push(c.ok()?.extract::<i64>().ok()?);
        }
        v.sort_unstable();
        set = Some(v);
    }
    let [max_count, memory, max_offset_py, bytes_mem, count_mem, bytes_disk, count_disk, byte_cap] = ints::<8>(limits)?;
    let lim = cqs::Limits {
        max_count,
        memory,
        max_offset_py,
        bytes_mem,
        count_mem,
        bytes_disk,
        count_disk,
        byte_cap,
    };
    let [i, count, total, max_phy_pulling, next_phy_file_start, lo, hi, readable] = ints::<8>(cursor)?;
    if i < 0 || count < 0 || total < 0 {
        return None;
    }
    let mut cur = cqs::Cursor {
        i: usize::try_from(i).ok()?,
        count,
        total,
        max_phy_pulling,
        next_phy_file_start,
        lo,
        hi,
        readable,
    };
    let n = usize::try_from(n.max(0)).ok()?;
    if view.is_none() {
        cur.readable = -1; // no file held: no record is inside it
    }
    let mut spans = Vec::new();
    let stop = with_bytes(buf, |b| cqs::scan(b, n, set.as_deref(), &lim, &mut cur, &mut spans))?;
    cur.readable = readable;
    let records = PyList::empty_bound(py);
    let taken = PyList::empty_bound(py);
    for (entry, pos, size) in spans {
        taken.append(entry).ok()?;
        let start = isize::try_from(pos).ok()?;
        let end = isize::try_from(pos.checked_add(size)?).ok()?;
        records
            .append(view.get_item(PySlice::new_bound(py, start, end, 1)).ok()?)
            .ok()?;
    }
    let stop = match stop {
        cqs::Stop::End => 0,
        cqs::Stop::Full => 1,
        cqs::Stop::Window => 2,
    };
    let out = (
        i64::try_from(cur.i).ok()?,
        cur.count,
        cur.total,
        cur.max_phy_pulling,
        cur.next_phy_file_start,
        cur.lo,
        cur.hi,
        cur.readable,
    );
    Some((
        stop,
        out.into_py(py),
        records.into_any().unbind(),
        taken.into_any().unbind(),
    ))
}

/// `index_key_hash` of each key, or None when any key is off the fast path.
#[pyfunction]
fn index_key_hashes(keys: &Bound<'_, PyAny>) -> Option<Vec<i64>> {
    let list = keys.downcast::<PyList>().ok()?;
    let mut out = Vec::with_capacity(list.len());
    for k in list.iter() {
        out.push(index_hash::index_key_hash(
            k.downcast::<PyString>().ok()?.to_str().ok()?,
        ));
    }
    Some(out)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(scan_units, m)?)?;
    m.add_function(wrap_pyfunction!(index_key_hashes, m)?)?;
    Ok(())
}
