//! [`Format`]: how a typed value is encoded in a znode (JSON or TOML), shared by the
//! configuration store and [`crate::model`] (re-exported there as `crate::model::Format`).

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::{Error, Result};

/// How a value is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// JSON (`serde_json`).
    Json,
    /// TOML (`toml`); the value must serialize to a table (or sit in a schema envelope).
    Toml,
}

impl Format {
    /// Encodes `value`; `what` names it in the error.
    ///
    /// # Errors
    /// [`Error::BadArguments`] when it does not serialize in this format.
    pub fn encode<T: Serialize + ?Sized>(self, what: &str, value: &T) -> Result<Vec<u8>> {
        match self {
            Format::Json => serde_json::to_vec(value)
                .map_err(|e| Error::BadArguments(format!("serializing {what} as JSON: {e}"))),
            Format::Toml => toml::to_string(value)
                .map(String::into_bytes)
                .map_err(|e| Error::BadArguments(format!("serializing {what} as TOML: {e}"))),
        }
    }

    /// Decodes a `T`; `what` names it in the error.
    ///
    /// # Errors
    /// [`Error::Unexpected`] when the bytes are not this format's encoding of a `T`.
    pub fn decode<T: DeserializeOwned>(self, what: &str, bytes: &[u8]) -> Result<T> {
        match self {
            Format::Json => serde_json::from_slice(bytes)
                .map_err(|e| Error::Unexpected(format!("{what} is not the expected JSON: {e}"))),
            Format::Toml => {
                let text = std::str::from_utf8(bytes)
                    .map_err(|e| Error::Unexpected(format!("{what} is not UTF-8: {e}")))?;
                toml::from_str(text)
                    .map_err(|e| Error::Unexpected(format!("{what} is not the expected TOML: {e}")))
            }
        }
    }
}
