//! [`CostLayer`]: what each model step cost, from a table of prices per model.
//!
//! The layer puts a [`Cost`] on every [`ModelEvent::Usage`] of a model it has prices for (by
//! the usage's [`model`](Usage::model), which the providers set), so that it reaches everything
//! that reads usage: AG-UI clients (the `CUSTOM` event `agent_tower.cost` before `RUN_FINISHED`,
//! `{total, models: [{provider, model, cost}]}`: AG-UI 1.0's `usage` has no cost field, and its
//! clients strip fields they do not know), ACP `usage_update.cost` (the session's total), the
//! `chat` span (`agent_tower.cost_usd`), the metric `agent_tower_model_cost_usd_total`, and a
//! [`BudgetLayer`](crate::model::budget::BudgetLayer) outside it.
//!
//! ```
//! use agent_tower::model::{cost::{CostLayer, PriceTable, Prices}, scripted::ScriptedModel};
//! use tower::ServiceBuilder;
//!
//! let prices = PriceTable::published().price("my-finetune", Prices::new(0.5, 2.0));
//! let model = ServiceBuilder::new()
//!     .layer(CostLayer::new(prices))
//!     .service(ScriptedModel::new());
//! # let _ = model;
//! ```

mod money;

pub use money::Cost;

use std::{
    pin::Pin,
    sync::Arc,
    task::{Context, Poll, ready},
};

use futures_core::Stream;
use pin_project_lite::pin_project;
use tower_layer::Layer;
use tower_service::Service;

use super::{ModelEvent, ModelRequest, ModelService, Usage};
use crate::stream::wrap::{Wrap, response_future};

/// A model's prices, in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Prices {
    input: f64,
    output: f64,
    cached_input: Option<f64>,
    cache_write: Option<f64>,
}

impl Prices {
    /// `input` and `output` dollars per million tokens; reasoning tokens are output tokens.
    #[must_use]
    pub fn new(input: f64, output: f64) -> Self {
        Self {
            input,
            output,
            cached_input: None,
            cache_write: None,
        }
    }

    /// The price of input tokens read from the provider's cache (else the input price).
    #[must_use]
    pub fn cached_input(mut self, price: f64) -> Self {
        self.cached_input = Some(price);
        self
    }

    /// The price of input tokens written to the provider's cache (else the input price).
    #[must_use]
    pub fn cache_write(mut self, price: f64) -> Self {
        self.cache_write = Some(price);
        self
    }

    /// What `usage` costs at these prices. Its cached and cache-written tokens are parts of its
    /// input tokens, priced at their own rates.
    #[must_use]
    pub fn cost(&self, usage: &Usage) -> Cost {
        let cached = usage.cached_input_tokens.unwrap_or(0);
        let written = usage.cache_write_input_tokens.unwrap_or(0);
        let fresh = usage.input_tokens.saturating_sub(cached + written);
        let dollars = [
            (fresh, self.input),
            (cached, self.cached_input.unwrap_or(self.input)),
            (written, self.cache_write.unwrap_or(self.input)),
            (usage.output_tokens, self.output),
        ]
        .iter()
        .map(|&(tokens, per_million)| tokens as f64 * per_million / 1e6)
        .sum();
        Cost::from_usd(dollars)
    }
}

/// Prices by model name. A model takes the prices of the longest name its own starts with, so
/// that `claude-sonnet-4-5-20250929` is priced as `claude-sonnet-4-5` and `gpt-4.1-mini` is not
/// priced as `gpt-4.1`.
#[derive(Debug, Clone, Default)]
pub struct PriceTable {
    prices: Vec<(String, Prices)>,
}

