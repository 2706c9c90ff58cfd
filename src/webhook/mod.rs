//! Webhooks: a run's end, and a run that waits for a person, told to a URL, signed after the
//! [Standard Webhooks](https://www.standardwebhooks.com/) specification, at least once.
//!
//! [`Webhooks`] says which URLs hear of which runs (every run's, for the deployment; a run's
//! own, named in its request's `forwardedProps.webhook.url`, when the operator allows its
//! prefix); set on the engine with [`Runs::notify`](crate::runs::Runs::notify), it leaves a
//! notice with each run's end, kept in the same write as the end. A [`Deliverer`] sends them
//! from the log's [`Outbox`]: every instance on a store runs one, each notice is held by one at
//! a time, and a notice whose instance died is sent again by another once its hold ran out.
//!
//! What a receiver gets: a `POST` of `application/json`,
//!
//! ```json
//! {"type": "run.interrupted", "timestamp": "2026-11-30T10:00:00.123Z",
//!  "data": {"runId": "…", "threadId": "…", "status": "interrupted", "principal": "alice",
//!           "interrupts": [{"id": "…", "toolCallId": "…", "toolName": "delete_file",
//!                           "expiresAt": "…"}],
//!           "run": "/runs/…"}}
//! ```
//!
//! (`run.finished`, `run.failed` with `error: {code, message}`, `run.cancelled`,
//! `run.interrupted`), with the headers `webhook-id` (the same at every attempt: a second
//! delivery is known by it), `webhook-timestamp` (this attempt's, in seconds) and
//! `webhook-signature` (`v1,` and the base64 HMAC-SHA256 of `id.timestamp.body` with the
//! secret), which the specification's libraries check. An answer other than 2xx, or none within
//! the [timeout](Deliverer::timeout), is tried again on the [schedule](Deliverer::schedule);
//! after its last attempt the notice is given up (and listed as `failed`). A notice is sent
//! within a second of its run's end.
//!
//! ```
//! use agent_tower::{
//!     agent::Agent, model::scripted::ScriptedModel, runs::Runs, tool::ToolRouter,
//!     webhook::{Deliverer, Secret, Webhooks},
//! };
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let webhooks = Webhooks::new()
//!     .url("https://hooks.example.com/agent".parse().unwrap())
//!     .allow("https://hooks.example.com/runs/".parse().unwrap());
//! let runs = Runs::new(Agent::new(ScriptedModel::new(), ToolRouter::new())).notify(webhooks);
//! // Every instance on the log sends its notices, until it stops.
//! let secret: Secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".parse().unwrap();
//! let stop = tokio_util::sync::CancellationToken::new();
//! tokio::spawn(Deliverer::new(runs.run_log().clone(), secret).run(stop.clone()));
//! # stop.cancel();
//! # }
//! ```

use std::{fmt, str::FromStr, sync::Arc, time::Duration};

use base64::{Engine, engine::general_purpose::STANDARD};
use hmac::{Hmac, Mac};
pub use reqwest::Url;
use serde_json::{Value, json};
use sha2::Sha256;
use tokio_util::sync::CancellationToken;

use crate::runs::{Claimed, Notice, Notify, Outbox, RunEnding, RunLog, RunStatus, Settle};

/// The secret webhooks are signed with: `whsec_` and the base64 of its bytes, as the Standard
/// Webhooks libraries take it. Its `Debug` shows nothing of it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Arc<[u8]>);

impl Secret {
    /// Signs `body`, sent as `id` at `timestamp` (seconds): the `webhook-signature` header's
    /// value, `v1,` and the base64 of the HMAC-SHA256 of `id.timestamp.body`.
    #[must_use]
    pub fn sign(&self, id: &str, timestamp: u64, body: &str) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes keys of any size");
        mac.update(format!("{id}.{timestamp}.").as_bytes());
        mac.update(body.as_bytes());
        format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(…)")
    }
}

/// A secret that is not `whsec_` and base64.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidSecret(&'static str);

impl fmt::Display for InvalidSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a webhook secret is `whsec_` and the base64 of 24 to 64 bytes: {}",
            self.0
        )
    }
}

impl std::error::Error for InvalidSecret {}

impl FromStr for Secret {
    type Err = InvalidSecret;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let encoded = text
            .trim()
            .strip_prefix("whsec_")
            .ok_or(InvalidSecret("it does not begin with `whsec_`"))?;
        let bytes = STANDARD
            .decode(encoded)
            .map_err(|_| InvalidSecret("what follows `whsec_` is not base64"))?;
        if !(24..=64).contains(&bytes.len()) {
            return Err(InvalidSecret("its key is too short or too long"));
        }
        Ok(Self(bytes.into()))
    }
}

