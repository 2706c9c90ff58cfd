//! Response futures of [`MapError`](super::MapError).

use std::sync::Arc;

use super::{ClassifyError, Mapper, ResponseStream};
use crate::{
    BoxError,
    stream::wrap::{Wrap, response_future},
    tool::{ToolOutput, ToolReply},
};

/// Classifies a run's error.
pub(crate) struct ClassifyRun<C>(pub(crate) Arc<Mapper<C>>);

impl<T, E: Into<BoxError>, C: ClassifyError> Wrap<T, E> for ClassifyRun<C> {
    type Output = Result<T, BoxError>;

    fn wrap(self, result: Result<T, E>) -> Self::Output {
        result.map_err(|e| self.0.classified(e.into()))
    }
}

response_future! {
    /// An agent's result, its error classified.
    pub struct RunResponseFuture<F, C> = ClassifyRun<C>;
    impl<F, T, E, C> Future for RunResponseFuture<F, C>
    where [F: Future<Output = Result<T, E>>, E: Into<BoxError>, C: ClassifyError]
    { type Output = Result<T, BoxError>; }
}

/// Classifies the model call's error, and the errors of its stream.
pub(crate) struct ClassifyStream<C>(pub(crate) Arc<Mapper<C>>);

impl<St, E: Into<BoxError>, C: ClassifyError> Wrap<St, E> for ClassifyStream<C> {
    type Output = Result<ResponseStream<St, C>, BoxError>;

    fn wrap(self, result: Result<St, E>) -> Self::Output {
        match result {
            Ok(stream) => Ok(ResponseStream::new(stream, self.0)),
            Err(error) => Err(self.0.classified(error.into())),
        }
    }
}

response_future! {
    /// A model's stream whose call error and item errors are classified.
    pub struct ModelResponseFuture<F, C> = ClassifyStream<C>;
    impl<F, St, E, C> Future for ModelResponseFuture<F, C>
    where [F: Future<Output = Result<St, E>>, E: Into<BoxError>, C: ClassifyError]
    { type Output = Result<ResponseStream<St, C>, BoxError>; }
}

/// Turns a tool's failure into an error result the model reads.
pub(crate) struct FailureAsResult<C>(pub(crate) Arc<Mapper<C>>);

impl<R: ToolReply, E: Into<BoxError>, C: ClassifyError> Wrap<R, E> for FailureAsResult<C> {
    type Output = Result<R, BoxError>;

    fn wrap(self, result: Result<R, E>) -> Self::Output {
        Ok(result.unwrap_or_else(|error| {
            let class = self.0.classifier.classify(&*error.into());
            let (_, message) = class.run_error(self.0.detail);
            R::from(ToolOutput::error(message))
        }))
    }
}

response_future! {
    /// A tool's answer; a failure becomes an error result the model reads (an interrupt is an
    /// answer, and stays one).
    pub struct ToolResponseFuture<F, C> = FailureAsResult<C>;
    impl<F, R, E, C> Future for ToolResponseFuture<F, C>
    where [F: Future<Output = Result<R, E>>, R: ToolReply, E: Into<BoxError>, C: ClassifyError]
    { type Output = Result<R, BoxError>; }
}
