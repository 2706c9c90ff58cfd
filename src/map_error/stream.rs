use std::{
    fmt,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use futures_core::Stream;
use pin_project_lite::pin_project;

use super::{ClassifyError, Mapper};
use crate::{BoxError, model::ModelEvent};

pin_project! {
    /// A model stream whose item errors are classified.
    #[must_use = "streams do nothing unless polled"]
    pub struct ResponseStream<St, C> {
        #[pin]
        inner: St,
        mapper: Arc<Mapper<C>>,
    }
}

impl<St, C> ResponseStream<St, C> {
    pub(crate) fn new(inner: St, mapper: Arc<Mapper<C>>) -> Self {
        Self { inner, mapper }
    }
}

impl<St, E, C> Stream for ResponseStream<St, C>
where
    St: Stream<Item = Result<ModelEvent, E>>,
    E: Into<BoxError>,
    C: ClassifyError,
{
    type Item = Result<ModelEvent, BoxError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.project();
        this.inner
            .poll_next(cx)
            .map(|item| item.map(|r| r.map_err(|e| this.mapper.classified(e.into()))))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

impl<St, C> fmt::Debug for ResponseStream<St, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseStream")
            .field("inner", &std::any::type_name::<St>())
            .finish_non_exhaustive()
    }
}
