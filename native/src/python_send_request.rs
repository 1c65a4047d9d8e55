//! The PyO3 layer of `send_request`: a send request's header fields in one call. It answers
//! None for any value off the fast path (a type or text the twin parses otherwise, or refuses):
//! the caller then runs the twin, which answers or raises.

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyLong, PyString, PyTuple};

use crate::send_request as sr;

/// A field's value, absent and None alike as None.
fn get<'py>(d: &Bound<'py, PyDict>, name: &str) -> Option<Bound<'py, PyAny>> {
    d.get_item(name).ok().flatten().filter(|v| !v.is_none())
}

/// A str field: Some(None) when absent, None off the fast path (not exactly a str).
fn text<'py>(d: &Bound<'py, PyDict>, name: &str) -> Option<Option<Bound<'py, PyString>>> {
    match get(d, name) {
        None => Some(None),
        Some(v) => v.downcast_into_exact::<PyString>().ok().map(Some),
    }
}

/// A number field of `bits` bits: `default` when absent; a str of digits or an int in range.
fn number(d: &Bound<'_, PyDict>, name: &str, default: i64, bits: u32) -> Option<i64> {
    let v = match get(d, name) {
        None => return Some(default),
        Some(v) => v,
    };
    if let Ok(s) = v.downcast_exact::<PyString>() {
        return sr::parse_number(s.to_str().ok()?, bits);
    }
    if v.is_exact_instance_of::<PyLong>() {
        return sr::in_range(v.extract().ok()?, bits);
    }
    None
}

fn flag(d: &Bound<'_, PyDict>, name: &str) -> Option<bool> {
    let v = match get(d, name) {
        None => return Some(false),
        Some(v) => v,
    };
    if let Ok(b) = v.downcast_exact::<PyBool>() {
        return Some(b.is_true());
    }
    sr::parse_bool(v.downcast_exact::<PyString>().ok()?.to_str().ok()?)
}

/// `send_message_processor.send_header_fields`: (the ext fields under their SendMessageRequestHeader
/// names, (topic, sysFlag, queueId, bornTimestamp, flag, reconsumeTimes, properties, batch)), or None.
#[pyfunction]
fn send_header_fields<'py>(
    py: Python<'py>,
    ext_fields: &Bound<'py, PyAny>,
    v2: bool,
) -> Option<(Bound<'py, PyDict>, Bound<'py, PyTuple>)> {
    let given = ext_fields.downcast_exact::<PyDict>().ok()?;
    let d = if v2 {
        let renamed = PyDict::new_bound(py);
        for (k, v) in given.iter() {
            let key = k.downcast_exact::<PyString>().ok()?;
            let given_name = key.to_str().ok()?;
            let name = sr::v2_name(given_name);
            if name == given_name {
                renamed.set_item(key, v).ok()?; // the key object itself: no new str
            } else {
                renamed.set_item(name, v).ok()?;
            }
        }
        renamed
    } else {
        given.clone()
    };
    let topic = text(&d, "topic")??;
    text(&d, "producerGroup")??;
    let properties = match text(&d, "properties")? {
        Some(p) => p,
        None => PyString::new_bound(py, ""),
    };
    let fields: Py<PyTuple> = (
        topic,
        number(&d, "sysFlag", 0, 32)?,
        number(&d, "queueId", -1, 32)?,
        number(&d, "bornTimestamp", 0, 64)?,
        number(&d, "flag", 0, 32)?,
        number(&d, "reconsumeTimes", 0, 32)?,
        properties,
        flag(&d, "batch")?,
    )
        .into_py(py);
    let fields = fields.into_bound(py);
    Some((d, fields))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(send_header_fields, m)?)?;
    let names = PyDict::new_bound(m.py());
    for (letter, name) in sr::V2_NAMES.iter() {
        names.set_item(letter, name)?;
    }
    m.add("SEND_HEADER_V2_NAMES", names)?;
    Ok(())
}
