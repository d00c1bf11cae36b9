//! The wire side of a request: its frame, the chrooted path, create bodies, and awaiting the
//! reply the connection task hands back.

use bytes::{BufMut, BytesMut};
use tokio::sync::oneshot;
use zkit_proto::codec::{put_i32, put_opt_buffer};
use zkit_proto::{OpCode, Record, Stat};

use crate::acl::encode_acls;
use crate::error::{Error, Result};
use crate::path::Chroot;
use crate::session::Reply;
use crate::types::{CreateOptions, CreateSequence};

/// The future of a request that was sent, or the error that stopped it before sending.
pub(crate) type Sent = Result<oneshot::Receiver<Result<Reply>>>;

/// A request frame: length and xid placeholders (patched by the connection task), op code.
pub(crate) fn frame(op: OpCode, capacity: usize) -> BytesMut {
    let mut buf = BytesMut::with_capacity(12 + capacity);
    put_i32(&mut buf, 0);
    put_i32(&mut buf, 0);
    put_i32(&mut buf, op.code());
    buf
}

/// Writes a ustring: the server path of `path` under `chroot`, without building it.
pub(crate) fn put_path(buf: &mut BytesMut, chroot: &Chroot, path: &str) {
    let (root, rest) = chroot.server_path_parts(path);
    put_i32(
        buf,
        i32::try_from(root.len() + rest.len()).unwrap_or(i32::MAX),
    );
    buf.put_slice(root.as_bytes());
    buf.put_slice(rest.as_bytes());
}

/// Awaits a reply; a non-zero code is the error.
pub(crate) async fn reply(sent: Sent) -> Result<Reply> {
    let reply = raw_reply(sent).await?;
    match Error::from_code(reply.err) {
        None => Ok(reply),
        Some(err) => Err(err),
    }
}

/// Awaits a reply, whatever its code.
pub(super) async fn raw_reply(sent: Sent) -> Result<Reply> {
    match sent?.await {
        Ok(result) => result,
        // The task dropped the request: it is shutting down.
        Err(_) => Err(Error::ClientClosed),
    }
}

/// Encodes a create (op chosen from the options) into a request frame or a multi sub-op body.
pub(crate) fn encode_create(
    chroot: &Chroot,
    path: &str,
    data: &[u8],
    options: &CreateOptions<'_>,
) -> (OpCode, BytesMut) {
    let ttl = options.ttl_millis();
    let op = if ttl != 0 {
        OpCode::CreateTtl
    } else if options.mode == crate::types::CreateMode::Container {
        OpCode::CreateContainer
    } else {
        OpCode::Create2
    };
    let mut buf = frame(op, path.len() + data.len() + 48);
    encode_create_body(&mut buf, chroot, path, data, options);
    (op, buf)
}

pub(crate) fn encode_create_body(
    buf: &mut BytesMut,
    chroot: &Chroot,
    path: &str,
    data: &[u8],
    options: &CreateOptions<'_>,
) {
    let ttl = options.ttl_millis();
    put_path(buf, chroot, path);
    put_opt_buffer(buf, Some(data));
    encode_acls(buf, &options.acls);
    put_i32(buf, options.mode.flags(ttl != 0));
    if ttl != 0 {
        buf.put_i64(ttl);
    }
}

pub(super) fn decode_stat(reply: Reply) -> Result<Stat> {
    Ok(Stat::decode_from(&reply.body)?)
}

/// The sequence number of a created sequential node: the digits after the requested prefix.
pub(super) fn parse_sequence(created: &str, prefix: &str) -> Result<CreateSequence> {
    let digits = created
        .strip_prefix(prefix)
        .ok_or_else(|| Error::unexpected(format!("created {created} is not under {prefix}")))?;
    digits
        .parse::<i64>()
        .map(CreateSequence)
        .map_err(|_| Error::unexpected(format!("no sequence number in {created}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequence_numbers() {
        assert_eq!(
            parse_sequence("/a/n0000000012", "/a/n"),
            Ok(CreateSequence(12))
        );
        assert!(parse_sequence("/b/n0000000012", "/a/n").is_err());
    }

    #[test]
    fn paths_are_encoded_under_the_chroot() {
        let chroot = Chroot::new("/app").unwrap();
        let mut buf = BytesMut::new();
        put_path(&mut buf, &chroot, "/x");
        assert_eq!(&buf[..], b"\x00\x00\x00\x06/app/x");
        buf.clear();
        put_path(&mut buf, &chroot, "/");
        assert_eq!(&buf[..], b"\x00\x00\x00\x04/app");
    }
}
