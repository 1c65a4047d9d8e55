//! The PyO3 layer: Python objects in, the core's functions, Python objects out. A function
//! answers `None` where its core does (input off the fast path, valid or not) and where a
//! Python value is not the plain type the fast path takes; the caller then runs the twin.

use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyLong, PyString, PyTuple};

use crate::remoting_codec as rc;

#[path = "python_message_batch.rs"]
mod python_message_batch;
#[path = "python_message_encode.rs"]
mod python_message_encode;
#[path = "python_pull.rs"]
mod python_pull;
#[path = "python_record_columns.rs"]
mod python_record_columns;
#[path = "python_record_decode.rs"]
mod python_record_decode;
#[path = "python_send_request.rs"]
mod python_send_request;

/// The bytes of a bytes-like object (bytes, bytearray, a contiguous memoryview of bytes).
fn with_bytes<R>(obj: &Bound<'_, PyAny>, f: impl FnOnce(&[u8]) -> R) -> Option<R> {
    if let Ok(b) = obj.downcast::<PyBytes>() {
        return Some(f(b.as_bytes()));
    }
    let buf = PyBuffer::<u8>::get_bound(obj).ok()?;
    if !buf.is_c_contiguous() {
        return None;
    }
    // SAFETY: a C-contiguous buffer of len_bytes bytes, held (and so neither freed nor resized)
    // by `buf` for this call, under the GIL
    let bytes = unsafe { std::slice::from_raw_parts(buf.buf_ptr() as *const u8, buf.len_bytes()) };
    Some(f(bytes))
}

fn ext_value(py: Python<'_>, v: &rc::ExtValue<'_>) -> PyObject {
    match v {
        rc::ExtValue::Str(s) => PyString::new_bound(py, s).into_any().unbind(),
        rc::ExtValue::Int(n) => n.into_py(py),
        rc::ExtValue::Bool(b) => PyBool::new_bound(py, *b).to_owned().into_any().unbind(),
        rc::ExtValue::Null => py.None(),
    }
}

/// The RemotingCommand of one decoded frame: `command(code, opaque, flag, language, version,
/// remark, ext_fields, body, None, serialize_types[serialize type])`.
fn command(
    py: Python<'_>,
    f: &rc::Frame<'_>,
    command: &Bound<'_, PyAny>,
    serialize_types: &Bound<'_, PyTuple>,
) -> Option<PyObject> {
    let ext = PyDict::new_bound(py);
    for (k, v) in &f.ext {
        ext.set_item(PyString::new_bound(py, k), ext_value(py, v)).ok()?;
    }
    let remark = f.remark.as_deref().map(|r| PyString::new_bound(py, r));
    let args: [PyObject; 10] = [
        f.code.into_py(py),
        f.opaque.into_py(py),
        f.flag.into_py(py),
        PyString::new_bound(py, &f.language).into_any().unbind(),
        f.version.into_py(py),
        remark.map_or_else(|| py.None(), |r| r.into_any().unbind()),
        ext.into_any().unbind(),
        PyBytes::new_bound(py, f.body).into_any().unbind(),
        py.None(),
        serialize_types.get_item(usize::from(f.serialize_type)).ok()?.unbind(),
    ];
    command.call1(PyTuple::new_bound(py, args)).ok().map(Bound::unbind)
}

/// `decode_frame`: the command of one frame (without its total-length field), or None.
#[pyfunction]
fn decode_frame(
    py: Python<'_>,
    frame: &Bound<'_, PyAny>,
    command_class: &Bound<'_, PyAny>,
    serialize_types: &Bound<'_, PyTuple>,
) -> Option<PyObject> {
    with_bytes(frame, |bytes| {
        command(py, &rc::decode_frame(bytes)?, command_class, serialize_types)
    })
    .flatten()
}

