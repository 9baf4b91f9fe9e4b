//! What every client does beyond sending frames, written once for the CLI, the desktop app,
//! the MCP bridge and hooks: waiting until the cache has caught up, finding a room by its
//! title, reading a room's latest messages once history has filled them in, resolving an
//! agent by name, waiting for the outbox to drain, and sending a message *now* — handing it
//! to a running process on the profile when there is one.

use std::time::Duration;

use roundtable_protocol::client::Directory;
use roundtable_protocol::server::SendOk;
use serde::Serialize;

use crate::cache::{MessageView, OutboxState, RoomView};
use crate::{Change, Core, CoreError, Outcome, SyncState, decode_reply};

/// How long a one-off command waits for the hub before it gives up (writes stay queued).
pub const PATIENCE: Duration = Duration::from_secs(10);

/// Where a message went when asked to go now.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "delivered", rename_all = "snake_case")]
pub enum Delivered {
    /// The hub stored it (`dup`: it had it already, from an earlier attempt).
    Sent { seq: u64, dup: bool, outbox: u64 },
    /// A running process on this profile took it and sends it; it had not answered yet
    /// (or was offline: then it sends when the hub is back).
    HandedOff {
        process: String,
        state: SyncState,
        outbox: u64,
    },
    /// The hub is unreachable: it waits in the outbox for the next process that reaches it.
    Queued { reason: String, outbox: u64 },
}

/// A page of a room's latest messages.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MessagesPage {
    pub messages: Vec<MessageView>,
    /// False when older messages inside the page's range were still being fetched when
    /// patience ran out: the page may miss some.
    pub complete: bool,
    /// The seq below which this page cannot reach (0 when it holds the room's beginning).
    pub floor: u64,
    /// The `client_key`s of our messages the page shows waiting in the outbox.
    #[serde(skip)]
    pub waiting_keys: Vec<String>,
}

impl Core {
    /// Waits until this process's sync task has caught up; says why it could not.
    pub async fn synced(&self, patience: Duration) -> Result<(), CoreError> {
        let mut state = self.sync_state();
        let wait = state.wait_for(|state| {
            matches!(
                state,
                SyncState::Idle
                    | SyncState::NotStarted
                    | SyncState::Offline { .. }
                    | SyncState::Error { .. }
            )
        });
        let state = match tokio::time::timeout(patience, wait).await {
            Ok(Ok(state)) => state.clone(),
            _ => return Err(CoreError::Offline("the hub did not answer in time".into())),
        };
        match state {
            SyncState::Idle | SyncState::Syncing => Ok(()),
            SyncState::NotStarted => Err(CoreError::Invalid(
                "this process does not sync: start it first (Core::start)".into(),
            )),
            SyncState::Offline { reason }
                if self
                    .shared
                    .stopped
                    .load(std::sync::atomic::Ordering::Relaxed) =>
            {
                Err(CoreError::Stopped(reason))
            }
            SyncState::Offline { reason } => Err(CoreError::Offline(reason)),
            SyncState::Error { reason } => Err(CoreError::TokenRefused(reason)),
        }
    }

    /// The rooms we are in, as the cache knows them.
    pub async fn rooms(&self) -> Result<Vec<RoomView>, CoreError> {
        self.read(|cache| cache.rooms()).await
    }

    /// A room id from an id or the title of one of our rooms, as the cache knows them now.
    pub async fn find_room(&self, room: &str) -> Result<String, CoreError> {
        let rooms = self.rooms().await?;
        if rooms.iter().any(|r| r.id == room) {
            return Ok(room.to_owned());
        }
        let titled: Vec<&RoomView> = rooms
            .iter()
            .filter(|r| r.title.as_deref() == Some(room))
            .collect();
        match titled.as_slice() {
            [one] => Ok(one.id.clone()),
            [] => Err(CoreError::NotFound(format!(
                "you are in no room {room:?}; list them with `roundtable rooms`"
            ))),
            _ => Err(CoreError::Ambiguous(format!(
                "several rooms are titled {room:?}; use the room's id"
            ))),
        }
    }

