//! The PyO3 layer of `record_columns`: the Spark reader's columns as Arrow buffers (bytes
//! objects the caller wraps with `pyarrow.Array.from_buffers`), or None where the core answers
//! None (the caller then runs the twin).

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

use super::with_bytes;
use crate::record_columns as rcol;

fn le_bytes<'py, T: Copy, const N: usize>(py: Python<'py>, v: &[T], f: impl Fn(T) -> [u8; N]) -> Bound<'py, PyBytes> {
    let mut out = Vec::with_capacity(v.len() * N);
    for x in v {
        out.extend_from_slice(&f(*x));
    }
    PyBytes::new_bound(py, &out)
}

/// `_properties`' pairs (pumice.spark.record_columns) of the strings `data[bounds[i]:bounds[i+1]]`
/// (`bounds`: native-endian int32): (pair offsets, name offsets, names, value offsets, values,
/// then per picked name the int64 pair index of each row, -1 where absent), or None.
#[pyfunction]
fn property_columns<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    bounds: &Bound<'py, PyAny>,
    picked: Vec<Vec<u8>>,
) -> Option<Bound<'py, PyTuple>> {
    let bounds: Vec<i32> = with_bytes(bounds, |b| {
        if b.len() % 4 != 0 {
            return None;
        }
        Some(
            b.chunks_exact(4)
                .map(|c| i32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
        )
    })??;
    let picked: Vec<&[u8]> = picked.iter().map(Vec::as_slice).collect();
    let c = with_bytes(data, |d| rcol::property_columns(d, &bounds, &picked))??;
    let mut out: Vec<PyObject> = vec![
        le_bytes(py, &c.pair_offsets, i32::to_ne_bytes).into_any().unbind(),
        le_bytes(py, &c.name_offsets, i32::to_ne_bytes).into_any().unbind(),
        PyBytes::new_bound(py, &c.names).into_any().unbind(),
        le_bytes(py, &c.value_offsets, i32::to_ne_bytes).into_any().unbind(),
        PyBytes::new_bound(py, &c.values).into_any().unbind(),
    ];
    for p in &c.picks {
        out.push(le_bytes(py, p, i64::to_ne_bytes).into_any().unbind());
    }
    Some(PyTuple::new_bound(py, out))
}

fn bytes_obj(py: Python<'_>, b: &[u8]) -> PyObject {
    PyBytes::new_bound(py, b).into_any().unbind()
}

fn string_column(py: Python<'_>, out: &mut Vec<PyObject>, c: &rcol::StringColumn) {
    out.push(le_bytes(py, &c.offsets, i32::to_ne_bytes).into_any().unbind());
    out.push(bytes_obj(py, &c.data));
}

/// `to_record_batch`'s columns (pumice.spark.record_columns) of the records at `starts`
/// (native-endian int64) of `data`: queueId, queueOffset, commitLogOffset, born and store
/// timestamps (µs), reconsumeTimes, sysFlag (native-endian fixed-width buffers); then offsets
/// and data of topic, body (as stored), offsetMsgId, msgId, bornHost, storeHost; the map's
/// pair offsets, name offsets, names, value offsets, values; then per picked name but the last
/// (which makes msgId) validity, offsets and data. None off the fast path.
#[pyfunction]
fn record_batch_columns<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    starts: &Bound<'py, PyAny>,
    picked: Vec<Vec<u8>>,
) -> Option<Bound<'py, PyTuple>> {
    let starts: Vec<i64> = with_bytes(starts, |b| {
        if b.len() % 8 != 0 {
            return None;
        }
        Some(
            b.chunks_exact(8)
                .map(|c| i64::from_ne_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
                .collect(),
        )
    })??;
    if picked.is_empty() {
        return None;
    }
    let picked: Vec<&[u8]> = picked.iter().map(Vec::as_slice).collect();
    with_bytes(data, |d| {
        let recs = rcol::walk_records(d, &starts)?;
        let c = rcol::record_columns(d, &recs, &picked)?;
        let body_offsets = rcol::body_offsets(&recs)?;
        let size = usize::try_from(*body_offsets.last()?).ok()?;
        // the bodies go straight into the bytes object Arrow wraps: one copy
        let bodies = PyBytes::new_bound_with(py, size, |out| {
            if rcol::fill_bodies(d, &recs, out) {
                Ok(())
            } else {
                Err(pyo3::exceptions::PyValueError::new_err("bodies"))
            }
        })
        .ok()?;
        let mut out: Vec<PyObject> = vec![
            le_bytes(py, &c.queue_id, i32::to_ne_bytes).into_any().unbind(),
            le_bytes(py, &c.queue_offset, i64::to_ne_bytes).into_any().unbind(),
            le_bytes(py, &c.phys, i64::to_ne_bytes).into_any().unbind(),
            le_bytes(py, &c.born_us, i64::to_ne_bytes).into_any().unbind(),
            le_bytes(py, &c.store_us, i64::to_ne_bytes).into_any().unbind(),
            le_bytes(py, &c.reconsume, i32::to_ne_bytes).into_any().unbind(),
            le_bytes(py, &c.sys_flag, i32::to_ne_bytes).into_any().unbind(),
        ];
        string_column(py, &mut out, &c.topic);
        out.push(le_bytes(py, &body_offsets, i32::to_ne_bytes).into_any().unbind());
        out.push(bodies.into_any().unbind());
        for col in [&c.offset_msg_id, &c.msg_id, &c.born_host, &c.store_host] {
            string_column(py, &mut out, col);
        }
        out.push(
            le_bytes(py, &c.props.pair_offsets, i32::to_ne_bytes)
                .into_any()
                .unbind(),
        );
        out.push(
            le_bytes(py, &c.props.name_offsets, i32::to_ne_bytes)
                .into_any()
                .unbind(),
        );
        out.push(bytes_obj(py, &c.props.names));
        out.push(
            le_bytes(py, &c.props.value_offsets, i32::to_ne_bytes)
                .into_any()
                .unbind(),
        );
        out.push(bytes_obj(py, &c.props.values));
        for col in &c.picked {
            out.push(bytes_obj(py, col.validity.as_deref().unwrap_or(&[])));
            string_column(py, &mut out, col);
        }
        Some(PyTuple::new_bound(py, out))
    })?
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(property_columns, m)?)?;
    m.add_function(wrap_pyfunction!(record_batch_columns, m)?)?;
    Ok(())
}
