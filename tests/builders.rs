//! Every layer can be configured after it was cloned: the clone that is configured changes, the
//! others keep what they had (copy on write), and nothing panics.

use std::fmt::Debug;

use agent_tower::{
    acp::AcpLayer,
    agui::AguiLayer,
    map_error::{Detail, MapErrorLayer},
    post_process::PostProcessLayer,
    state::StateLayer,
    transport::OnDisconnect,
    truncate::{JsonDisplay, TruncateLayer},
};

/// `configure` applied to a clone of `layer` changes the clone and leaves `layer` as it was.
fn configured_after_clone<L: Clone + Debug>(layer: L, configure: impl FnOnce(L) -> L) {
    let before = format!("{layer:?}");
    let kept = layer.clone();
    let changed = configure(layer.clone());
    assert_eq!(
        format!("{kept:?}"),
        before,
        "the original kept its settings"
    );
    assert_eq!(format!("{layer:?}"), before);
    assert_ne!(
        format!("{changed:?}"),
        before,
        "the clone took its settings"
    );
}

#[test]
fn a_layer_configured_after_it_was_cloned_changes_alone() {
    configured_after_clone(AguiLayer::new(), |l| {
        l.on_disconnect(OnDisconnect::Continue)
            .predict_state("write", "document", "doc")
    });
    configured_after_clone(AcpLayer::new(), |l| l.context_window(1_000));
    configured_after_clone(TruncateLayer::new(), |l| {
        l.json(JsonDisplay::Summarize).max_delta(100).unwrap()
    });
    configured_after_clone(MapErrorLayer::new(), |l| l.detail(Detail::None));
    configured_after_clone(
        PostProcessLayer::new(
            "findings",
            tower::service_fn(|_: String| async {
                Ok::<_, agent_tower::BoxError>(serde_json::Value::Null)
            }),
        )
        .unwrap(),
        |l| l.max_text(10),
    );
    configured_after_clone(StateLayer::new(), |l| l.from_args("remember", |_, _| {}));
}

/// A stand-in for the wrapped service: a number to read and change.
#[derive(Debug, Clone, PartialEq)]
struct Inner(u32);

/// `get_ref`, `get_mut` and `into_inner` reach the wrapped service of every layer's service.
#[test]
fn every_service_gives_access_to_the_one_it_wraps() {
    use tower::Layer;
    macro_rules! reaches {
        ($layer:expr) => {{
            let mut service = $layer.layer(Inner(1));
            assert_eq!(service.get_ref(), &Inner(1));
            service.get_mut().0 = 2;
            assert_eq!(service.into_inner(), Inner(2));
        }};
    }
    reaches!(AguiLayer::new());
    reaches!(AcpLayer::new());
    reaches!(TruncateLayer::new());
    reaches!(MapErrorLayer::new());
    reaches!(StateLayer::new());
    reaches!(agent_tower::trace::TraceLayer::new());
    reaches!(agent_tower::model::IdleTimeoutLayer::new(
        std::time::Duration::from_secs(1)
    ));
}

#[test]
fn a_policy_with_a_predicate_stays_unwind_safe() {
    fn unwind_safe<T: std::panic::UnwindSafe + std::panic::RefUnwindSafe>(_: &T) {}
    let shared = std::sync::Arc::new(std::sync::Mutex::new(0));
    let policy =
        agent_tower::permission::Policy::new().ask_if(move |_| *shared.lock().unwrap() > 0);
    unwind_safe(&policy);
}
