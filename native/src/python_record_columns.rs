//! The PyO3 layer of `record_columns`: the Spark reader's properties columns as Arrow buffers
//! (bytes objects the caller wraps with `pyarrow.Array.from_buffers`), or None where the core
//! answers None (the caller then runs the twin).

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

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(property_columns, m)?)?;
    Ok(())
}
