use std::{
    fmt,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use futures_core::Stream;
use futures_util::StreamExt;
use pin_project_lite::pin_project;
use tower::ServiceExt;
use tower_service::Service;

use super::{Finding, ProcessRequest, layer::Config, status, write_all};

/// The most findings written in one change of the state.
const FINDINGS_PER_CHANGE: usize = 1024;
use crate::{
    BoxError,
    context::{Background, SharedState},
    id::MessageId,
    model::ModelEvent,
    run::ContextEntry,
};

/// What a step needs to hand its messages over.
pub(crate) struct Schedule<P> {
    pub(crate) processor: P,
    pub(crate) config: Arc<Config>,
    pub(crate) state: SharedState,
    pub(crate) background: Background,
    pub(crate) context: Arc<[ContextEntry]>,
}

/// A message's text so far.
struct Collected {
    id: MessageId,
    text: String,
    too_large: bool,
}

pin_project! {
    /// A model stream, passed through unchanged, whose messages are processed once it ends.
    #[must_use = "streams do nothing unless polled"]
    pub struct ResponseStream<St, P> {
        #[pin]
        inner: St,
        schedule: Option<Schedule<P>>,
        messages: Vec<Collected>,
    }
}

impl<St, P> ResponseStream<St, P> {
    pub(crate) fn new(inner: St, schedule: Option<Schedule<P>>) -> Self {
        Self {
            inner,
            schedule,
            messages: Vec::new(),
        }
    }
}

impl<St, E, P, R> Stream for ResponseStream<St, P>
where
    St: Stream<Item = Result<ModelEvent, E>>,
    P: Service<ProcessRequest, Response = R> + Clone + Send + 'static,
    P::Error: Into<BoxError>,
    P::Future: Send + 'static,
    R: Stream<Item = Finding> + Send + 'static,
{
    type Item = Result<ModelEvent, E>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.project();
        let item = this.inner.poll_next(cx);
        let Some(schedule) = this.schedule.as_ref() else {
            return item;
        };
        match &item {
            Poll::Ready(Some(Ok(ModelEvent::TextDelta { message_id, delta }))) => {
                let at = match this.messages.iter().position(|m| &m.id == message_id) {
                    Some(at) => at,
                    None => {
                        this.messages.push(Collected {
                            id: message_id.clone(),
                            text: String::new(),
                            too_large: false,
                        });
                        this.messages.len() - 1
                    }
                };
                let message = &mut this.messages[at];
                if message.text.len() + delta.len() > schedule.config.max_text {
                    message.too_large = true;
                    message.text = String::new();
                } else if !message.too_large {
                    message.text.push_str(delta);
                }
            }
            // A failed step's text is incomplete: nothing to process.
            Poll::Ready(Some(Err(_))) => *this.schedule = None,
            Poll::Ready(None) => {
                let schedule = this.schedule.take().expect("checked above");
                for message in this.messages.drain(..) {
                    hand_over(&schedule, message);
                }
            }
            _ => {}
        }
        item
    }
}

fn hand_over<P, R>(schedule: &Schedule<P>, message: Collected)
where
    P: Service<ProcessRequest, Response = R> + Clone + Send + 'static,
    P::Error: Into<BoxError>,
    P::Future: Send + 'static,
    R: Stream<Item = Finding> + Send + 'static,
{
    let (state, key) = (schedule.state.clone(), schedule.config.key.clone());
    let id = message.id.to_string();
    if !message.too_large && !(schedule.config.when)(&message.text) {
        return;
    }
    if message.too_large {
        status(&state, &key, &id, "too_large", None);
        return;
    }
    if !super::is_safe(&id) {
        status(&state, &key, &id, "refused", None);
        return;
    }
    status(&state, &key, &id, "pending", None);
    let request = ProcessRequest {
        message_id: message.id,
        text: message.text,
        context: schedule.context.clone(),
    };
    let processor = schedule.processor.clone();
    schedule.background.spawn(async move {
        // If the run stops waiting, the guard says so.
        let mut guard = Pending {
            state: state.clone(),
            key: key.clone(),
            id: id.clone(),
            armed: true,
        };
        let answered = processor
            .oneshot(request)
            .await
            .map_err(|error| error.into().to_string());
        match answered {
            Err(error) => status(&state, &key, &id, "error", Some(error)),
            Ok(findings) => {
                // What is ready goes in together; between groups the task yields, so that the
                // background timeout can stop a processor that finds without end.
                let mut findings = std::pin::pin!(findings.ready_chunks(FINDINGS_PER_CHANGE));
                while let Some(group) = findings.next().await {
                    write_all(&state, &key, &id, group);
                    tokio::task::yield_now().await;
                }
                status(&state, &key, &id, "done", None);
            }
        }
        guard.armed = false;
    });
}

/// Marks the message `timeout` if its work is dropped before it ends.
struct Pending {
    state: SharedState,
    key: String,
    id: String,
    armed: bool,
}

impl Drop for Pending {
    fn drop(&mut self) {
        if self.armed {
            status(&self.state, &self.key, &self.id, "timeout", None);
        }
    }
}

impl<St, P> fmt::Debug for ResponseStream<St, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseStream")
            .field("messages", &self.messages.len())
            .field("scheduled", &self.schedule.is_some())
            .finish()
    }
}