/// A URL a webhook may not go to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidUrl(String);

impl fmt::Display for InvalidUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InvalidUrl {}

/// Which URLs hear of which runs' ends (see the [module](self)).
#[derive(Debug, Clone, Default)]
pub struct Webhooks {
    urls: Vec<Url>,
    allowed: Vec<Url>,
}

impl Webhooks {
    /// No URL yet: add the deployment's with [`url`](Self::url), the prefixes of those runs may
    /// name with [`allow`](Self::allow). (The [`Deliverer`] signs what they are sent.)
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Every run's end is told to `url` too.
    #[must_use]
    pub fn url(mut self, url: Url) -> Self {
        self.urls.push(url);
        self
    }

    /// A run may name its own webhook (`forwardedProps.webhook.url`) under `prefix`: the same
    /// scheme, host and port, and a path that begins with the prefix's.
    #[must_use]
    pub fn allow(mut self, prefix: Url) -> Self {
        self.allowed.push(prefix);
        self
    }

    /// The webhook `input` names, if any, when it is allowed.
    fn own(&self, input: &crate::agui::RunAgentInput) -> Result<Option<Url>, String> {
        let Some(named) = input
            .forwarded_props
            .as_ref()
            .and_then(|props| props.get("webhook"))
        else {
            return Ok(None);
        };
        let Some(text) = named.get("url").and_then(Value::as_str) else {
            return Err("forwardedProps.webhook: expected `{\"url\": \"https://…\"}`".to_owned());
        };
        let url = Url::parse(text)
            .map_err(|error| format!("forwardedProps.webhook.url `{text}`: {error}"))?;
        if self.allowed.iter().any(|prefix| under(&url, prefix)) {
            Ok(Some(url))
        } else {
            Err(format!(
                "forwardedProps.webhook.url `{text}` is not allowed here (the server allows a \
                 run's own webhook under: {})",
                if self.allowed.is_empty() {
                    "nothing".to_owned()
                } else {
                    self.allowed
                        .iter()
                        .map(Url::as_str)
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            ))
        }
    }
}

/// Whether `url` is under `prefix`: the same origin, and a path that begins with its.
fn under(url: &Url, prefix: &Url) -> bool {
    url.scheme() == prefix.scheme()
        && url.host_str() == prefix.host_str()
        && url.port_or_known_default() == prefix.port_or_known_default()
        && url.path().starts_with(prefix.path())
        && url.username().is_empty()
        && url.password().is_none()
}

/// Whether `url` can take webhooks: `http` or `https`, with a host.
///
/// # Errors
///
/// Why it cannot.
pub fn check_url(url: &Url) -> Result<(), InvalidUrl> {
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(InvalidUrl(format!(
            "a webhook's URL is http:// or https:// with a host, not `{url}`"
        )));
    }
    Ok(())
}

impl Notify for Webhooks {
    fn check(&self, input: &crate::agui::RunAgentInput) -> Result<(), String> {
        self.own(input).map(drop)
    }

    fn notices(&self, ending: &RunEnding<'_>) -> Vec<Notice> {
        let kind = match ending.status {
            RunStatus::Running => return Vec::new(),
            RunStatus::Finished => "run.finished",
            RunStatus::Failed => "run.failed",
            RunStatus::Cancelled => "run.cancelled",
            RunStatus::Interrupted => "run.interrupted",
        };
        let own = ending
            .input
            .and_then(|input| self.own(input).ok().flatten());
        let urls: Vec<&Url> = self.urls.iter().chain(own.as_ref()).collect();
        if urls.is_empty() {
            return Vec::new();
        }
        let body = body(kind, ending).to_string();
        urls.into_iter()
            .map(|url| Notice {
                id: format!("msg_{}", uuid::Uuid::now_v7().simple()),
                run_id: ending.run_id.clone(),
                url: url.to_string(),
                kind: kind.to_owned(),
                body: body.clone(),
            })
            .collect()
    }
}

