//! The PyO3 layer of `message_encode`: the CommitLog record encode and the batch body walk.
//! A function answers None where a value is not the plain type its twin packs (the caller
//! then runs the twin, which packs or raises); a refused batch raises the twin's ValueError.
// what pyo3 0.22's #[pyfunction] expands a PyResult return to (not this code) trips it
#![allow(clippy::useless_conversion)]

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyList, PyLong, PyString, PyTuple};

use super::with_bytes;
use crate::message_encode as me;

/// `(address bytes, port)`, the address exactly bytes and the port an i32.
fn host<'py>(obj: &Bound<'py, PyAny>) -> Option<(Bound<'py, PyBytes>, i32)> {
    let t = obj.downcast::<PyTuple>().ok()?;
    if t.len() != 2 {
        return None;
    }
    let addr = t.get_item(0).ok()?.downcast_into_exact::<PyBytes>().ok()?;
    Some((addr, t.get_item(1).ok()?.extract().ok()?))
}

/// `message_decoder.encode_record_bytes`: one record with QUEUEOFFSET, PHYSICALOFFSET and
/// STORETIMESTAMP at 0, or None.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn encode_record_bytes<'py>(
    py: Python<'py>,
    topic_blob: &Bound<'py, PyAny>,
    body: &Bound<'py, PyAny>,
    properties: &Bound<'py, PyAny>,
    queue_id: &Bound<'py, PyAny>,
    flag: &Bound<'py, PyAny>,
    sys_flag: &Bound<'py, PyAny>,
    born_timestamp: &Bound<'py, PyAny>,
    born_host: &Bound<'py, PyAny>,
    store_host: &Bound<'py, PyAny>,
    reconsume_times: &Bound<'py, PyAny>,
    prepared_transaction_offset: &Bound<'py, PyAny>,
) -> Option<Bound<'py, PyBytes>> {
    let (bh, bport) = host(born_host)?;
    let (sh, sport) = host(store_host)?;
    let f = me::RecordFields {
        queue_id: queue_id.extract().ok()?,
        flag: flag.extract().ok()?,
        sys_flag: sys_flag.extract().ok()?,
        born_timestamp: born_timestamp.extract().ok()?,
        born_host: me::Host {
            addr: bh.as_bytes(),
            port: bport,
        },
        store_host: me::Host {
            addr: sh.as_bytes(),
            port: sport,
        },
        reconsume_times: reconsume_times.extract().ok()?,
        prepared_transaction_offset: prepared_transaction_offset.extract().ok()?,
    };
    let topic_blob = topic_blob.downcast_exact::<PyBytes>().ok()?;
    let properties = properties.downcast_exact::<PyBytes>().ok()?;
    let rec = with_bytes(body, |b| {
        me::encode_record(&f, b, topic_blob.as_bytes(), properties.as_bytes())
    })??;
    Some(PyBytes::new_bound(py, &rec))
}

/// `message_decoder.encode_batch_records`: (records as a bytearray, [(size, tagsCode, keys,
/// uniq, properties)]) of a batch body, None, or the twin's ValueError.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn encode_batch_records<'py>(
    py: Python<'py>,
    raw: &Bound<'py, PyAny>,
    topic_blob: &Bound<'py, PyAny>,
    queue_id: &Bound<'py, PyAny>,
    sys_flag: &Bound<'py, PyAny>,
    born_timestamp: &Bound<'py, PyAny>,
    born_host: &Bound<'py, PyAny>,
    store_host: &Bound<'py, PyAny>,
    reconsume_times: &Bound<'py, PyAny>,
    suffix: &Bound<'py, PyAny>,
    max_size: &Bound<'py, PyAny>,
) -> PyResult<Option<(Bound<'py, PyByteArray>, Bound<'py, PyList>)>> {
    let fields = || -> Option<_> {
        let (bh, bport) = host(born_host)?;
        let (sh, sport) = host(store_host)?;
        let args = (
            queue_id.extract::<i32>().ok()?,
            sys_flag.extract::<i32>().ok()?,
            born_timestamp.extract::<i64>().ok()?,
            reconsume_times.extract::<i32>().ok()?,
            max_size.extract::<i64>().ok()?,
        );
        let topic_blob = topic_blob.downcast_exact::<PyBytes>().ok()?.clone();
        let suffix = suffix.downcast_exact::<PyString>().ok()?.clone();
        Some((bh, bport, sh, sport, args, topic_blob, suffix))
    };
    let (bh, bport, sh, sport, (queue_id, sys_flag, born_ts, reconsume, max_size), topic_blob, suffix) = match fields()
    {
        Some(v) => v,
        None => return Ok(None),
    };
    let suffix = match suffix.to_str() {
        Ok(s) => s,
        Err(_) => return Ok(None), // lone surrogates: the twin's encode raises
    };
    let f = me::RecordFields {
        queue_id,
        flag: 0,
        sys_flag,
        born_timestamp: born_ts,
        born_host: me::Host {
            addr: bh.as_bytes(),
            port: bport,
        },
        store_host: me::Host {
            addr: sh.as_bytes(),
            port: sport,
        },
        reconsume_times: reconsume,
        prepared_transaction_offset: 0,
    };
    let walked = with_bytes(raw, |bytes| {
        let mut out = Vec::with_capacity(bytes.len() + bytes.len() / 2);
        let msgs = me::encode_batch(bytes, &f, topic_blob.as_bytes(), suffix, max_size, &mut out)?;
        Some(match msgs {
            Err(e) => Err(PyValueError::new_err(e.remark())),
            Ok(msgs) => {
                let items = msgs
                    .iter()
                    .map(|m| -> PyObject { (m.size, m.tags_code, m.keys, m.uniq, m.properties.as_ref()).into_py(py) });
                Ok((PyByteArray::new_bound(py, &out), PyList::new_bound(py, items)))
            }
        })
    });
    match walked.flatten() {
        None => Ok(None),
        Some(r) => r.map(Some),
    }
}

/// `message_decoder.join_message_ids` for a list of offsets, each an int that fits i64; else None.
#[pyfunction]
fn join_message_ids(prefix: &Bound<'_, PyAny>, offsets: &Bound<'_, PyAny>) -> Option<String> {
    let prefix = prefix.downcast_exact::<PyString>().ok()?.to_str().ok()?;
    let list = offsets.downcast_exact::<PyList>().ok()?;
    let mut values = Vec::with_capacity(list.len());
    for o in list.iter() {
        if !o.is_exact_instance_of::<PyLong>() {
            return None;
        }
        values.push(o.extract::<i64>().ok()?);
    }
    Some(me::join_message_ids(prefix, &values))
}

/// `message_decoder.batch_properties_holding`: [(index, start, end)] of the messages of a batch
/// body whose properties hold one of `needles` (a tuple of bytes), or None.
#[pyfunction]
fn batch_properties_holding<'py>(
    raw: &Bound<'py, PyAny>,
    needles: &Bound<'py, PyTuple>,
) -> Option<Vec<(usize, usize, usize)>> {
    let held = needles
        .iter()
        .map(|n| n.downcast_into_exact::<PyBytes>().ok())
        .collect::<Option<Vec<_>>>()?;
    let slices: Vec<&[u8]> = held.iter().map(|n| n.as_bytes()).collect();
    with_bytes(raw, |b| me::properties_holding(b, &slices))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(encode_record_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(batch_properties_holding, m)?)?;
    m.add_function(wrap_pyfunction!(encode_batch_records, m)?)?;
    m.add_function(wrap_pyfunction!(join_message_ids, m)?)?;
    Ok(())
}
