//! A run's events as a streamed HTTP response, in each format.

use std::{convert::Infallible, time::Duration};

use axum::{
    body::{Body, Bytes},
    http::{HeaderMap, HeaderValue, header},
    response::{
        IntoResponse, Response,
        sse::{Event as SseEvent, KeepAlive, Sse},
    },
};
use futures_util::StreamExt;

use super::Format;
use crate::runs::Follow;
#[cfg(feature = "proto")]
use crate::runs::LoggedEvent;

fn stream_headers() -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    headers
}

/// The events `follow` yields, in `format`: SSE events carry `id: {runId}:{seq}` (events that
/// are not in the log, such as a follower's own `RUN_ERROR`, carry none), and `: ping` comments
/// go out while the run is quiet.
pub(super) fn events(follow: Follow, format: Format, keep_alive: Duration) -> Response {
    match format {
        Format::Sse => {
            let run = follow.run_id().clone();
            let frames = follow.map(move |event| {
                let frame = match event.seq {
                    0 => SseEvent::default(),
                    seq => SseEvent::default().id(format!("{run}:{seq}")),
                };
                Ok::<_, Infallible>(frame.data(event.json_str()))
            });
            let keep_alive = KeepAlive::new().interval(keep_alive).text("ping");
            (stream_headers(), Sse::new(frames).keep_alive(keep_alive)).into_response()
        }
        Format::Ndjson => binary(
            format,
            follow.map(|event| {
                let mut line = Vec::with_capacity(event.json().len() + 1);
                line.extend_from_slice(event.json());
                line.push(b'\n');
                Bytes::from(line)
            }),
        ),
        #[cfg(feature = "proto")]
        Format::Proto => binary(
            format,
            follow.filter_map(|event| async move { proto(&event) }),
        ),
    }
}

/// One event as a length-prefixed protobuf frame; an event the log holds as JSON it cannot read
/// is skipped (and logged).
#[cfg(feature = "proto")]
fn proto(event: &LoggedEvent) -> Option<Bytes> {
    match event.event() {
        Ok(typed) => {
            let mut frame = Vec::new();
            crate::agui::proto::encode_framed(&typed, &mut frame);
            Some(Bytes::from(frame))
        }
        Err(error) => {
            tracing::error!(seq = event.seq, %error, "a logged event could not be sent as protobuf");
            None
        }
    }
}

/// A streamed response of `format`'s content type.
fn binary<S>(format: Format, chunks: S) -> Response
where
    S: futures_core::Stream<Item = Bytes> + Send + 'static,
{
    let mut headers = stream_headers();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(format.content_type()),
    );
    let body = Body::from_stream(chunks.map(Ok::<_, Infallible>));
    (headers, body).into_response()
}
