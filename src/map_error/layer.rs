use std::{fmt, sync::Arc};

use tower_layer::Layer;

use super::{ClassifyError, DefaultClassifier, Detail, MapError, Mapper};

/// Classifies errors at the edge; see the [module docs](super).
#[must_use]
pub struct MapErrorLayer<C = DefaultClassifier> {
    mapper: Arc<Mapper<C>>,
}

impl MapErrorLayer {
    /// The default classifier at [`Detail::Message`].
    pub fn new() -> Self {
        Self {
            mapper: Arc::new(Mapper {
                classifier: Arc::new(DefaultClassifier::new()),
                detail: Detail::Message,
            }),
        }
    }
}

impl Default for MapErrorLayer {
    fn default() -> Self {
        Self::new()
    }
}

impl<C> MapErrorLayer<C> {
    /// Classifies with `classifier` instead.
    pub fn classifier<D: ClassifyError>(self, classifier: D) -> MapErrorLayer<D> {
        MapErrorLayer {
            mapper: Arc::new(Mapper {
                classifier: Arc::new(classifier),
                detail: self.mapper.detail,
            }),
        }
    }

    /// How much of an error clients see. Setting it on a clone changes that clone only.
    pub fn detail(mut self, detail: Detail) -> Self {
        Arc::make_mut(&mut self.mapper).detail = detail;
        self
    }
}

impl<C> Clone for MapErrorLayer<C> {
    fn clone(&self) -> Self {
        Self {
            mapper: self.mapper.clone(),
        }
    }
}

impl<C> fmt::Debug for MapErrorLayer<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MapErrorLayer")
            .field("mapper", &self.mapper)
            .finish()
    }
}

impl<S, C> Layer<S> for MapErrorLayer<C> {
    type Service = MapError<S, C>;

    fn layer(&self, inner: S) -> Self::Service {
        MapError::new(inner, self.mapper.clone())
    }
}