    /// As [`Core::find_room`], after the sync task has caught up when the cache does not
    /// know the room yet (a room created a moment ago by another device).
    pub async fn room_id(&self, room: &str) -> Result<String, CoreError> {
        match self.find_room(room).await {
            Err(CoreError::NotFound(_)) if self.is_syncing() => {
                self.synced(PATIENCE).await?;
                self.find_room(room).await
            }
            other => other,
        }
    }

    /// The latest `limit` messages of `room` below seq `before` (all when `None`), oldest
    /// first, once history has filled the gaps inside that window (waiting at most
    /// `patience`), with our messages still in the outbox at the end when `before` is
    /// `None`.
    pub async fn latest_messages(
        &self,
        room: &str,
        before: Option<u64>,
        limit: u32,
        patience: Duration,
    ) -> Result<MessagesPage, CoreError> {
        let below = before.unwrap_or(u64::MAX);
        let owned = room.to_owned();
        let stored = self
            .read(move |cache| cache.messages_before(&owned, below, limit))
            .await?;
        let floor = window_floor(&stored, limit);
        let complete = self.gaps_filled(room, floor, below, patience).await?;
        let owned = room.to_owned();
        let (messages, waiting_keys) = self
            .read(move |cache| {
                if before.is_none() {
                    cache.messages_keyed(&owned, 0, limit)
                } else {
                    Ok((cache.messages_before(&owned, below, limit)?, Vec::new()))
                }
            })
            .await?;
        Ok(MessagesPage {
            messages,
            complete,
            floor,
            waiting_keys,
        })
    }

    /// Waits (at most `patience`) until history has filled every gap of `room` between
    /// `floor` and `below`; false when some remain.
    pub async fn gaps_filled(
        &self,
        room: &str,
        floor: u64,
        below: u64,
        patience: Duration,
    ) -> Result<bool, CoreError> {
        let deadline = tokio::time::Instant::now() + patience;
        let mut changes = self.changes();
        loop {
            let owned = room.to_owned();
            let open = self
                .read(move |cache| {
                    Ok(cache
                        .gaps()?
                        .iter()
                        .any(|(r, from, to)| *r == owned && *to > floor && *from < below))
                })
                .await?;
            if !open {
                return Ok(true);
            }
            if !self.is_syncing() || tokio::time::Instant::now() >= deadline {
                return Ok(false);
            }
            // A filled page changes the room's messages; look again then (or shortly).
            let _ = tokio::time::timeout(Duration::from_millis(100), async {
                loop {
                    match changes.recv().await {
                        Ok(change) if change.room() == Some(room) => return,
                        Ok(_) => continue,
                        Err(_) => return,
                    }
                }
            })
            .await;
        }
    }

    /// Waits (at most `patience`) until the outbox holds nothing but failed entries; false
    /// when something still waits.
    pub async fn outbox_drained(&self, patience: Duration) -> Result<bool, CoreError> {
        let deadline = tokio::time::Instant::now() + patience;
        let mut changes = self.changes();
        loop {
            let waiting = self
                .read(|cache| {
                    Ok(cache
                        .outbox_pending()?
                        .iter()
                        .any(|entry| entry.state != OutboxState::Failed))
                })
                .await?;
            if !waiting {
                return Ok(true);
            }
            if tokio::time::Instant::now() >= deadline {
                return Ok(false);
            }
            let _ = tokio::time::timeout_at(deadline, async {
                loop {
                    match changes.recv().await {
                        Ok(Change::Outbox) | Err(_) => return,
                        Ok(_) => continue,
                    }
                }
            })
            .await;
        }
    }

    /// An agent's handle and id, from `name` (one of our agents), `user/name` (any agent
    /// we may see, asking the hub's directory) or its id (what the app's views hold).
    pub async fn resolve_agent(&self, agent: &str) -> Result<(String, String), CoreError> {
        if let Some(known) = self
            .read({
                let id = agent.to_owned();
                move |cache| cache.principal(&id)
            })
            .await?
            .filter(|known| known.kind == "agent")
        {
            return Ok((known.handle, known.id));
        }
        let handle = if agent.contains('/') {
            agent.to_owned()
        } else {
            format!("{}/{agent}", self.profile().handle)
        };
        if let Some(known) = self
            .read({
                let handle = handle.clone();
                move |cache| cache.principal_by_handle(&handle)
            })
            .await?
        {
            return Ok((known.handle, known.id));
        }
        let found = self
            .call(
                Directory {
                    id: 0,
                    query: Some(handle.clone()),
                    limit: Some(200),
                },
                PATIENCE,
            )
            .await?;
        let entry = found
            .entries
            .into_iter()
            .find(|entry| entry.handle == handle)
            .ok_or_else(|| CoreError::NotFound(format!("no agent {handle:?} you can see")))?;
        self.remember(vec![crate::cache::PrincipalRow {
            id: entry.id.clone(),
            kind: entry.kind.as_str().to_owned(),
            handle: entry.handle.clone(),
            name: entry.name.clone(),
            owner: entry.owner.clone(),
        }])
        .await;
        Ok((handle, entry.id))
    }

