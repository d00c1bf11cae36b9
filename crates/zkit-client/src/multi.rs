//! Transactions: [`MultiWriter`] (multi, op 14: creates, deletes, setData and version checks,
//! applied all or none) and [`MultiReader`] (multiRead, op 22: reads answered from one state).
//! A failed multi says which operation failed with what ([`MultiWriteError::OperationFailed`]).

use std::future::Future;

use bytes::BytesMut;
use zkit_proto::codec::{put_bool, put_i32, put_opt_buffer};
use zkit_proto::{
    MultiHeader, MultiReadResult as WireReadResult, MultiResult, OpCode, Record, Response, Stat,
};

use crate::client::{encode_create_body, frame, put_path, reply, Client, Sent};
use crate::error::{Error, Result};
use crate::path::{validate_path, Chroot};
use crate::types::{CreateMode, CreateOptions};

fn sub_header(buf: &mut BytesMut, op: OpCode) {
    MultiHeader {
        op_type: op.code(),
        done: false,
        err: -1,
    }
    .encode(buf);
}

/// Sends the `count` sub-requests in `body` as one `op` request (multi or multiRead), closed
/// by the end header, and clears both; `None`, sending nothing, when there are none.
fn send_batch(client: &Client, op: OpCode, body: &mut BytesMut, count: &mut usize) -> Option<Sent> {
    let body = std::mem::take(body);
    let count = std::mem::take(count);
    (count > 0).then(|| {
        let mut buf = frame(op, body.len() + 9);
        buf.extend_from_slice(&body);
        MultiHeader::END.encode(&mut buf);
        client.send_frame(buf)
    })
}

/// The result of one operation of a [`MultiReader`].
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MultiReadResult {
    /// [`MultiReader::add_get_data`].
    Data {
        /// The data (null reads as empty).
        data: Vec<u8>,
        /// The stat.
        stat: Stat,
    },
    /// [`MultiReader::add_get_children`].
    Children {
        /// Child names.
        children: Vec<String>,
    },
    /// That read failed (e.g. [`Error::NoNode`]); the others are still answered.
    Error {
        /// Why.
        err: Error,
    },
}

/// Several reads in one request (multiRead), answered from one state of the tree.
#[derive(Debug)]
pub struct MultiReader<'a> {
    client: &'a Client,
    buf: BytesMut,
    count: usize,
}

impl<'a> MultiReader<'a> {
    pub(crate) fn new(client: &'a Client) -> MultiReader<'a> {
        MultiReader {
            client,
            buf: BytesMut::new(),
            count: 0,
        }
    }

    fn add(&mut self, op: OpCode, path: &str) -> Result<()> {
        validate_path(path, false)?;
        sub_header(&mut self.buf, op);
        put_path(&mut self.buf, self.client.chroot_ref(), path);
        put_bool(&mut self.buf, false);
        self.count += 1;
        Ok(())
    }

    /// Adds a getData.
    ///
    /// # Errors
    /// [`Error::BadArguments`] for a bad path (nothing is added).
    pub fn add_get_data(&mut self, path: &str) -> Result<()> {
        self.add(OpCode::GetData, path)
    }

    /// Adds a getChildren.
    ///
    /// # Errors
    /// [`Error::BadArguments`] for a bad path (nothing is added).
    pub fn add_get_children(&mut self, path: &str) -> Result<()> {
        self.add(OpCode::GetChildren, path)
    }

    /// Sends the reads (and clears this builder); one result per read, in order.
    ///
    /// # Errors
    /// Connection and session errors for the whole request; a read's own error is its
    /// [`MultiReadResult::Error`].
    ///
    /// # Cancellation safety
    /// Reads: dropping the future is harmless.
    pub fn commit(
        &mut self,
    ) -> impl Future<Output = Result<Vec<MultiReadResult>>> + Send + 'static {
        let sent = send_batch(
            self.client,
            OpCode::MultiRead,
            &mut self.buf,
            &mut self.count,
        );
        async move {
            let Some(sent) = sent else {
                return Ok(Vec::new());
            };
            let reply = reply(sent).await?;
            let Response::MultiRead(results) = Response::decode(OpCode::MultiRead, &reply.body)?
            else {
                return Err(Error::unexpected("multiRead answered with another shape"));
            };
            Ok(results
                .into_iter()
                .map(|r| match r {
                    WireReadResult::GetData { data, stat } => MultiReadResult::Data {
                        data: data.unwrap_or_default(),
                        stat,
                    },
                    WireReadResult::GetChildren { children } => {
                        MultiReadResult::Children { children }
                    }
                    WireReadResult::Error { err } => MultiReadResult::Error {
                        err: Error::from_code(err).unwrap_or(Error::UnexpectedErrorCode(0)),
                    },
                })
                .collect())
        }
    }