/// `FrameDecoder.feed`'s loop over a buffer: the commands of the whole frames at its start and
/// the bytes they took. It stops before an incomplete frame and before any frame it does not
/// take (a length outside 4..max_frame_length, a header off the fast path): the twin's loop
/// goes on from there, and raises where it must.
#[pyfunction]
fn decode_frames(
    py: Python<'_>,
    buf: &Bound<'_, PyAny>,
    max_frame_length: i64,
    command_class: &Bound<'_, PyAny>,
    serialize_types: &Bound<'_, PyTuple>,
) -> Option<(Vec<PyObject>, usize)> {
    with_bytes(buf, |bytes| {
        let mut out = Vec::new();
        let mut pos = 0;
        while let Some(span) = rc::next_frame(bytes, pos, max_frame_length) {
            // a match, not let-else: rust-version 1.63
            let cmd =
                rc::decode_frame(&bytes[span.clone()]).and_then(|f| command(py, &f, command_class, serialize_types));
            let cmd = match cmd {
                Some(cmd) => cmd,
                None => break,
            };
            out.push(cmd);
            pos = span.end;
        }
        (out, pos)
    })
}

/// A Python int (not a bool: JSON writes those as true/false) that fits i64.
fn int_of(obj: &Bound<'_, PyAny>) -> Option<i64> {
    if !obj.is_instance_of::<PyLong>() || obj.is_instance_of::<PyBool>() {
        return None;
    }
    obj.extract().ok()
}

/// `_to_wire_str`: str as it is, a bool as true/false, anything else as str() writes it.
fn wire_str<'py>(v: &Bound<'py, PyAny>) -> Option<Bound<'py, PyString>> {
    if v.is_exact_instance_of::<PyString>() {
        return v.downcast::<PyString>().ok().cloned();
    }
    if let Ok(b) = v.downcast::<PyBool>() {
        return Some(PyString::new_bound(v.py(), if b.is_true() { "true" } else { "false" }));
    }
    v.str().ok()
}

/// `encode`'s head (total length, serHdr, header) for these fields, or None.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn encode_head<'py>(
    py: Python<'py>,
    serialize_type: u8,
    code: &Bound<'py, PyAny>,
    language: &Bound<'py, PyAny>,
    version: &Bound<'py, PyAny>,
    opaque: &Bound<'py, PyAny>,
    flag: &Bound<'py, PyAny>,
    remark: &Bound<'py, PyAny>,
    ext_fields: &Bound<'py, PyAny>,
    body_len: usize,
) -> Option<Bound<'py, PyBytes>> {
    let (code, version, opaque, flag) = (int_of(code)?, int_of(version)?, int_of(opaque)?, int_of(flag)?);
    // exact str only (keys too): what orjson makes of a subclass is the twin's to say
    let language = language.downcast_exact::<PyString>().ok()?.to_str().ok()?;
    let remark = if remark.is_none() {
        None
    } else {
        Some(remark.downcast_exact::<PyString>().ok()?.to_str().ok()?)
    };
    let ext_fields = ext_fields.downcast_exact::<PyDict>().ok()?;
    let mut held = Vec::with_capacity(ext_fields.len());
    for (k, v) in ext_fields.iter() {
        if v.is_none() {
            continue;
        }
        held.push((k.downcast_into_exact::<PyString>().ok()?, wire_str(&v)?));
    }
    let mut ext = Vec::with_capacity(held.len());
    for (k, v) in &held {
        ext.push((k.to_str().ok()?, v.to_str().ok()?));
    }
    let header = match serialize_type {
        rc::SERIALIZE_JSON => {
            let ext = if ext_fields.is_empty() { None } else { Some(&ext[..]) };
            rc::encode_json_header(code, language, version, opaque, flag, remark, ext)
        }
        rc::SERIALIZE_ROCKETMQ => {
            rc::encode_rocketmq_header(code, language, version, opaque, flag, remark.unwrap_or(""), &ext)?
        }
        _ => return None,
    };
    Some(PyBytes::new_bound(
        py,
        &rc::frame_head(serialize_type, &header, body_len)?,
    ))
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(decode_frame, m)?)?;
    m.add_function(wrap_pyfunction!(decode_frames, m)?)?;
    m.add_function(wrap_pyfunction!(encode_head, m)?)?;
    python_message_batch::register(m)?;
    python_record_columns::register(m)?;
    python_record_decode::register(m)?;
    python_message_encode::register(m)?;
    python_send_request::register(m)?;
    m.add("LANGUAGES", PyTuple::new_bound(m.py(), rc::LANGUAGES))?;
    python_pull::register(m)?;
    Ok(())
}
