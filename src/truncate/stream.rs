use std::{
    fmt,
    pin::Pin,
    task::{Context, Poll},
};

use futures_core::Stream;
use pin_project_lite::pin_project;

use super::cut::next_piece_end;
use crate::{
    delta::Delta,
    id::{MessageId, ToolCallId},
    model::ModelEvent,
};

/// Whose delta is being split.
#[derive(Debug)]
enum Owner {
    Text(MessageId),
    Reasoning(MessageId),
    Args(ToolCallId),
}

/// A delta being handed out piece by piece.
#[derive(Debug)]
struct Splitting {
    owner: Owner,
    text: Delta,
    offset: usize,
}

impl Splitting {
    fn next(&mut self, max: usize) -> Option<ModelEvent> {
        if self.offset >= self.text.len() {
            return None;
        }
        let end = next_piece_end(&self.text, self.offset, max);
        let delta = Delta::from(&self.text[self.offset..end]);
        self.offset = end;
        Some(match &self.owner {
            Owner::Text(id) => ModelEvent::TextDelta {
                message_id: id.clone(),
                delta,
            },
            Owner::Reasoning(id) => ModelEvent::ReasoningDelta {
                message_id: id.clone(),
                delta,
            },
            Owner::Args(id) => ModelEvent::ToolCallArgs {
                id: id.clone(),
                delta,
            },
        })
    }
}

pin_project! {
    /// A model stream whose deltas over the limit are split into several, on character
    /// boundaries; the concatenation of the pieces is the original delta.
    #[must_use = "streams do nothing unless polled"]
    pub struct ResponseStream<St> {
        #[pin]
        inner: St,
        max_delta: usize,
        splitting: Option<Splitting>,
    }
}

impl<St> ResponseStream<St> {
    pub(crate) fn new(inner: St, max_delta: usize) -> Self {
        Self {
            inner,
            max_delta,
            splitting: None,
        }
    }
}

impl<St, E> Stream for ResponseStream<St>
where
    St: Stream<Item = Result<ModelEvent, E>>,
{
    type Item = Result<ModelEvent, E>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.project();
        if let Some(splitting) = this.splitting.as_mut() {
            if let Some(piece) = splitting.next(*this.max_delta) {
                return Poll::Ready(Some(Ok(piece)));
            }
            *this.splitting = None;
        }
        let item = match this.inner.poll_next(cx) {
            Poll::Ready(Some(Ok(event))) => event,
            other => return other,
        };
        let (owner, text) = match item {
            ModelEvent::TextDelta { message_id, delta } if delta.len() > *this.max_delta => {
                (Owner::Text(message_id), delta)
            }
            ModelEvent::ReasoningDelta { message_id, delta } if delta.len() > *this.max_delta => {
                (Owner::Reasoning(message_id), delta)
            }
            ModelEvent::ToolCallArgs { id, delta } if delta.len() > *this.max_delta => {
                (Owner::Args(id), delta)
            }
            event => return Poll::Ready(Some(Ok(event))),
        };
        let splitting = this.splitting.insert(Splitting {
            owner,
            text,
            offset: 0,
        });
        Poll::Ready(splitting.next(*this.max_delta).map(Ok))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let (low, _) = self.inner.size_hint();
        (low, None)
    }
}

impl<St> fmt::Debug for ResponseStream<St> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseStream")
            .field("inner", &std::any::type_name::<St>())
            .field("max_delta", &self.max_delta)
            .field("splitting", &self.splitting.is_some())
            .finish()
    }
}