    /// Forgets the reads added so far.
    pub fn abort(&mut self) {
        self.buf.clear();
        self.count = 0;
    }
}

/// The result of one operation of a committed [`MultiWriter`].
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MultiWriteResult {
    /// [`MultiWriter::add_check_version`].
    Check,
    /// [`MultiWriter::add_delete`].
    Delete,
    /// [`MultiWriter::add_create`].
    Create {
        /// The created path (with its sequence number), relative to the chroot.
        path: String,
        /// Its stat.
        stat: Stat,
    },
    /// [`MultiWriter::add_set_data`].
    SetData {
        /// The new stat.
        stat: Stat,
    },
}

/// Why a [`MultiWriter::commit`] failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MultiWriteError {
    /// The request as a whole failed (connection, session, a bad argument).
    #[error("{source}")]
    RequestFailed {
        /// Why.
        #[from]
        source: Error,
    },
    /// The operation at `index` (0-based, in the order added) failed with `source`; nothing
    /// was applied.
    #[error("operation at index {index} failed: {source}")]
    OperationFailed {
        /// Which operation.
        index: usize,
        /// Why.
        source: Error,
    },
}

impl MultiWriteError {
    /// The failing operation's index, when one failed.
    pub fn index(&self) -> Option<usize> {
        match self {
            MultiWriteError::RequestFailed { .. } => None,
            MultiWriteError::OperationFailed { index, .. } => Some(*index),
        }
    }
}

impl From<MultiWriteError> for Error {
    fn from(err: MultiWriteError) -> Error {
        match err {
            MultiWriteError::RequestFailed { source }
            | MultiWriteError::OperationFailed { source, .. } => source,
        }
    }
}

/// Writes and checks in one request (multi), applied all or none.
#[derive(Debug)]
pub struct MultiWriter<'a> {
    client: &'a Client,
    buf: BytesMut,
    count: usize,
}

