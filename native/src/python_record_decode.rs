//! The PyO3 layer of `record_decode`: a pull body to the client's MessageExt objects, recovery's
//! record scan, a properties string to its dict. Each answers `None` where its core does (the
//! caller then runs the twin, which answers or raises).

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple, PyType};

use super::with_bytes;
use crate::record_decode as rd;

/// The record's header as the twin's `head_struct(sys_flag).unpack_from` tuple (17 fields).
fn head_tuple<'py>(py: Python<'py>, h: &rd::Head<'_>) -> Bound<'py, PyTuple> {
    let fields: [PyObject; 17] = [
        h.store_size.into_py(py),
        h.magic.into_py(py),
        h.body_crc.into_py(py),
        h.queue_id.into_py(py),
        h.flag.into_py(py),
        h.queue_offset.into_py(py),
        h.physical_offset.into_py(py),
        h.sys_flag.into_py(py),
        h.born_timestamp.into_py(py),
        PyBytes::new_bound(py, h.born_addr).into_any().unbind(),
        h.born_port.into_py(py),
        h.store_timestamp.into_py(py),
        PyBytes::new_bound(py, h.store_addr).into_any().unbind(),
        h.store_port.into_py(py),
        h.reconsume_times.into_py(py),
        h.prepared_transaction_offset.into_py(py),
        h.body_length.into_py(py),
    ];
    PyTuple::new_bound(py, fields)
}

/// `decode_messages`' walk (pumice.client.message): every record of a pull body as a
/// `message_class` object built as `MessageExt._decoded` builds one (its slots set, properties
/// and msgIds left for first use), and whether any record has a compressed body (the caller
/// inflates those). None when any record is off the fast path: the twin then raises.
#[pyfunction]
fn decode_messages(
    py: Python<'_>,
    body: &Bound<'_, PyAny>,
    message_class: &Bound<'_, PyType>,
    broker_name: &Bound<'_, PyAny>,
    extra_properties: &Bound<'_, PyAny>,
) -> Option<(Py<PyList>, bool)> {
    let new = message_class.getattr(intern!(py, "__new__")).ok()?;
    let names = [
        intern!(py, "_h"),
        intern!(py, "topic"),
        intern!(py, "body"),
        intern!(py, "reconsume_times"),
        intern!(py, "broker_name"),
        intern!(py, "_props_str"),
        intern!(py, "_props"),
        intern!(py, "_extra"),
        intern!(py, "_strs"),
    ];
    with_bytes(body, |buf| {
        let out = PyList::empty_bound(py);
        let mut compressed = false;
        let mut pos = 0;
        loop {
            let (r, next) = match rd::next_record(buf, pos) {
                rd::Step::Record(r, next) => (r, next),
                rd::Step::End => break,
                rd::Step::Off => return None,
            };
            compressed |= r.head.sys_flag & 1 != 0;
            let h = head_tuple(py, &r.head);
            let reconsume = h.get_item(14).ok()?;
            let m = new.call1((message_class,)).ok()?;
            let none = py.None().into_bound(py);
            let values: [Bound<'_, PyAny>; 9] = [
                h.into_any(),
                PyString::new_bound(py, r.topic).into_any(),
                PyBytes::new_bound(py, r.body).into_any(),
                reconsume,
                broker_name.clone(),
                PyString::new_bound(py, r.properties).into_any(),
                none.clone(),
                extra_properties.clone(),
                none,
            ];
            for (name, value) in names.iter().zip(values) {
                m.setattr(*name, value).ok()?;
            }
            out.append(m).ok()?;
            pos = next;
        }
        Some((out.unbind(), compressed))
    })
    .flatten()
}

/// `scan_records` (pumice.store.message_check): (end, records, hit_blank), or None. `crc`, when
/// not None, is called with each body (bytes) and answers its CRC32.
#[pyfunction]
fn scan_records(buf: &Bound<'_, PyAny>, pos: i64, limit: i64, crc: &Bound<'_, PyAny>) -> Option<(usize, u64, bool)> {
    let py = buf.py();
    let (pos, limit) = (usize::try_from(pos).ok()?, usize::try_from(limit).ok()?);
    with_bytes(buf, |bytes| {
        if crc.is_none() {
            return rd::scan_records(bytes, pos, limit, None);
        }
        let mut f = |body: &[u8]| crc.call1((PyBytes::new_bound(py, body),)).ok()?.extract::<u32>().ok();
        rd::scan_records(bytes, pos, limit, Some(&mut f))
    })
    .flatten()
}

/// `string_to_message_properties` (pumice.common.message_decoder): the dict, or None for a
/// str that is not valid UTF-8 (a lone surrogate).
#[pyfunction]
fn string_to_message_properties<'py>(s: &Bound<'py, PyString>) -> Option<Bound<'py, PyDict>> {
    let py = s.py();
    let d = PyDict::new_bound(py);
    for (name, value) in rd::properties(s.to_str().ok()?) {
        d.set_item(PyString::new_bound(py, name), PyString::new_bound(py, value))
            .ok()?;
    }
    Some(d)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(decode_messages, m)?)?;
    m.add_function(wrap_pyfunction!(scan_records, m)?)?;
    m.add_function(wrap_pyfunction!(string_to_message_properties, m)?)?;
    Ok(())
}