impl PriceTable {
    /// No prices.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// The providers' published list prices of common models, copied on 2026-11-01 (Gemini's at
    /// prompts up to 200,000 tokens, without cache prices: cached tokens count at the input
    /// price). Prices change: override them with [`price`](Self::price).
    #[must_use]
    pub fn published() -> Self {
        let openai = |input, output, cached| Prices::new(input, output).cached_input(cached);
        let anthropic = |input, output, read, write| {
            Prices::new(input, output)
                .cached_input(read)
                .cache_write(write)
        };
        let table = [
            ("gpt-5", openai(1.25, 10.0, 0.125)),
            ("gpt-5-mini", openai(0.25, 2.0, 0.025)),
            ("gpt-5-nano", openai(0.05, 0.40, 0.005)),
            ("gpt-4.1", openai(2.0, 8.0, 0.50)),
            ("gpt-4.1-mini", openai(0.40, 1.60, 0.10)),
            ("gpt-4.1-nano", openai(0.10, 0.40, 0.025)),
            ("gpt-4o", openai(2.50, 10.0, 1.25)),
            ("gpt-4o-mini", openai(0.15, 0.60, 0.075)),
            ("claude-opus-4", anthropic(15.0, 75.0, 1.50, 18.75)),
            ("claude-sonnet-4", anthropic(3.0, 15.0, 0.30, 3.75)),
            ("claude-haiku-4-5", anthropic(1.0, 5.0, 0.10, 1.25)),
            ("claude-3-5-haiku", anthropic(0.80, 4.0, 0.08, 1.0)),
            ("gemini-2.5-pro", Prices::new(1.25, 10.0)),
            ("gemini-2.5-flash", Prices::new(0.30, 2.50)),
            ("gemini-2.5-flash-lite", Prices::new(0.10, 0.40)),
        ];
        table
            .into_iter()
            .fold(Self::new(), |table, (model, prices)| {
                table.price(model, prices)
            })
    }

    /// `model`'s prices, replacing any it had.
    #[must_use]
    pub fn price(mut self, model: impl Into<String>, prices: Prices) -> Self {
        let model = model.into();
        self.prices.retain(|(name, _)| *name != model);
        self.prices.push((model, prices));
        self
    }

    /// The prices of `model`: those of the longest name it starts with.
    #[must_use]
    pub fn get(&self, model: &str) -> Option<&Prices> {
        self.prices
            .iter()
            .filter(|(name, _)| model.starts_with(name.as_str()))
            .max_by_key(|(name, _)| name.len())
            .map(|(_, prices)| prices)
    }
}

/// Puts the cost of each step on its usage; see the [module docs](self).
#[derive(Debug, Clone)]
pub struct CostLayer {
    table: Arc<PriceTable>,
    model: Option<Arc<str>>,
}

impl CostLayer {
    /// Prices from `table`.
    #[must_use]
    pub fn new(table: PriceTable) -> Self {
        Self {
            table: Arc::new(table),
            model: None,
        }
    }

    /// The model's name when its usage names none (a service of your own).
    #[must_use]
    pub fn model(mut self, model: impl Into<Arc<str>>) -> Self {
        self.model = Some(model.into());
        self
    }
}

impl<S> Layer<S> for CostLayer {
    type Service = Costed<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Costed {
            inner,
            pricing: self.clone(),
        }
    }
}

/// The service of [`CostLayer`].
#[derive(Debug, Clone)]
pub struct Costed<S> {
    inner: S,
    pricing: CostLayer,
}

impl<S> Costed<S> {
    crate::inner_service!();
}

impl<S: ModelService> Service<ModelRequest> for Costed<S> {
    type Response = CostedStream<S::Events>;
    type Error = S::Error;
    type Future = CostedFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: ModelRequest) -> Self::Future {
        CostedFuture::new(self.inner.call(request), self.pricing.clone())
    }
}

impl<St, E> Wrap<St, E> for CostLayer {
    type Output = Result<CostedStream<St>, E>;

    fn wrap(self, result: Result<St, E>) -> Self::Output {
        result.map(|inner| CostedStream {
            inner,
            pricing: self,
        })
    }
}

