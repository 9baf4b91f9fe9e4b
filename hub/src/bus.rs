//! The wake-up between the hubs of a cluster: after each commit a hub says "batch n is in"
//! on NATS (core pub/sub, at most once, `--bus nats://…`), and the other hubs' followers
//! read the store at once instead of at their next poll. Nothing depends on it: a lost or
//! late message only means the next poll finds the batch, and the commit path never waits
//! on NATS (announcements go through a bounded queue and are dropped when it is full, as
//! when NATS is away).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::{Notify, mpsc};
use tracing::{info, warn};

/// Announcements queued for NATS at most; past them they are dropped (counted).
pub const ANNOUNCE_QUEUE: usize = 4096;

/// The writer's side: announces committed batches without ever waiting.
#[derive(Debug, Clone)]
pub struct Announcer {
    queue: mpsc::Sender<u64>,
    dropped: Arc<AtomicU64>,
}

impl Announcer {
    /// Says batch `n` is committed, unless the queue to NATS is full.
    pub fn announce(&self, n: u64) {
        if self.queue.try_send(n).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The queue between the writer and the bus, made when the hub opens (before there is a
/// runtime to connect from); [`Bus::start`] takes its other end.
pub fn announcements() -> (Announcer, mpsc::Receiver<u64>) {
    let (queue, receiver) = mpsc::channel(ANNOUNCE_QUEUE);
    (
        Announcer {
            queue,
            dropped: Default::default(),
        },
        receiver,
    )
}

/// The bus's tasks; dropping it stops them.
#[derive(Debug)]
pub struct Bus {
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Bus {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl Bus {
    /// Connects to `url` (and keeps reconnecting), publishes what the writer announces on
    /// the hub's subject, and wakes `follower` on every announcement of another hub.
    pub fn start(
        url: &str,
        hub_id: &str,
        mut announced: mpsc::Receiver<u64>,
        follower: Arc<Notify>,
    ) -> Bus {
        let subject = format!("rt.{hub_id}.batches");
        let url = url.to_owned();
        let (client_ready, client) = tokio::sync::oneshot::channel();
        let connect = tokio::spawn(async move {
            let connected = async_nats::ConnectOptions::new()
                .retry_on_initial_connect()
                .connect(url.as_str())
                .await;
            match connected {
                Ok(client) => {
                    info!("connected to the cluster's bus");
                    let _ = client_ready.send(client);
                }
                Err(error) => warn!(%error, "cannot use the cluster's bus; polling only"),
            }
        });
        let publish_subject = subject.clone();
        let (subscriber_client, subscriber) = tokio::sync::oneshot::channel::<async_nats::Client>();
        let publish = tokio::spawn(async move {
            let Ok(client) = client.await else { return };
            let _ = subscriber_client.send(client.clone());
            while let Some(n) = announced.recv().await {
                // Never on the commit path: this task alone waits for NATS.
                if let Err(error) = client
                    .publish(publish_subject.clone(), n.to_string().into())
                    .await
                {
                    warn!(%error, "cannot announce a batch on the bus");
                }
            }
        });
        let listen = tokio::spawn(async move {
            use futures_util::StreamExt as _;
            let Ok(client) = subscriber.await else { return };
            let mut messages = match client.subscribe(subject).await {
                Ok(messages) => messages,
                Err(error) => {
                    warn!(%error, "cannot listen on the cluster's bus; polling only");
                    return;
                }
            };
            while messages.next().await.is_some() {
                follower.notify_one();
            }
        });
        Bus {
            tasks: vec![connect, publish, listen],
        }
    }
}
