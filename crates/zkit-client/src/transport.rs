//! The byte stream under a connection: plain TCP (with `TCP_NODELAY`, as `ClientCnxnSocketNIO`
//! sets it) or TLS over it, and the connection's two buffers.
//!
//! [`ReadBuffer`] and the write buffer grow on demand and shrink back when idle, so an idle
//! session costs a few hundred bytes of buffer, not tens of kilobytes.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// A connection's stream.
pub(crate) enum Transport {
    /// Plain TCP.
    Tcp(TcpStream),
    /// TLS over TCP.
    #[cfg(feature = "tls")]
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl Transport {
    pub(crate) fn poll_read(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self {
            Transport::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            #[cfg(feature = "tls")]
            Transport::Tls(s) => Pin::new(&mut **s).poll_read(cx, buf),
        }
    }

    pub(crate) fn poll_write(
        &mut self,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self {
            Transport::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            #[cfg(feature = "tls")]
            Transport::Tls(s) => Pin::new(&mut **s).poll_write(cx, buf),
        }
    }

    pub(crate) fn poll_flush(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self {
            Transport::Tcp(s) => Pin::new(s).poll_flush(cx),
            #[cfg(feature = "tls")]
            Transport::Tls(s) => Pin::new(&mut **s).poll_flush(cx),
        }
    }
}

/// Bytes of an idle connection's read buffer.
const IDLE_READ: usize = 256;
/// The most a single read asks for once the buffer has grown.
const MAX_READ: usize = 64 * 1024;

/// Received bytes not yet consumed: `buf[start..end]`. `buf` is always initialized (zeroed when
/// it grows), so reading into it needs no `unsafe`.
#[derive(Debug)]
pub(crate) struct ReadBuffer {
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

impl Default for ReadBuffer {
    fn default() -> Self {
        ReadBuffer {
            buf: vec![0; IDLE_READ],
            start: 0,
            end: 0,
        }
    }
}

impl ReadBuffer {
    /// The unconsumed bytes.
    pub(crate) fn data(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    /// Marks `n` bytes as consumed.
    pub(crate) fn consume(&mut self, n: usize) {
        self.start += n;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
    }

    /// Makes room for at least `want` more bytes after what is buffered (a frame's announced
    /// length), growing by doubling up to [`MAX_READ`] or to what `want` needs.
    pub(crate) fn reserve(&mut self, want: usize) {
        if self.start > 0 && self.buf.len() - self.end < want {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        let free = self.buf.len() - self.end;
        if free < want.max(1) {
            let needed = self.end + want.max(1);
            let grown = (self.buf.len() * 2).clamp(needed, needed.max(MAX_READ));
            self.buf.resize(grown, 0);
        }
    }

    /// Reads once from `transport`. `Ok(0)` is end of stream.
    pub(crate) fn poll_read_from(
        &mut self,
        transport: &mut Transport,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<usize>> {
        if self.end == self.buf.len() {
            self.reserve(self.buf.len().min(MAX_READ));
        }
        let mut rb = ReadBuf::new(&mut self.buf[self.end..]);
        match transport.poll_read(cx, &mut rb) {
            Poll::Ready(Ok(())) => {
                let n = rb.filled().len();
                let filled_all = self.end + n == self.buf.len();
                self.end += n;
                // A read that filled the buffer: the next one may ask for more.
                if filled_all && n > 0 && self.buf.len() < MAX_READ {
                    self.reserve(self.buf.len());
                }
                Poll::Ready(Ok(n))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    }

    /// Gives back a grown buffer once nothing is buffered (call when the connection is idle).
    pub(crate) fn shrink_if_idle(&mut self) {
        if self.start == self.end && self.buf.len() > IDLE_READ {
            self.buf = vec![0; IDLE_READ];
            self.start = 0;
            self.end = 0;
        }
    }

    /// Bytes held (for tests of the shrinking).
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.buf.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_for_a_frame_and_shrinks_back() {
        let mut rb = ReadBuffer::default();
        assert_eq!(rb.capacity(), IDLE_READ);
        rb.reserve(100_000);
        assert!(rb.capacity() >= 100_000);
        rb.shrink_if_idle();
        assert_eq!(rb.capacity(), IDLE_READ);
    }

    #[test]
    fn reserve_compacts_consumed_bytes() {
        let mut rb = ReadBuffer {
            buf: vec![1, 2, 3, 4],
            start: 2,
            end: 4,
        };
        rb.reserve(2);
        assert_eq!(rb.data(), &[3, 4]);
        assert_eq!(rb.capacity(), 4);
        rb.consume(2);
        assert!(rb.data().is_empty());
    }
}