impl<'a> MultiWriter<'a> {
    pub(crate) fn new(client: &'a Client) -> MultiWriter<'a> {
        MultiWriter {
            client,
            buf: BytesMut::new(),
            count: 0,
        }
    }

    fn chroot(&self) -> &Chroot {
        self.client.chroot_ref()
    }

    /// Adds a check that `path` has `version` (-1: any).
    ///
    /// # Errors
    /// [`Error::BadArguments`] for a bad path (nothing is added).
    pub fn add_check_version(&mut self, path: &str, version: i32) -> Result<()> {
        validate_path(path, false)?;
        sub_header(&mut self.buf, OpCode::Check);
        put_path(&mut self.buf, self.client.chroot_ref(), path);
        put_i32(&mut self.buf, version);
        self.count += 1;
        Ok(())
    }

    /// Adds a create (see [`Client::create`]); later operations see the node.
    ///
    /// # Errors
    /// [`Error::BadArguments`] / [`Error::InvalidAcl`] as [`Client::create`] checks them.
    pub fn add_create(
        &mut self,
        path: &str,
        data: &[u8],
        options: &CreateOptions<'_>,
    ) -> Result<()> {
        options.validate()?;
        validate_path(path, options.mode.is_sequential())?;
        if path == "/" {
            return Err(Error::bad_arguments("can not create the root node"));
        }
        let op = if options.ttl_millis() != 0 {
            OpCode::CreateTtl
        } else if options.mode == CreateMode::Container {
            OpCode::CreateContainer
        } else {
            OpCode::Create2
        };
        sub_header(&mut self.buf, op);
        let chroot = self.chroot().clone();
        encode_create_body(&mut self.buf, &chroot, path, data, options);
        self.count += 1;
        Ok(())
    }

    /// Adds a setData.
    ///
    /// # Errors
    /// [`Error::BadArguments`] for a bad path (nothing is added).
    pub fn add_set_data(
        &mut self,
        path: &str,
        data: &[u8],
        expected_version: Option<i32>,
    ) -> Result<()> {
        validate_path(path, false)?;
        sub_header(&mut self.buf, OpCode::SetData);
        put_path(&mut self.buf, self.client.chroot_ref(), path);
        put_opt_buffer(&mut self.buf, Some(data));
        put_i32(&mut self.buf, expected_version.unwrap_or(-1));
        self.count += 1;
        Ok(())
    }

    /// Adds a delete.
    ///
    /// # Errors
    /// [`Error::BadArguments`] for a bad path or the root (nothing is added).
    pub fn add_delete(&mut self, path: &str, expected_version: Option<i32>) -> Result<()> {
        validate_path(path, false)?;
        if path == "/" {
            return Err(Error::bad_arguments("can not delete the root node"));
        }
        sub_header(&mut self.buf, OpCode::Delete);
        put_path(&mut self.buf, self.client.chroot_ref(), path);
        put_i32(&mut self.buf, expected_version.unwrap_or(-1));
        self.count += 1;
        Ok(())
    }

    /// Sends the operations (and clears this builder); one result per operation, in order.
    ///
    /// # Errors
    /// [`MultiWriteError::OperationFailed`] with the index and error of the first operation
    /// that failed (nothing was applied); [`MultiWriteError::RequestFailed`] for connection
    /// and session errors ([`Error::ConnectionLoss`]: it may have been applied).
    ///
    /// # Cancellation safety
    /// The request is sent when this is called; dropping the future does not undo it.
    pub fn commit(
        &mut self,
    ) -> impl Future<Output = std::result::Result<Vec<MultiWriteResult>, MultiWriteError>> + Send + 'static
    {
        let chroot = self.chroot().clone();
        let sent = send_batch(self.client, OpCode::Multi, &mut self.buf, &mut self.count);
        async move {
            let Some(sent) = sent else {
                return Ok(Vec::new());
            };
            let reply = reply(sent).await?;
            let Response::Multi(results) =
                Response::decode(OpCode::Multi, &reply.body).map_err(Error::from)?
            else {
                return Err(Error::unexpected("multi answered with another shape").into());
            };
            // A failed multi answers ErrorResult for every op: 0 before the failing one, its
            // code, then RuntimeInconsistency; the first non-zero one is the cause.
            if let Some((index, err)) = results.iter().enumerate().find_map(|(i, r)| match r {
                MultiResult::Error { err } if *err != 0 => Some((i, *err)),
                _ => None,
            }) {
                return Err(MultiWriteError::OperationFailed {
                    index,
                    source: Error::from_code(err).unwrap_or(Error::UnexpectedErrorCode(err)),
                });
            }
            results
                .into_iter()
                .map(|r| {
                    Ok(match r {
                        MultiResult::Check => MultiWriteResult::Check,
                        MultiResult::Delete => MultiWriteResult::Delete,
                        MultiResult::SetData { stat } => MultiWriteResult::SetData { stat },
                        MultiResult::Create2 { path, stat } => MultiWriteResult::Create {
                            path: chroot.client_path_or_same(path),
                            stat,
                        },
                        MultiResult::Create { path } => MultiWriteResult::Create {
                            path: chroot.client_path_or_same(path),
                            stat: Stat::default(),
                        },
                        MultiResult::Error { .. } => {
                            return Err(MultiWriteError::from(Error::unexpected(
                                "multi answered an error result without an error",
                            )))
                        }
                    })
                })
                .collect()
        }
    }

    /// Forgets the operations added so far.
    pub fn abort(&mut self) {
        self.buf.clear();
        self.count = 0;
    }
}
