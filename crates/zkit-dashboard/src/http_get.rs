//! A plain-HTTP GET of a small text document (zkit serve's `/metrics`), on hyper's client
//! connection: one request per connection, bounded in time and size.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Empty, Limited};
use hyper::Request;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// The largest document read.
const MAX_BODY: usize = 8 << 20;

/// Fetches `url` (`http://host:port/path`) and returns the body as text.
///
/// # Errors
/// A message for a bad URL, a refused connection, a non-200 status, a timeout.
pub async fn get(url: &str, timeout: Duration) -> Result<String, String> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("only http:// URLs are supported: {url}"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let fetch = async {
        let stream = TcpStream::connect(authority)
            .await
            .map_err(|e| format!("cannot connect: {e}"))?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| e.to_string())?;
        let driver = tokio::spawn(conn);
        let req = Request::get(path)
            .header(hyper::header::HOST, authority)
            .body(Empty::<Bytes>::new())
            .map_err(|e| e.to_string())?;
        let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
        if !resp.status().is_success() {
            driver.abort();
            return Err(format!("HTTP {}", resp.status()));
        }
        let body = Limited::new(resp.into_body(), MAX_BODY)
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        driver.abort();
        Ok(String::from_utf8_lossy(&body).into_owned())
    };
    tokio::time::timeout(timeout, fetch)
        .await
        .map_err(|_| format!("no answer within {timeout:?}"))?
}
