//! The frames of a durable server's SSE body.
#![allow(dead_code)]

use serde_json::Value;

/// `(id, event)` of the complete SSE frames of `body` (the id empty for an event that is not in
/// the log).
pub fn frames(body: &str) -> Vec<(String, Value)> {
    let complete = &body[..body.rfind("\n\n").map_or(0, |end| end + 2)];
    complete
        .split("\n\n")
        .filter(|frame| !frame.is_empty() && !frame.starts_with(':'))
        .map(|frame| {
            let (id, data) = match frame.split_once('\n') {
                Some((id, data)) if id.starts_with("id: ") => (&id[4..], data),
                _ => ("", frame),
            };
            (
                id.to_owned(),
                serde_json::from_str(data.strip_prefix("data: ").expect("a data line")).unwrap(),
            )
        })
        .collect()
}

/// An SSE body read as it comes: its events one at a time (comments skipped).
pub struct Live {
    body: std::pin::Pin<Box<dyn futures_util::Stream<Item = reqwest::Result<Vec<u8>>> + Send>>,
    buffer: String,
    token: String,
}

impl Live {
    /// The stream, read with `token`.
    pub fn with_token(mut self, token: &str) -> Self {
        self.token = token.to_owned();
        self
    }

    /// The token it was read with.
    pub fn token(&self) -> &str {
        &self.token
    }

    pub fn new(response: reqwest::Response) -> Self {
        use futures_util::StreamExt;
        assert_eq!(response.status(), 200);
        Self {
            body: Box::pin(
                response
                    .bytes_stream()
                    .map(|chunk| chunk.map(|b| b.to_vec())),
            ),
            buffer: String::new(),
            token: String::new(),
        }
    }

    /// The next event (failing after 10 s without one).
    pub async fn next(&mut self) -> Value {
        use futures_util::StreamExt;
        let next = async {
            loop {
                if let Some(end) = self.buffer.find("\n\n") {
                    let frame: String = self.buffer.drain(..end + 2).collect();
                    if let Some(data) = frame.lines().find_map(|l| l.strip_prefix("data: ")) {
                        return serde_json::from_str(data).unwrap();
                    }
                    continue;
                }
                let chunk = self.body.next().await.expect("the stream goes on").unwrap();
                self.buffer.push_str(std::str::from_utf8(&chunk).unwrap());
            }
        };
        tokio::time::timeout(std::time::Duration::from_secs(10), next)
            .await
            .expect("an event within 10 s")
    }
}