/// What a notice of `kind` about `ending` says.
fn body(kind: &str, ending: &RunEnding<'_>) -> Value {
    let mut data = json!({
        "runId": ending.run_id,
        "threadId": ending.thread_id,
        "status": ending.status.as_str(),
        "run": format!("/runs/{}", ending.run_id),
    });
    if let Some(principal) = ending.principal {
        data["principal"] = json!(principal);
    }
    if let Some((code, message)) = ending.error {
        data["error"] = json!({"code": code, "message": message});
    }
    if !ending.interrupts.is_empty() {
        data["interrupts"] = ending
            .interrupts
            .iter()
            .map(|interrupt| {
                json!({
                    "id": interrupt.id,
                    "toolCallId": interrupt.tool_call_id,
                    "toolName": interrupt.tool_name,
                    "expiresAt": humantime::format_rfc3339_millis(interrupt.expires_at).to_string(),
                })
            })
            .collect();
    }
    json!({
        "type": kind,
        "timestamp": humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string(),
        "data": data,
    })
}

/// The waits after each failed attempt that the Standard Webhooks specification suggests: 5 s,
/// 5 min, 30 min, 2 h, 5 h, 10 h, 10 h (eight attempts over about a day and a half).
pub const SCHEDULE: [Duration; 7] = [
    Duration::from_secs(5),
    Duration::from_secs(5 * 60),
    Duration::from_secs(30 * 60),
    Duration::from_secs(2 * 3600),
    Duration::from_secs(5 * 3600),
    Duration::from_secs(10 * 3600),
    Duration::from_secs(10 * 3600),
];

/// How long one attempt may take, by default.
const ATTEMPT: Duration = Duration::from_secs(10);
/// The most notices claimed at once.
const CLAIMED: usize = 16;
/// How often the outbox is looked at when nothing wakes the deliverer.
const POLL: Duration = Duration::from_secs(1);

/// What an attempt came to, for a [`Deliverer::observer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Attempt {
    /// Delivered.
    Delivered,
    /// Not delivered; tried again later.
    Retried,
    /// Not delivered, and given up.
    Failed,
}

impl Attempt {
    /// `delivered`, `retried` or `failed`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Delivered => "delivered",
            Self::Retried => "retried",
            Self::Failed => "failed",
        }
    }
}

type Observer = Arc<dyn Fn(Attempt) + Send + Sync>;

/// Sends the notices of a log's [`Outbox`] (see the [module](self)).
#[derive(Clone)]
pub struct Deliverer {
    log: Arc<dyn RunLog>,
    secret: Secret,
    client: reqwest::Client,
    timeout: Duration,
    schedule: Vec<Duration>,
    observer: Observer,
    wake: Arc<tokio::sync::Notify>,
}

impl fmt::Debug for Deliverer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Deliverer")
            .field("timeout", &self.timeout)
            .field("schedule", &self.schedule)
            .finish_non_exhaustive()
    }
}

