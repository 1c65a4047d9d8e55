//! `pumice._native`: the per-message byte work of Pumice's data plane, each function the
//! native form of a pure-Python twin in the module that owns the concept (issue 33).
//!
//! The modules here are plain Rust (what `cargo test` checks); `python` is the PyO3 layer,
//! built with the `extension-module` feature (setup.py asks for it).

pub mod consume_queue_scan;
pub mod index_hash;
pub mod message_batch;
pub mod message_encode;
pub mod record_columns;
pub mod record_decode;
pub mod remoting_codec;
pub mod send_request;

#[cfg(feature = "extension-module")]
mod python;
