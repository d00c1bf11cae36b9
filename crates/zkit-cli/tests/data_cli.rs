//! Data in and out of `zkit create|set|get` byte for byte: `--file`, stdin (`-`),
//! `get --output FILE` and `--hex`, with 2 MB of binary data (every byte value, NUL and
//! invalid UTF-8 included) on a server whose `jute.maxbuffer` allows it.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::process::Command;
use zkit_server::{Server, ServerConfig};

const WAIT: Duration = Duration::from_secs(60);
/// The server's and the client's `jute.maxbuffer` in this test: room for 2 MB plus headers.
const MAX_BUFFER: usize = 4 * 1024 * 1024;

/// Runs `zkit ARGS --server S`, feeding `stdin` if given; returns (code, stdout, stderr).
async fn zkit(server: &str, args: &[&str], stdin: Option<&[u8]>) -> (i32, Vec<u8>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_zkit"))
        .args(args)
        .args(["--server", server])
        .env_remove("ZKIT_SERVER")
        .env_remove("ZKIT_AUTH")
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn zkit");
    if let Some(bytes) = stdin {
        let mut pipe = child.stdin.take().expect("stdin");
        pipe.write_all(bytes).await.expect("feed stdin");
        drop(pipe);
    }
    let out = tokio::time::timeout(WAIT, child.wait_with_output())
        .await
        .expect("zkit finished in time")
        .expect("run zkit");
    (
        out.status.code().unwrap_or(-1),
        out.stdout,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `len` bytes that cover every byte value, in an order that is not a simple cycle.
fn binary(len: usize, salt: u32) -> Vec<u8> {
    let mut x = 0x9e37_79b9u32 ^ salt;
    (0..len)
        .map(|i| {
            x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            if i < 256 {
                i as u8
            } else {
                (x >> 24) as u8
            }
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_megabytes_of_binary_data_round_trip() {
    let mut config = ServerConfig::ephemeral();
    config.max_frame = MAX_BUFFER;
    let server = Server::start(config).await.unwrap();
    let s = server.addr().to_string();
    let dir = tempfile::tempdir().unwrap();
    let max = MAX_BUFFER.to_string();

    // create --file, get --output: the same 2 MB back.
    let big = binary(2 * 1024 * 1024, 1);
    let input = dir.path().join("in.bin");
    std::fs::write(&input, &big).unwrap();
    let (code, out, err) = zkit(
        &s,
        &["create", "/big", "--file", input.to_str().unwrap()],
        None,
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, b"/big\n");
    let output = dir.path().join("out.bin");
    let (code, _, err) = zkit(
        &s,
        &[
            "get",
            "/big",
            "--output",
            output.to_str().unwrap(),
            "--jute-maxbuffer",
            &max,
        ],
        None,
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert!(
        std::fs::read(&output).unwrap() == big,
        "get --output differs from the input"
    );

    // set - (stdin), get --output - (stdout): exact bytes, no newline added.
    let other = binary(2 * 1024 * 1024 - 7, 2);
    let (code, _, err) = zkit(&s, &["set", "/big", "-"], Some(&other)).await;
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = zkit(
        &s,
        &["get", "/big", "-o", "-", "--jute-maxbuffer", &max],
        None,
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out == other,
        "stdout differs ({} bytes, {} expected)",
        out.len(),
        other.len()
    );

    // --file - and --hex on a small binary value.
    let (code, _, err) = zkit(
        &s,
        &["create", "/small", "--file", "-"],
        Some(b"\x00\xff\n\x80"),
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = zkit(&s, &["get", "/small", "--hex"], None).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(String::from_utf8_lossy(&out), "00ff0a80\n");

    // A text argument still works, and data and --file together are refused.
    let (code, _, err) = zkit(&s, &["set", "/small", "text"], None).await;
    assert_eq!(code, 0, "{err}");
    let (_, out, _) = zkit(&s, &["get", "/small"], None).await;
    assert_eq!(out, b"text\n");
    let (code, _, _) = zkit(&s, &["set", "/small", "x", "--file", "y"], None).await;
    assert_eq!(code, 2);
    server.stop().await;
}
