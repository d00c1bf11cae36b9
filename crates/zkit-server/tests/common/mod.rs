//! A raw wire client for the server's black-box tests: frames, handshake and requests written
//! with `zkit-proto`, so tests can also send what a real client never would.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use zkit_proto::frame::encode_frame;
use zkit_proto::{ConnectRequest, ConnectResponse, Record, ReplyHeader, Request};

/// Bound on every wait in these tests: they fail rather than hang.
pub const WAIT: Duration = Duration::from_secs(10);

/// The ConnectRequest of a new session with a 30 s timeout, as the Java client 3.8 sends it.
pub fn new_session_request() -> ConnectRequest {
    ConnectRequest::new_session(30_000)
}

/// A raw connection.
pub struct Raw {
    pub stream: TcpStream,
}

impl Raw {
    pub async fn connect(addr: SocketAddr) -> Raw {
        let stream = TcpStream::connect(addr).await.expect("connect");
        Raw { stream }
    }

    /// Connects and completes a handshake for a new session.
    pub async fn session(addr: SocketAddr) -> (Raw, ConnectResponse) {
        let mut raw = Raw::connect(addr).await;
        let response = raw.handshake().await;
        assert!(response.session_id != 0, "no session: {response:?}");
        (raw, response)
    }

    pub async fn handshake(&mut self) -> ConnectResponse {
        let frame = self.try_handshake().await.expect("handshake reply");
        ConnectResponse::decode_from(&frame).expect("decode ConnectResponse")
    }

    /// Sends a new-session ConnectRequest (30 s timeout); the reply frame, or `None` when the
    /// server closed the connection instead.
    pub async fn try_handshake(&mut self) -> Option<Vec<u8>> {
        let request = new_session_request();
        self.send_frame(|b| request.encode(b)).await;
        self.read_frame().await
    }

    pub async fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.expect("write");
    }

    pub async fn send_frame(&mut self, payload: impl FnOnce(&mut BytesMut)) {
        let mut buf = BytesMut::new();
        encode_frame(&mut buf, payload);
        self.send_raw(&buf).await;
    }

    pub async fn send_request(&mut self, xid: i32, request: &Request) {
        self.send_frame(|b| request.encode(xid, b)).await;
    }

    /// The next frame's payload; `None` when the server closed the connection.
    pub async fn read_frame(&mut self) -> Option<Vec<u8>> {
        tokio::time::timeout(WAIT, async {
            let mut len = [0u8; 4];
            if self.stream.read_exact(&mut len).await.is_err() {
                return None;
            }
            let len =
                usize::try_from(i32::from_be_bytes(len)).expect("negative length from server");
            let mut payload = vec![0; len];
            self.stream.read_exact(&mut payload).await.ok()?;
            Some(payload)
        })
        .await
        .expect("server neither answered nor closed in time")
    }

    /// The next reply header and the bytes after it.
    pub async fn read_reply(&mut self) -> Option<(ReplyHeader, Vec<u8>)> {
        let frame = self.read_frame().await?;
        let header = ReplyHeader::decode_from(&frame).expect("decode ReplyHeader");
        Some((header, frame[16..].to_vec()))
    }

    /// Waits until the server closes the connection, failing if it sends anything.
    pub async fn expect_closed(&mut self) {
        let mut byte = [0u8; 1];
        let read = tokio::time::timeout(WAIT, self.stream.read(&mut byte))
            .await
            .expect("server did not close the connection in time");
        match read {
            Ok(0) | Err(_) => {}
            Ok(_) => panic!("server sent data instead of closing"),
        }
    }

    /// Sends a ping (xid -2) and expects its reply: the connection is still served.
    pub async fn ping(&mut self) {
        self.send_request(-2, &Request::Ping).await;
        let (header, _) = self.read_reply().await.expect("ping reply");
        assert_eq!((header.xid, header.err), (-2, 0));
    }
}

/// Sends a four-letter word and returns the whole answer (the server closes after it).
pub async fn four_letter(addr: SocketAddr, word: &str) -> String {
    let mut raw = Raw::connect(addr).await;
    raw.send_raw(word.as_bytes()).await;
    let mut out = String::new();
    tokio::time::timeout(WAIT, raw.stream.read_to_string(&mut out))
        .await
        .expect("four-letter word answered in time")
        .expect("read four-letter answer");
    out
}

/// A zkit-client session against `addr`.
pub async fn client(addr: SocketAddr) -> zkit_client::Client {
    zkit_client::Client::connector()
        .with_session_timeout(Duration::from_secs(10))
        .connect(&addr.to_string())
        .await
        .expect("zkit-client session")
}

/// `GET path` from an HTTP server (the admin endpoint): the whole response, head and body as
/// sent (the connection is closed after it).
pub async fn http_response(addr: SocketAddr, path: &str) -> String {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: zkit\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut out = String::new();
    tokio::time::timeout(WAIT, stream.read_to_string(&mut out))
        .await
        .expect("admin answered in time")
        .unwrap();
    out
}

/// `GET path` from an HTTP server (the admin endpoint): the status and the body.
pub async fn http_get(addr: SocketAddr, path: &str) -> (u16, String) {
    let out = http_response(addr, path).await;
    let status = out
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("status line");
    let body = out
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}
