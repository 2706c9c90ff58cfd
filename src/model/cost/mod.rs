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

/// Prices by model name.
///
/// A model takes the prices of its own name, else of its name without a release date: a dated
/// snapshot (`claude-sonnet-4-5-20250929`, `claude-sonnet-4-5@20250929`, `gpt-4.1-2025-04-14`)
/// or `-latest` is priced as the model it dates, unless the table names it. A name is never
/// priced as another it merely starts with (`claude-opus-4-5` is not `claude-opus-4`, which costs
/// three times as much); a name ending in `*` prices every model that starts with the rest
/// (`qwen3-*`), the longest such name winning, after exact and dated names.
///
/// ```
/// use agent_tower::model::cost::{PriceTable, Prices};
///
/// let table = PriceTable::published().price("qwen3-*", Prices::new(0.0, 0.0));
/// assert_eq!(table.get("claude-opus-4-5-20251101"), table.get("claude-opus-4-5"));
/// assert_ne!(table.get("claude-opus-4-5"), table.get("claude-opus-4"));
/// assert_eq!(table.get("qwen3-8b"), Some(&Prices::new(0.0, 0.0)));
/// assert_eq!(table.get("gpt-4.1-mini-finetune"), None);
/// ```
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
            ("claude-opus-4-5", anthropic(5.0, 25.0, 0.50, 6.25)),
            ("claude-opus-4-1", anthropic(15.0, 75.0, 1.50, 18.75)),
            ("claude-opus-4", anthropic(15.0, 75.0, 1.50, 18.75)),
            ("claude-sonnet-4-5", anthropic(3.0, 15.0, 0.30, 3.75)),
            ("claude-sonnet-4", anthropic(3.0, 15.0, 0.30, 3.75)),
            ("claude-3-7-sonnet", anthropic(3.0, 15.0, 0.30, 3.75)),
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

    /// The prices of `model`: those of its name, else of its name without its release date,
    /// else of the longest `*` name it starts with.
    #[must_use]
    pub fn get(&self, model: &str) -> Option<&Prices> {
        let named = |model: &str| {
            self.prices
                .iter()
                .find(|(name, _)| name == model)
                .map(|(_, prices)| prices)
        };
        named(model)
            .or_else(|| undated(model).and_then(named))
            .or_else(|| {
                self.prices
                    .iter()
                    .filter_map(|(name, prices)| Some((name.strip_suffix('*')?, prices)))
                    .filter(|(start, _)| model.starts_with(start))
                    .max_by_key(|(start, _)| start.len())
                    .map(|(_, prices)| prices)
            })
    }
}

/// `model` without its release date (`-20250929`, `@20250929`, `-2025-04-14`) or `-latest`.
fn undated(model: &str) -> Option<&str> {
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if let Some(base) = model.strip_suffix("-latest") {
        return Some(base);
    }
    if let Some((base, date)) = model.rsplit_once(['-', '@'])
        && date.len() == 8
        && digits(date)
    {
        return Some(base);
    }
    // `-YYYY-MM-DD`: dashes at 0, 5 and 8, digits elsewhere.
    let (base, date) = model.split_at_checked(model.len().checked_sub(11)?)?;
    let dated = date.bytes().enumerate().all(|(at, b)| match at {
        0 | 5 | 8 => b == b'-',
        _ => b.is_ascii_digit(),
    });
    dated.then_some(base)
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
    fn a_model_is_priced_by_its_name_or_the_model_its_date_names() {
        let table = PriceTable::published();
        let sonnet = Prices::new(3.0, 15.0).cached_input(0.30).cache_write(3.75);
        for name in [
            "claude-sonnet-4-5",
            "claude-sonnet-4-5-20250929",
            "claude-sonnet-4-5@20250929",
        ] {
            assert_eq!(table.get(name), Some(&sonnet), "{name}");
        }
        let opus = |name| table.get(name).map(|prices| (prices.input, prices.output));
        assert_eq!(opus("claude-opus-4-5-20251101"), Some((5.0, 25.0)));
        assert_eq!(opus("claude-opus-4-20250514"), Some((15.0, 75.0)));
        assert_eq!(opus("claude-3-5-haiku-latest"), Some((0.80, 4.0)));
        assert_eq!(table.get("gpt-4.1-mini-2025-04-14").unwrap().input, 0.40);
        assert_eq!(table.get("gpt-4.1-2025-04-14").unwrap().input, 2.0);
        for unknown in [
            "llama-3",
            "gpt-4.1-turbo",
            "claude-opus-4-7",
            "gpt-5-2025-08",
            "x-1234567",
        ] {
            assert_eq!(
                table.get(unknown),
                None,
                "{unknown} is priced as a model it is not"
            );
        }
        let mine = table
            .price("gpt-4.1", Prices::new(1.0, 1.0))
            .price("gpt-4.1-2025-04-14", Prices::new(2.0, 2.0))
            .price("llama*", Prices::new(0.0, 0.0))
            .price("llama-3*", Prices::new(0.1, 0.1));
        assert_eq!(mine.get("gpt-4.1").unwrap().input, 1.0);
        assert_eq!(
            mine.get("gpt-4.1-2025-04-14").unwrap().input,
            2.0,
            "a dated name of its own"
        );
        assert_eq!(
            mine.get("llama-3.1-8b").unwrap().input,
            0.1,
            "the longest start"
        );
        assert_eq!(mine.get("llama-2").unwrap().input, 0.0);
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