impl Deliverer {
    /// Sends `log`'s notices, signed with `secret`, on the default [`SCHEDULE`].
    ///
    /// # Panics
    ///
    /// When `log` keeps no notices ([`RunLog::outbox`]).
    #[must_use]
    pub fn new(log: Arc<dyn RunLog>, secret: Secret) -> Self {
        assert!(
            log.outbox().is_some(),
            "Deliverer::new: the log keeps no notices"
        );
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("agent-tower/", env!("CARGO_PKG_VERSION")))
            .build()
            .unwrap_or_default();
        Self {
            log,
            secret,
            client,
            timeout: ATTEMPT,
            schedule: SCHEDULE.to_vec(),
            observer: Arc::new(|_| {}),
            wake: Arc::default(),
        }
    }

    /// The waits after each failed attempt: one attempt more than waits in all, then the notice
    /// is given up.
    #[must_use]
    pub fn schedule(mut self, waits: Vec<Duration>) -> Self {
        self.schedule = waits;
        self
    }

    /// How long one attempt may take (default 10 s): past it, the attempt failed. A notice is
    /// this instance's for three times as long from its claim: when the instance dies meanwhile,
    /// another sends it again after that.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// How long a claimed notice is this instance's: past it, another may send it again.
    fn hold(&self) -> Duration {
        self.timeout * 3
    }

    /// Told what each attempt came to (metrics count them).
    #[must_use]
    pub fn observer(mut self, observer: impl Fn(Attempt) + Send + Sync + 'static) -> Self {
        self.observer = Arc::new(observer);
        self
    }

    /// Looks at the outbox now rather than at its next poll (a run just ended here).
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// Sends notices until `stop` fires.
    pub async fn run(self, stop: CancellationToken) {
        let outbox = self.outbox();
        loop {
            let claimed = match outbox.claim(CLAIMED, self.hold()).await {
                Ok(claimed) => claimed,
                Err(error) => {
                    tracing::warn!(%error, "could not claim the webhooks due");
                    Vec::new()
                }
            };
            let full = claimed.len() == CLAIMED;
            futures_util::future::join_all(claimed.into_iter().map(|claimed| self.send(claimed)))
                .await;
            if full {
                continue;
            }
            tokio::select! {
                () = stop.cancelled() => return,
                () = self.wake.notified() => {}
                () = tokio::time::sleep(POLL) => {}
            }
        }
    }

    fn outbox(&self) -> &dyn Outbox {
        self.log.outbox().expect("checked at construction")
    }

    /// One attempt at `claimed`, and what became of it, recorded.
    async fn send(&self, claimed: Claimed) {
        let Claimed { notice, attempt } = claimed;
        let settle = match (
            self.post(&notice).await.err(),
            self.schedule.get(attempt as usize - 1),
        ) {
            (None, _) => Settle::Delivered,
            (Some(error), Some(wait)) => Settle::Retry {
                at: std::time::SystemTime::now() + *wait,
                error,
            },
            (Some(error), None) => Settle::Failed { error },
        };
        let attempted = match &settle {
            Settle::Delivered => Attempt::Delivered,
            Settle::Retry { error, .. } => {
                tracing::info!(notice = %notice.id, url = notice.shown_url(), attempt, %error, "a webhook was not delivered: it is tried again");
                Attempt::Retried
            }
            Settle::Failed { error } => {
                tracing::warn!(notice = %notice.id, url = notice.shown_url(), attempt, %error, "a webhook was not delivered: given up");
                Attempt::Failed
            }
        };
        (self.observer)(attempted);
        match self.outbox().settle(&notice.id, &settle).await {
            Ok(()) if matches!(settle, Settle::Delivered) => {
                tracing::info!(notice = %notice.id, url = notice.shown_url(), attempt, "a webhook was delivered");
            }
            Ok(()) => {}
            // Its hold runs out: it is sent again.
            Err(error) => {
                tracing::warn!(notice = %notice.id, %error, "could not record a webhook's attempt");
            }
        }
    }

    /// Posts `notice`, signed: why it was not delivered.
    async fn post(&self, notice: &Notice) -> Result<(), String> {
        let timestamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_secs());
        let signature = self.secret.sign(&notice.id, timestamp, &notice.body);
        let response = self
            .client
            .post(&notice.url)
            .timeout(self.timeout)
            .header(http::header::CONTENT_TYPE, "application/json")
            .header("webhook-id", &notice.id)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", signature)
            .body(notice.body.clone())
            .send()
            .await
            .map_err(|error| without_url(error.without_url()))?;
        let status = response.status();
        if status.is_success() {
            Ok(())
        } else {
            Err(format!("answered {status}"))
        }
    }
}

/// What went wrong with a request (its URL taken out: a webhook's URL may carry a token), with
/// its causes.
fn without_url(error: reqwest::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_are_the_specifications() {
        // The example of the Standard Webhooks specification's libraries.
        let secret: Secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".parse().unwrap();
        let signature = secret.sign(
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1_614_265_330,
            r#"{"test": 2432232314}"#,
        );
        assert_eq!(signature, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }

    #[test]
    fn secrets_are_whsec_and_base64_and_never_shown() {
        let secret: Secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".parse().unwrap();
        assert_eq!(format!("{secret:?}"), "Secret(…)");
        for bad in [
            "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            "whsec_!!!",
            "whsec_c2hvcnQ=",
        ] {
            assert!(bad.parse::<Secret>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_runs_own_webhook_must_be_under_an_allowed_prefix() {
        let webhooks = Webhooks::new().allow("https://hooks.example.com/runs/".parse().unwrap());
        let input = |url: &str| {
            let mut input = crate::agui::RunAgentInput::new("t".into(), "r".into(), Vec::new());
            input.forwarded_props = Some(json!({"webhook": {"url": url}}));
            input
        };
        assert!(
            webhooks
                .check(&input("https://hooks.example.com/runs/7"))
                .is_ok()
        );
        for refused in [
            "https://hooks.example.com/other",
            "https://hooks.example.com.evil.test/runs/7",
            "http://hooks.example.com/runs/7",
            "https://hooks.example.com:8443/runs/7",
            "https://user@hooks.example.com/runs/7",
            "not a url",
        ] {
            let why = webhooks.check(&input(refused)).unwrap_err();
            assert!(
                why.contains("forwardedProps.webhook.url"),
                "{refused}: {why}"
            );
        }
        let plain = crate::agui::RunAgentInput::new("t".into(), "r".into(), Vec::new());
        assert!(webhooks.check(&plain).is_ok());
    }
}