    /// Sends a message to `room` (an id, or the title of one of our rooms) now, from a
    /// process that does not sync: a running process on the profile takes it over when
    /// there is one; otherwise this process connects and sends it itself. Either way it is
    /// durable in the outbox before anything else happens, so the caller may exit at once.
    pub async fn send_message_now(
        &self,
        room: &str,
        text: &str,
        patience: Duration,
    ) -> Result<Delivered, CoreError> {
        let mut own_sync = None;
        let room = match self.find_room(room).await {
            Ok(id) => id,
            Err(CoreError::NotFound(_)) if !self.is_syncing() => {
                // A title the cache does not know yet: catch up first. Offline, the name
                // goes as given (an id the cache has not seen); a refused token is no
                // reason to queue.
                let sync = self.start();
                match self.synced(patience).await {
                    Ok(()) => {
                        own_sync = Some(sync);
                        self.find_room(room).await?
                    }
                    Err(error @ CoreError::TokenRefused(_)) => return Err(error),
                    Err(_) => {
                        own_sync = Some(sync);
                        room.to_owned()
                    }
                }
            }
            Err(error) => return Err(error),
        };
        let n = self.send_message(&room, text).await?;
        let delivered = self.deliver(n, patience).await;
        if let Some(sync) = own_sync {
            sync.stop().await;
        }
        delivered
    }

    /// Sees outbox entry `n` (a send this process queued) to the hub now; see
    /// [`Core::send_message_now`].
    pub async fn deliver(&self, n: u64, patience: Duration) -> Result<Delivered, CoreError> {
        if !self.is_syncing()
            && let Some(mut receipt) = crate::hand_off::offer(&self.shared.lock, &[n]).await
        {
            let handed = if receipt.state == SyncState::Idle {
                receipt.outcome(n, patience).await
            } else {
                crate::hand_off::Handed::Pending
            };
            match handed {
                crate::hand_off::Handed::Ended(outcome) => return sent(n, outcome),
                crate::hand_off::Handed::Pending => {
                    return Ok(Delivered::HandedOff {
                        process: receipt.process,
                        state: receipt.state,
                        outbox: n,
                    });
                }
                // The process that took it is gone (Codex ends its MCP servers the moment it
                // exits): this one sends it, taking it over with the rest that process left.
                crate::hand_off::Handed::Abandoned => {}
            }
        }
        let own_sync = (!self.is_syncing()).then(|| self.start());
        let outcome = tokio::select! {
            outcome = self.wait(n, patience) => outcome,
            failure = self.synced(patience) => match failure {
                Ok(()) => self.wait(n, patience).await,
                Err(CoreError::TokenRefused(reason)) => Err(CoreError::TokenRefused(format!(
                    "{reason}; the message waits in the outbox (entry {n})"
                ))),
                Err(CoreError::Offline(reason)) => {
                    if let Some(sync) = own_sync {
                        sync.stop().await;
                    }
                    return Ok(Delivered::Queued { reason, outbox: n });
                }
                Err(error) => Err(error),
            },
        };
        if let Some(sync) = own_sync {
            sync.stop().await;
        }
        match outcome {
            Ok(outcome) => sent(n, outcome),
            Err(CoreError::Timeout) => Ok(Delivered::Queued {
                reason: "the hub did not answer in time".into(),
                outbox: n,
            }),
            Err(error) => Err(error),
        }
    }
}

