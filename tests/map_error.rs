//! MapErrorLayer: typed classification, detail levels, AG-UI and ACP renderings.

use std::{convert::Infallible, fmt, time::Duration};

use agent_tower::{
    BoxError,
    map_error::{
        AcpAnswer, AcpStopReason, Classified, ClassifyError, DefaultClassifier, Detail, ErrorClass,
        ErrorKind, MapErrorLayer,
    },
    model::{ModelError, ModelErrorKind, ModelRequest},
    run::{InvalidRequest, RunOutcome, RunRequest, StopReason},
    test_util::{MockItem, MockModel},
    tool::{ToolCall, ToolError, ToolErrorKind, ToolOutput},
};
use futures_util::StreamExt;
use serde_json::json;
use tower::{Layer, ServiceBuilder, ServiceExt, service_fn};

/// An error of ours wrapping another, to check that classification walks the chain.
#[derive(Debug)]
struct Wrapped(BoxError);

impl fmt::Display for Wrapped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("step failed")
    }
}

impl std::error::Error for Wrapped {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.0)
    }
}

fn class(error: impl Into<BoxError>) -> ErrorClass {
    let error: BoxError = error.into();
    DefaultClassifier::new().classify(&*error)
}

#[tokio::test(start_paused = true)]
async fn the_default_classifier_knows_types_not_words() {
    // tower's own errors, produced by tower's own middleware.
    let slow = ServiceBuilder::new()
        .timeout(Duration::from_secs(1))
        .service_fn(|()| std::future::pending::<Result<(), Infallible>>());
    let elapsed = slow.oneshot(()).await.unwrap_err();
    assert_eq!(class(elapsed).kind, ErrorKind::Timeout);
    // A run refused for what it was asked, whichever protocol layer refused it.
    let invalid = class(Wrapped(Box::new(InvalidRequest::new(
        "forwardedProps.x: bad",
    ))));
    assert_eq!(invalid.kind, ErrorKind::InvalidRequest);
    let overloaded: BoxError = Box::new(tower::load_shed::error::Overloaded::new());
    let overloaded = class(overloaded);
    assert_eq!(
        (overloaded.kind, overloaded.retryable),
        (ErrorKind::RateLimited, true)
    );

    for (kind, expected, retryable) in [
        (ModelErrorKind::RateLimited, ErrorKind::RateLimited, true),
        (
            ModelErrorKind::ContextLength,
            ErrorKind::ContextLength,
            false,
        ),
        (ModelErrorKind::Auth, ErrorKind::Auth, false),
        (ModelErrorKind::Refusal, ErrorKind::Refusal, false),
        (ModelErrorKind::Transport, ErrorKind::Transport, true),
        (ModelErrorKind::StreamCut, ErrorKind::Transport, false),
        (ModelErrorKind::Timeout, ErrorKind::Timeout, false),
        (ModelErrorKind::Other, ErrorKind::Internal, false),
    ] {
        let got = class(Wrapped(Box::new(ModelError::new(kind, "x"))));
        assert_eq!((got.kind, got.retryable), (expected, retryable), "{kind:?}");
        assert_eq!(got.message, "step failed");
        assert_eq!(got.chain, vec![format!("{}: x", kind.as_str())]);
    }
    assert_eq!(
        class(ToolError::new(ToolErrorKind::PermissionDenied, "no")).kind,
        ErrorKind::PermissionDenied
    );
    assert_eq!(
        class(ToolError::new(ToolErrorKind::Failed, "no")).kind,
        ErrorKind::ToolFailed
    );

    // "limit" in a message means nothing: only types do.
    let words = class(std::io::Error::other(
        "rate limit exceeded: context length limit",
    ));
    assert_eq!(words.kind, ErrorKind::Internal);
}

#[test]
fn detail_levels_decide_what_the_client_sees() {
    let error = ModelError::new(ModelErrorKind::Transport, "upstream reset")
        .with_source(std::io::Error::other("10.0.0.7:443 refused"));
    let class = class(Wrapped(Box::new(error)));
    assert_eq!(
        class.run_error(Detail::None),
        (None, "The run failed.".to_owned())
    );
    assert_eq!(
        class.run_error(Detail::Code),
        (
            Some("transport".into()),
            "The connection to the model failed.".into()
        )
    );
    assert_eq!(
        class.run_error(Detail::Message),
        (Some("transport".into()), "step failed".into())
    );
    let (_, full) = class.run_error(Detail::Full);
    assert_eq!(
        full,
        "step failed\ncaused by: transport: upstream reset\ncaused by: 10.0.0.7:443 refused"
    );
    assert_eq!("full".parse::<Detail>(), Ok(Detail::Full));
    assert!("verbose".parse::<Detail>().is_err());
}

