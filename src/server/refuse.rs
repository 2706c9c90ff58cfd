//! What the guard and the auth layers share: a request is let through to the inner service, or
//! answered at once.

use axum::{extract::Request, response::Response};
use futures_util::future::{Either, Ready, ready};
use tower::Service;

/// The future of a service that may answer before its inner one.
pub(crate) type RefuseFuture<S> = Either<
    Ready<Result<Response, <S as Service<Request>>::Error>>,
    <S as Service<Request>>::Future,
>;

/// Calls `inner` with `request` when `verdict` lets it through, else answers with the refusal.
pub(crate) fn call_or_refuse<S>(
    inner: &mut S,
    request: Request,
    verdict: Result<(), Response>,
) -> RefuseFuture<S>
where
    S: Service<Request, Response = Response>,
{
    match verdict {
        Ok(()) => Either::Right(inner.call(request)),
        Err(refusal) => Either::Left(ready(Ok(refusal))),
    }
}