response_future! {
    /// The future of [`Costed`].
    pub struct CostedFuture<F> = CostLayer;
    impl<F, St, E> Future for CostedFuture<F>
    where [F: Future<Output = Result<St, E>>]
    { type Output = Result<CostedStream<St>, E>; }
}

pin_project! {
    /// A model stream whose usage carries its cost; see [`CostLayer`].
    #[derive(Debug)]
    pub struct CostedStream<St> {
        #[pin]
        inner: St,
        pricing: CostLayer,
    }
}

impl<St, E> Stream for CostedStream<St>
where
    St: Stream<Item = Result<ModelEvent, E>>,
{
    type Item = Result<ModelEvent, E>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.project();
        let mut item = ready!(this.inner.poll_next(cx));
        if let Some(Ok(ModelEvent::Usage(usage))) = &mut item {
            let model = usage.model.as_deref().or(this.pricing.model.as_deref());
            if let Some(prices) = model.and_then(|m| this.pricing.table.get(m)) {
                usage.cost = Some(prices.cost(usage));
            }
        }
        Poll::Ready(item)
    }
}

#[cfg(test)]
mod tests {
    use futures_util::StreamExt;
    use tower::ServiceExt;

    use super::*;
    use crate::model::{FinishReason, test_request as request};

    #[test]
    fn the_longest_matching_name_prices_a_model() {
        let table = PriceTable::published();
        let sonnet = table.get("claude-sonnet-4-5-20250929").unwrap();
        assert_eq!(
            sonnet,
            &Prices::new(3.0, 15.0).cached_input(0.30).cache_write(3.75)
        );
        assert_eq!(table.get("gpt-4.1-mini").unwrap().input, 0.40);
        assert_eq!(table.get("gpt-4.1").unwrap().input, 2.0);
        assert!(table.get("llama-3").is_none());
        let mine = table.price("gpt-4.1", Prices::new(1.0, 1.0));
        assert_eq!(mine.get("gpt-4.1-2025-04-14").unwrap().input, 1.0);
    }

    #[test]
    fn cached_and_written_tokens_are_parts_of_the_input_at_their_own_prices() {
        let usage = Usage {
            input_tokens: 1_000_000,
            output_tokens: 100_000,
            cached_input_tokens: Some(600_000),
            cache_write_input_tokens: Some(100_000),
            ..Usage::default()
        };
        let prices = Prices::new(3.0, 15.0).cached_input(0.30).cache_write(3.75);
        // 300k fresh × 3 + 600k × 0.30 + 100k × 3.75 + 100k out × 15, per million.
        assert_eq!(
            prices.cost(&usage),
            Cost::from_usd(0.9 + 0.18 + 0.375 + 1.5)
        );
        assert_eq!(
            Prices::new(1.0, 2.0).cost(&usage),
            Cost::from_usd(1.0 + 0.2),
            "without cache prices, every input token at the input price"
        );
    }

    #[tokio::test]
    async fn a_priced_models_usage_carries_its_cost() {
        let usage = Usage {
            input_tokens: 2_000,
            output_tokens: 1_000,
            model: Some("gpt-4.1-mini".into()),
            ..Usage::default()
        };
        let model = tower::service_fn(move |_: ModelRequest| {
            let usage = usage.clone();
            async move {
                Ok::<_, std::convert::Infallible>(futures_util::stream::iter([
                    Ok::<_, std::convert::Infallible>(ModelEvent::Usage(usage)),
                    Ok(ModelEvent::Finish(FinishReason::Stop)),
                ]))
            }
        });
        let costed = CostLayer::new(PriceTable::published()).layer(model);
        let events: Vec<_> = costed.oneshot(request()).await.unwrap().collect().await;
        let Ok(ModelEvent::Usage(usage)) = &events[0] else {
            panic!("{events:?}")
        };
        assert_eq!(usage.cost, Some(Cost::from_usd(0.0008 + 0.0016)));
    }
}
