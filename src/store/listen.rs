//! Other instances' writes, as PostgreSQL notifications forwarded to this process's followers.

use std::time::Duration;

use sqlx::postgres::PgListener;

use super::{CHANNEL, StoreError};
use crate::{id::RunId, runs::Hub};

/// Listens on the store's channel and wakes `hub`'s followers of each run another instance wrote,
/// for as long as the hub is in use. A notification is a hint: the followers read the log. When
/// the connection drops, what was sent meanwhile is lost, so every follower is woken to read.
pub(super) async fn forward(url: &str, hub: Hub) -> Result<(), StoreError> {
    let mut listener = PgListener::connect(url).await?;
    listener.listen(CHANNEL).await?;
    tokio::spawn(async move {
        let mut backoff = Duration::from_millis(100);
        loop {
            match listener.try_recv().await {
                Ok(Some(notification)) => {
                    backoff = Duration::from_millis(100);
                    // A line `seq:run` for each run whose log changed.
                    for line in notification.payload().lines() {
                        if let Some((_, run)) = line.split_once(':') {
                            hub.wake(&RunId::from(run));
                        }
                    }
                }
                // The connection was lost (the next call reconnects): whatever was notified
                // meanwhile is gone.
                Ok(None) => hub.wake_all(),
                Err(error) => {
                    tracing::warn!(%error, "store notifications interrupted");
                    hub.wake_all();
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                }
            }
        }
    });
    Ok(())
}
