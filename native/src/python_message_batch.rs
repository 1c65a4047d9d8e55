//! The PyO3 layer of `message_batch`: a producer's batch body in one call. It answers None
//! where a value is not the plain type the twin takes on its fast path (exact bytes bodies,
//! int flags that fit an int, exact dicts of exact str) or where the twin raises; the caller
//! then runs the twin.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString};

use crate::message_batch::BatchWriter;

/// `encode_batch`'s records (pumice.client.message_batch) for `bodies[i]`, `flags[i]` and
/// `properties[i]`, or None.
#[pyfunction]
fn encode_batch_body<'py>(
    py: Python<'py>,
    bodies: &Bound<'py, PyList>,
    flags: &Bound<'py, PyList>,
    properties: &Bound<'py, PyList>,
) -> Option<Bound<'py, PyBytes>> {
    let n = bodies.len();
    if flags.len() != n || properties.len() != n {
        return None;
    }
    let mut size = 0;
    for b in bodies.iter() {
        size += b.downcast_exact::<PyBytes>().ok()?.as_bytes().len() + 64;
    }
    let mut w = BatchWriter::with_capacity(size);
    for ((body, flag), props) in bodies.iter().zip(flags.iter()).zip(properties.iter()) {
        let body = body.downcast_exact::<PyBytes>().ok()?;
        w.begin_record(flag.extract::<i32>().ok()?, body.as_bytes());
        for (k, v) in props.downcast_exact::<PyDict>().ok()?.iter() {
            let k = k.downcast_exact::<PyString>().ok()?;
            let v = v.downcast_exact::<PyString>().ok()?;
            w.property(k.to_str().ok()?, v.to_str().ok()?);
        }
        w.end_record()?;
    }
    Some(PyBytes::new_bound(py, &w.out))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(encode_batch_body, m)?)?;
    Ok(())
}