#[test]
fn acp_gets_stop_reasons_or_json_rpc_errors() {
    let of = |kind| ErrorClass {
        kind,
        retryable: false,
        message: "m".into(),
        chain: vec![],
    };
    assert_eq!(
        of(ErrorKind::Cancelled).acp(Detail::Message),
        AcpAnswer::Stop(AcpStopReason::Cancelled)
    );
    assert_eq!(
        of(ErrorKind::Refusal).acp(Detail::Message),
        AcpAnswer::Stop(AcpStopReason::Refusal)
    );
    assert_eq!(
        of(ErrorKind::ContextLength).acp(Detail::Message),
        AcpAnswer::Stop(AcpStopReason::MaxTokens),
        "a conversation too long for the model is the token limit"
    );
    let AcpAnswer::Error {
        code,
        message,
        kind,
    } = of(ErrorKind::InvalidRequest).acp(Detail::Message)
    else {
        panic!("an error")
    };
    assert_eq!(
        (code, message.as_str(), kind),
        (-32602, "m", "invalid_request")
    );
    let AcpAnswer::Error { code, .. } = of(ErrorKind::RateLimited).acp(Detail::Message) else {
        panic!("an error")
    };
    assert_eq!(code, -32603);
    assert_eq!(
        AcpStopReason::from(StopReason::MaxTurns),
        AcpStopReason::MaxTurnRequests
    );
    assert_eq!(
        AcpStopReason::from(StopReason::MaxTokens),
        AcpStopReason::MaxTokens
    );
    assert_eq!(
        AcpStopReason::from(StopReason::EndTurn),
        AcpStopReason::EndTurn
    );
}

#[tokio::test]
async fn a_failing_tool_becomes_a_result_the_model_reads() {
    let broken = service_fn(|_: ToolCall| async {
        Err::<ToolOutput, _>(ToolError::new(ToolErrorKind::Failed, "disk full"))
    });
    let tool = MapErrorLayer::new().detail(Detail::Message).layer(broken);
    let output = tool
        .oneshot(ToolCall::new("save", json!({})))
        .await
        .unwrap();
    assert!(output.is_error);
    assert_eq!(output.to_text(), "disk full");
}

#[tokio::test]
async fn model_call_and_stream_errors_are_classified() {
    let model = MockModel::new([vec![
        MockItem::text("partial"),
        MockItem::error(ModelErrorKind::ContextLength, "too long"),
    ]]);
    let model = MapErrorLayer::new().detail(Detail::Code).layer(model);
    let req = ModelRequest {
        messages: vec![],
        tools: Default::default(),
        options: Default::default(),
        run: Default::default(),
    };
    let items: Vec<_> = model
        .clone()
        .oneshot(req.clone())
        .await
        .unwrap()
        .collect()
        .await;
    let error = items[1].as_ref().unwrap_err();
    let classified = error
        .downcast_ref::<Classified>()
        .expect("a classified error");
    assert_eq!(classified.class().kind, ErrorKind::ContextLength);
    assert_eq!(
        classified.run_error().1,
        "The conversation is too long for the model."
    );

    // The mock has no reply left: the call itself fails, classified too.
    let error = model.oneshot(req).await.unwrap_err();
    assert_eq!(
        error.downcast_ref::<Classified>().unwrap().class().kind,
        ErrorKind::Internal
    );
}

#[tokio::test]
async fn a_custom_classifier_comes_first_and_falls_back() {
    let custom = |error: &(dyn std::error::Error + 'static)| {
        error.downcast_ref::<std::io::Error>().map(|_| ErrorClass {
            kind: ErrorKind::Transport,
            retryable: true,
            message: "network trouble".into(),
            chain: vec![],
        })
    };
    let layer = MapErrorLayer::new().classifier(custom);
    let run = |error: BoxError| {
        let mut error = Some(error);
        let agent = service_fn(move |_: RunRequest| {
            let error = error.take().expect("called once");
            async move { Err::<RunOutcome, _>(error) }
        });
        layer.layer(agent).oneshot(RunRequest::new(vec![]))
    };
    let network = run(Box::new(std::io::Error::other("reset")))
        .await
        .unwrap_err();
    let network = network.downcast_ref::<Classified>().unwrap().class();
    assert_eq!(
        (network.kind, network.message.as_str()),
        (ErrorKind::Transport, "network trouble")
    );
    // Not an io::Error: the default classifier decides.
    let refusal = run(Box::new(ModelError::new(ModelErrorKind::Refusal, "no")))
        .await
        .unwrap_err();
    assert_eq!(
        refusal.downcast_ref::<Classified>().unwrap().class().kind,
        ErrorKind::Refusal
    );
}
