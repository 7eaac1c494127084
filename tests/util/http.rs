//! HTTP stand-ins for the tests: what a server the test plays reads of a request.

use std::io::{Read, Write};
use std::net::TcpStream;

/// Reads one HTTP/1.1 request from `r`: its head (through the blank line) and its body of
/// `Content-Length` bytes; `None` when the peer closes or fails before the whole of it came.
pub fn read_request(r: &mut impl Read) -> Option<(String, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let (head_end, length) = loop {
        let n = r.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..at]).to_lowercase();
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            break (at + 4, length);
        }
    };
    while buf.len() < head_end + length {
        match r.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    Some((head, buf[head_end..head_end + length].to_vec()))
}

/// Answers with `status` (`200 OK`), a JSON `body` and any `headers` (each ending in `\r\n`),
/// then closes the TLS session, as a one-request-a-connection server does. A peer already gone
/// is not an error here.
pub fn respond_json(
    tls: &mut rustls::StreamOwned<rustls::ServerConnection, TcpStream>,
    status: &str,
    headers: &str,
    body: &str,
) {
    let text = format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n{headers}connection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = tls.write_all(text.as_bytes());
    let _ = tls.flush();
    tls.conn.send_close_notify();
    let _ = tls.flush();
}
