//! A local HTTP server that answers every request with a recorded response (a fixture of
//! `tests/fixtures/{provider}/`), its body sent as HTTP chunks of a chosen size, and keeps each
//! request it received.
#![allow(dead_code)]

use std::{net::SocketAddr, path::Path};

use serde_json::Value;
use tokio::{
    io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader},
    net::TcpListener,
    sync::mpsc,
};

/// A recorded response: `# comment` lines (where it came from), `status: N`, headers, a blank
/// line, then the body's bytes to the end of the file. The pseudo-header `x-replay-end: abort`
/// makes the server drop the connection after the body instead of ending it cleanly, and
/// `x-replay-end: hang` keeps it open, silent (a provider that stalls). [`Fixture::unanswered`]
/// is a connection closed once the request is read, with no response at all.
#[derive(Debug, Clone)]
pub struct Fixture {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub abort: bool,
    pub hang: bool,
    pub unanswered: bool,
}

impl Fixture {
    /// The connection closed once the request is read, unanswered: what a client sees of a
    /// server that closed a kept-alive connection as the request was sent on it.
    pub fn unanswered() -> Self {
        Self {
            status: 0,
            headers: Vec::new(),
            body: Vec::new(),
            abort: false,
            hang: false,
            unanswered: true,
        }
    }

    /// The fixture `name` of `tests/fixtures/openai/`.
    pub fn load(name: &str) -> Self {
        Self::of("openai", name)
    }

    /// The fixture `name` of `tests/fixtures/{provider}/`.
    pub fn of(provider: &str, name: &str) -> Self {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(provider)
            .join(name);
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let mut status = None;
        let mut headers = Vec::new();
        let (mut abort, mut hang) = (false, false);
        let mut rest = &bytes[..];
        loop {
            let end = rest
                .iter()
                .position(|b| *b == b'\n')
                .expect("a blank line after the headers");
            let line = std::str::from_utf8(&rest[..end]).expect("UTF-8 headers");
            rest = &rest[end + 1..];
            if line.is_empty() {
                break;
            }
            if line.starts_with('#') {
                continue;
            }
            let (name, value) = line.split_once(": ").expect("name: value");
            match name {
                "status" => status = Some(value.parse().expect("a status code")),
                "x-replay-end" => {
                    abort = value == "abort";
                    hang = value == "hang";
                }
                _ => headers.push((name.to_owned(), value.to_owned())),
            }
        }
        Self {
            status: status.expect("a status line"),
            headers,
            body: rest.to_vec(),
            abort,
            hang,
            unanswered: false,
        }
    }
}

/// What the server received.
#[derive(Debug)]
pub struct Received {
    pub path: String,
    pub authorization: Option<String>,
    /// Every header, its name in lower case.
    pub headers: Vec<(String, String)>,
    pub body: Value,
}

impl Received {
    /// The value of the header `name` (lower case), if it was sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Serves `fixtures` in turn (the last one again once they are used up), each body in chunks of
/// `chunk` bytes. Returns the base URL (`http://addr/v1`) and the requests received.
pub async fn serve(
    fixtures: Vec<Fixture>,
    chunk: usize,
) -> (String, mpsc::UnboundedReceiver<Received>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut served = 0;
        loop {
            let Ok((socket, _)) = listener.accept().await else {
                return;
            };
            let fixture = fixtures[served.min(fixtures.len() - 1)].clone();
            served += 1;
            let tx = tx.clone();
            tokio::spawn(async move {
                let (read, mut write) = socket.into_split();
                let mut read = BufReader::new(read);
                let _ = tx.send(read_request(&mut read).await);
                if fixture.unanswered {
                    return;
                }

                let mut head = format!("HTTP/1.1 {} Recorded\r\n", fixture.status);
                for (name, value) in &fixture.headers {
                    head.push_str(&format!("{name}: {value}\r\n"));
                }
                head.push_str("transfer-encoding: chunked\r\nconnection: close\r\n\r\n");
                write.write_all(head.as_bytes()).await.unwrap();
                for piece in fixture.body.chunks(chunk.max(1)) {
                    if write_chunk(&mut write, piece).await.is_err() {
                        return;
                    }
                }
                if fixture.hang {
                    // Silent, the connection held open until the client leaves.
                    let mut rest = Vec::new();
                    let _ = read.read_to_end(&mut rest).await;
                    return;
                }
                if !fixture.abort {
                    let _ = write.write_all(b"0\r\n\r\n").await;
                }
                let _ = write.shutdown().await;
            });
        }
    });
    (format!("http://{addr}/v1"), rx)
}

/// One HTTP/1.1 request, read from `read`.
pub async fn read_request(read: &mut (impl AsyncBufReadExt + Unpin)) -> Received {
    let mut request_line = String::new();
    read.read_line(&mut request_line).await.unwrap();
    let path = request_line.split(' ').nth(1).unwrap_or("").to_owned();
    let (mut length, mut authorization, mut headers) = (0, None, Vec::new());
    loop {
        let mut line = String::new();
        read.read_line(&mut line).await.unwrap();
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(": ").unwrap();
        headers.push((name.to_ascii_lowercase(), value.to_owned()));
        match name.to_ascii_lowercase().as_str() {
            "content-length" => length = value.parse().unwrap(),
            "authorization" => authorization = Some(value.to_owned()),
            _ => {}
        }
    }
    let mut body = vec![0; length];
    read.read_exact(&mut body).await.unwrap();
    Received {
        path,
        authorization,
        headers,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    }
}

/// `piece` as one chunk of a chunked body, flushed.
pub async fn write_chunk(
    write: &mut (impl AsyncWriteExt + Unpin),
    piece: &[u8],
) -> std::io::Result<()> {
    let mut frame = format!("{:x}\r\n", piece.len()).into_bytes();
    frame.extend_from_slice(piece);
    frame.extend_from_slice(b"\r\n");
    write.write_all(&frame).await?;
    write.flush().await
}
