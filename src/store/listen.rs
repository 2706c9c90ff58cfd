//! Other instances' writes, as PostgreSQL notifications forwarded to this process's followers.

use std::{sync::Arc, time::Duration};

use sqlx::postgres::PgListener;

use super::{CANCEL, CHANNEL, LISTED, Observers, RELEASED, StoreError, THREAD};
use crate::{
    id::{RunId, ThreadId},
    runs::Changed,
};

/// Listens on the store's channel and tells `observers` of each run another instance wrote. A
/// notification is a hint: the followers read the log. When the connection drops, what was sent
/// meanwhile is lost, so they are told that anything may have changed. What this instance
/// (`owner`) told of the thread list it does not hear again.
pub(super) async fn forward(
    url: &str,
    owner: String,
    observers: Arc<Observers>,
) -> Result<(), StoreError> {
    let mut listener = PgListener::connect(url).await?;
    listener.listen(CHANNEL).await?;
    tokio::spawn(async move {
        let mut backoff = Duration::from_millis(100);
        loop {
            match listener.try_recv().await {
                Ok(Some(notification)) => {
                    backoff = Duration::from_millis(100);
                    // A line `seq:run` for each run whose log changed, `cancel:run` for each
                    // run asked to be cancelled, `thread:thread` for each thread a run started on,
                    // `listed:[..]` for each thread whose listing changed.
                    for line in notification.payload().lines() {
                        match line.split_once(':') {
                            Some((CANCEL, run)) => {
                                observers.changed(Changed::CancelRequested(&RunId::from(run)));
                            }
                            Some((THREAD, thread)) => {
                                observers.changed(Changed::ThreadStarted(&ThreadId::from(thread)));
                            }
                            Some((LISTED, listed)) => {
                                type Listed = (String, String, Option<String>);
                                let listed = serde_json::from_str::<Listed>(listed);
                                if let Ok((from, thread, principal)) = listed
                                    && from != owner
                                {
                                    observers.changed(Changed::ThreadListed(
                                        &ThreadId::from(thread.as_str()),
                                        principal.as_deref(),
                                    ));
                                }
                            }
                            Some((RELEASED, _)) => observers.changed(Changed::Released),
                            Some((_, run)) => observers.changed(Changed::Run(&RunId::from(run))),
                            None => {}
                        }
                    }
                }
                // The connection was lost (the next call reconnects): whatever was notified
                // meanwhile is gone.
                Ok(None) => observers.changed(Changed::Any),
                Err(error) => {
                    tracing::warn!(%error, "store notifications interrupted");
                    observers.changed(Changed::Any);
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                }
            }
        }
    });
    Ok(())
}