fn sent(n: u64, outcome: Outcome) -> Result<Delivered, CoreError> {
    match outcome {
        Outcome::Done(reply) => {
            let sent: Result<SendOk, _> = decode_reply(&reply);
            match sent {
                Ok(sent) => Ok(Delivered::Sent {
                    seq: sent.event.seq,
                    dup: sent.dup,
                    outbox: n,
                }),
                // Collected by another waiter: done, its seq unknown here.
                Err(_) => Ok(Delivered::Sent {
                    seq: 0,
                    dup: false,
                    outbox: n,
                }),
            }
        }
        Outcome::Failed { code, msg } => Err(CoreError::from_failure(
            code,
            format!("the hub refused the message: {msg}; see `roundtable outbox`"),
        )),
    }
}

/// The seq below which a page of the latest `limit` messages cannot reach: that of its
/// oldest message, or 0 when the page is not full (older ones may still come).
fn window_floor(page: &[MessageView], limit: u32) -> u64 {
    if page.len() < limit as usize {
        0
    } else {
        page.first()
            .and_then(|m| m.seq)
            .map_or(0, |seq| seq.saturating_sub(1))
    }
}

/// Follows a room's new messages after a page was shown: each message once, in order, and
/// the ones history brings into the page's window after a long disconnection. Our own
/// messages the page showed waiting in the outbox are not shown again once stored.
#[derive(Debug)]
pub struct RoomFollower {
    room: String,
    /// The seq below which the shown page did not reach.
    floor: u64,
    /// The highest seq shown.
    last: u64,
    shown: std::collections::HashSet<u64>,
    /// The `client_key`s of messages shown while they waited, until they are stored.
    shown_waiting: std::collections::HashSet<String>,
    changes: tokio::sync::broadcast::Receiver<Change>,
}

impl Core {
    /// Starts following `room` after `page` was shown.
    pub fn follow(&self, room: &str, page: &MessagesPage) -> RoomFollower {
        let shown: std::collections::HashSet<u64> =
            page.messages.iter().filter_map(|m| m.seq).collect();
        RoomFollower {
            room: room.to_owned(),
            floor: page.floor,
            last: shown
                .iter()
                .copied()
                .max()
                .unwrap_or(page.floor)
                .max(page.floor),
            shown,
            shown_waiting: page.waiting_keys.iter().cloned().collect(),
            changes: self.changes(),
        }
    }
}

impl RoomFollower {
    /// The next messages not shown yet, oldest first; waits for them. `None` when the core
    /// has closed.
    pub async fn next(&mut self, core: &Core) -> Result<Option<Vec<MessageView>>, CoreError> {
        loop {
            match self.changes.recv().await {
                Ok(change) if change.room() == Some(self.room.as_str()) => {}
                Ok(Change::Reset) => {}
                Ok(_) => continue,
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return Ok(None),
            }
            // New messages after the last shown; and when history filled a gap inside the
            // window, the ones it brought.
            let (room, floor, last) = (self.room.clone(), self.floor, self.last);
            let refilled = core
                .read(move |cache| {
                    Ok(cache
                        .gaps()?
                        .iter()
                        .any(|(r, from, to)| *r == room && *to > floor && *from <= last))
                })
                .await?;
            let mut after = if refilled { self.floor } else { self.last };
            let mut fresh = Vec::new();
            loop {
                let room = self.room.clone();
                let keyed = !self.shown_waiting.is_empty();
                let page = core
                    .read(move |cache| {
                        let page = cache.messages_after(&room, after, 1000)?;
                        page.into_iter()
                            .map(|message| {
                                let key = match message.seq {
                                    Some(seq) if keyed => cache.client_key_at(&room, seq)?,
                                    _ => None,
                                };
                                Ok((message, key))
                            })
                            .collect::<Result<Vec<_>, _>>()
                    })
                    .await?;
                let Some(end) = page.last().and_then(|(m, _)| m.seq) else {
                    break;
                };
                for (message, key) in page {
                    if let Some(seq) = message.seq
                        && self.shown.insert(seq)
                    {
                        self.last = self.last.max(seq);
                        if key.is_some_and(|key| self.shown_waiting.remove(&key)) {
                            continue;
                        }
                        fresh.push(message);
                    }
                }
                after = end;
            }
            if !fresh.is_empty() {
                return Ok(Some(fresh));
            }
        }
    }
}
