//! The PyO3 layer of `send_request`: a send request's header fields in one call. It answers
//! None for any value off the fast path (a type or text the twin parses otherwise, or refuses):
//! the caller then runs the twin, which answers or raises.

use std::collections::HashMap;

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyList, PyLong, PyString, PyTuple};

use crate::message_encode as me;
use crate::send_request as sr;

const CLUSTER: &str = "CLUSTER";
const WAIT: &str = "WAIT";

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

/// `send_message_processor.send_properties`: (the message's properties, the stored properties
/// string in 4.9's HashMap order, the WAIT value or None), or None off the fast path, or when
/// `orders` (`message_decoder.HASH_MAP_ORDERS`) does not hold this set of names yet.
#[pyfunction]
fn send_properties<'py>(
    py: Python<'py>,
    header_props: &Bound<'py, PyAny>,
    cluster: &Bound<'py, PyAny>,
    orders: &Bound<'py, PyAny>,
) -> Option<(Bound<'py, PyDict>, Bound<'py, PyString>, PyObject)> {
    let s = header_props.downcast_exact::<PyString>().ok()?.to_str().ok()?;
    let cluster = cluster.downcast_exact::<PyString>().ok()?.to_str().ok()?;
    let orders = orders.downcast_exact::<PyDict>().ok()?;
    let mut pairs = me::parse_properties(s);
    match pairs.iter_mut().find(|(n, _)| *n == CLUSTER) {
        Some(slot) => slot.1 = cluster,
        None => pairs.push((CLUSTER, cluster)),
    }
    // stored without WAIT (as 4.9.4 on), put back at the end of the message's map
    let wait = pairs.iter().position(|(n, _)| *n == WAIT).map(|i| pairs.remove(i).1);
    let names = PyTuple::new_bound(py, pairs.iter().map(|(n, _)| *n));
    let order = orders.get_item(names).ok()??;
    let order = order.downcast_exact::<PyList>().ok()?;
    if order.len() != pairs.len() {
        return None;
    }
    let values: HashMap<&str, &str> = pairs.iter().copied().collect();
    let mut stored = String::with_capacity(s.len() + cluster.len() + 16);
    for (i, name) in order.iter().enumerate() {
        let name = name.downcast_exact::<PyString>().ok()?.to_str().ok()?.to_owned();
        let value = *values.get(name.as_str())?;
        if i > 0 {
            stored.push('\x02');
        }
        stored.push_str(&name);
        stored.push('\x01');
        stored.push_str(value);
    }
    let props = PyDict::new_bound(py);
    for (n, v) in &pairs {
        props.set_item(n, v).ok()?;
    }
    if let Some(w) = wait {
        props.set_item(WAIT, w).ok()?;
    }
    let wait = wait.map_or_else(|| py.None(), |w| PyString::new_bound(py, w).into_any().unbind());
    Some((props, PyString::new_bound(py, &stored), wait))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(send_header_fields, m)?)?;
    m.add_function(wrap_pyfunction!(send_properties, m)?)?;
    let names = PyDict::new_bound(m.py());
    for (letter, name) in sr::V2_NAMES.iter() {
        names.set_item(letter, name)?;
    }
    m.add("SEND_HEADER_V2_NAMES", names)?;
    Ok(())
}
