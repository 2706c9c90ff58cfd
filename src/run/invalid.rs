//! A run refused for what it was asked.

use std::{error::Error as StdError, fmt};

use crate::BoxError;

/// A run refused because what it was asked cannot be served: an option out of range, a malformed
/// forwarded property. The client's mistake, not the agent's. A protocol layer wraps such an
/// error in it, and [`MapErrorLayer`](crate::map_error::MapErrorLayer)'s default classifier reads
/// it as `invalid_request` whatever the protocol. It displays as the error it wraps.
///
/// ```
/// use agent_tower::run::InvalidRequest;
///
/// let error = InvalidRequest::new("forwardedProps.mode: unknown");
/// assert_eq!(error.to_string(), "forwardedProps.mode: unknown");
/// ```
#[derive(Debug)]
pub struct InvalidRequest(BoxError);

impl InvalidRequest {
    /// `why` the request cannot be served.
    pub fn new(why: impl Into<BoxError>) -> Self {
        Self(why.into())
    }
}

impl fmt::Display for InvalidRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl StdError for InvalidRequest {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        Some(&*self.0)
    }
}
