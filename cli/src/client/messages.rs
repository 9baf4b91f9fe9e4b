//! The commands about rooms and what is said in them: status and sync, rooms, messages,
//! the outbox, and the questions agents ask (pings) with their answers.

use roundtable_core::cache::OutboxState;
use roundtable_core::client::{Delivered, PATIENCE};
use roundtable_core::{Core, SyncState};
use roundtable_protocol::client::{RoomCreate, RoomInvite, RoomLeave};

use super::json::{OutboxCounts, PingAnswered, RoomInvited, RoomLeft, SendOutcome, Status, Synced};
use super::{Exit, Failure, Out, call, warn_if_incomplete};
use crate::args::OutboxCommand;

pub(super) async fn status(core: &Core, out: &Out) -> Result<(), Failure> {
    let state = match tokio::time::timeout(std::time::Duration::from_secs(3), core.synced(PATIENCE))
        .await
    {
        Ok(Ok(())) => "idle (up to date)".to_owned(),
        Ok(Err(error)) => error.to_string(),
        Err(_) => "syncing".to_owned(),
    };
    let profile = core.profile();
    let pending = core.read(|cache| cache.outbox_pending()).await?;
    let failed = pending
        .iter()
        .filter(|e| e.state == OutboxState::Failed)
        .count();
    let waiting = pending.len() - failed;
    out.show(
        format!(
            "profile {} ({} on {})\nsync: {state}\noutbox: {waiting} waiting, {failed} failed",
            profile.name, profile.handle, profile.hub
        ),
        Status {
            profile: &profile.name,
            handle: &profile.handle,
            hub: profile.hub.to_string(),
            sync: state,
            outbox: OutboxCounts { waiting, failed },
        },
    )
}

pub(super) async fn sync_now(core: &Core, out: &Out, follow: bool) -> Result<(), Failure> {
    core.synced(PATIENCE).await?;
    core.outbox_drained(PATIENCE).await?;
    if follow {
        let mut changes = core.changes();
        loop {
            match changes.recv().await {
                Ok(change) => out.show(format!("{change:?}"), &change)?,
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                Err(_) => return Ok(()),
            }
        }
    }
    let pending = core.read(|cache| cache.outbox_pending()).await?;
    out.show(
        format!("synced; {} in the outbox", pending.len()),
        Synced {
            outbox: pending.len(),
        },
    )
}

pub(super) async fn rooms(core: &Core, out: &Out) -> Result<(), Failure> {
    core.synced(PATIENCE).await?;
    let rooms = core.rooms().await?;
    let text = rooms
        .iter()
        .map(|room| {
            let members: Vec<&str> = room.members.iter().map(|m| m.handle.as_str()).collect();
            let unread = if room.unread > 0 {
                format!("  ({} unread)", room.unread)
            } else {
                String::new()
            };
            format!(
                "{}  {}  [{}]{unread}",
                room.id,
                room.title.as_deref().unwrap_or("(untitled)"),
                members.join(", ")
            )
        })
        .collect::<Vec<_>>()
        .join("\n");
    out.show(
        if text.is_empty() {
            "no rooms".into()
        } else {
            text
        },
        &rooms,
    )
}

pub(super) async fn room_create(
    core: &Core,
    out: &Out,
    title: Option<String>,
    topic: Option<String>,
    members: Vec<String>,
) -> Result<(), Failure> {
    let created = call(
        core,
        RoomCreate {
            id: 0,
            title,
            topic,
            members,
        },
    )
    .await?;
    out.show(
        format!(
            "created room {} ({})",
            created.room.title.as_deref().unwrap_or("untitled"),
            created.room.id
        ),
        &created.room,
    )
}

pub(super) async fn room_invite(
    core: &Core,
    out: &Out,
    room: &str,
    handle: String,
) -> Result<(), Failure> {
    let room = core.room_id(room).await?;
    call(
        core,
        RoomInvite {
            id: 0,
            room: room.clone(),
            handle: handle.clone(),
        },
    )
    .await?;
    out.show(
        format!("{handle} is in room {room}"),
        RoomInvited {
            room: &room,
            handle: &handle,
        },
    )
}

pub(super) async fn room_leave(core: &Core, out: &Out, room: &str) -> Result<(), Failure> {
    let room = core.room_id(room).await?;
    call(
        core,
        RoomLeave {
            id: 0,
            room: room.clone(),
        },
    )
    .await?;
    out.show(format!("left room {room}"), RoomLeft { room: &room })
}

pub(super) async fn send(core: &Core, out: &Out, room: &str, text: &str) -> Result<(), Failure> {
    match core.send_message_now(room, text, PATIENCE).await? {
        Delivered::Sent { seq, outbox, .. } => out.show(
            format!("sent (seq {seq})"),
            SendOutcome::Sent { seq, outbox },
        ),
        Delivered::HandedOff { state, outbox, .. } => out.show(
            match state {
                SyncState::Idle => "handed to the running roundtable process, which sends it".to_owned(),
                _ => "queued: the running roundtable process sends it when the hub is back".to_owned(),
            },
            SendOutcome::HandedOff { outbox },
        ),
        Delivered::Queued { reason, outbox } => out.show(
            format!("queued: the hub is unreachable now ({reason}); it will be sent by the next roundtable command that reaches it"),
            SendOutcome::Queued { outbox },
        ),
    }
}

pub(super) async fn tail(
    core: &Core,
    out: &Out,
    room: &str,
    limit: u32,
    follow: bool,
) -> Result<(), Failure> {
    core.synced(PATIENCE).await?;
    let room = core.room_id(room).await?;
    let page = core.latest_messages(&room, None, limit, PATIENCE).await?;
    warn_if_incomplete(page.complete);
    let mut follower = core.follow(&room, &page);
    for message in &page.messages {
        out.message(message)?;
    }
    if !follow {
        return Ok(());
    }
    while let Some(messages) = follower.next(core).await? {
        for message in &messages {
            out.message(message)?;
        }
    }
    Ok(())
}

pub(super) async fn history(
    core: &Core,
    out: &Out,
    room: &str,
    before: Option<u64>,
    limit: u32,
) -> Result<(), Failure> {
    core.synced(PATIENCE).await?;
    let room = core.room_id(room).await?;
    let page = core
        .latest_messages(&room, Some(before.unwrap_or(u64::MAX)), limit, PATIENCE)
        .await?;
    warn_if_incomplete(page.complete);
    for message in &page.messages {
        out.message(message)?;
    }
    Ok(())
}

pub(super) async fn outbox(
    core: &Core,
    out: &Out,
    command: Option<OutboxCommand>,
) -> Result<(), Failure> {
    if let Some(OutboxCommand::Retry { n }) = command {
        if !core.retry(n).await? {
            return Err(Failure::new(
                Exit::Usage,
                format!("outbox entry {n} is not a failed entry"),
            ));
        }
        core.synced(PATIENCE).await?;
        core.outbox_drained(PATIENCE).await?;
    }
    let pending = core.read(|cache| cache.outbox_pending()).await?;
    let text = pending
        .iter()
        .map(|entry| {
            format!(
                "{}  {}  {}{}",
                entry.n,
                entry.state.as_str(),
                entry.room.as_deref().unwrap_or("-"),
                entry
                    .error_msg
                    .as_deref()
                    .map(|m| format!("  {m}"))
                    .unwrap_or_default()
            )
        })
        .collect::<Vec<_>>()
        .join("\n");
    out.show(
        if text.is_empty() {
            "the outbox is empty".into()
        } else {
            text
        },
        &pending,
    )
}

pub(super) async fn pings(core: &Core, out: &Out, all: bool) -> Result<(), Failure> {
    core.synced(PATIENCE).await?;
    let pings = if all {
        core.pings().await?
    } else {
        core.open_pings().await?
    };
    let text = pings
        .iter()
        .map(|ping| {
            let options = if ping.options.is_empty() {
                String::new()
            } else {
                format!(" [{}]", ping.options.join(" / "))
            };
            let state = match &ping.answered_by_handle {
                Some(by) => format!(
                    "  answered by {by}: {}",
                    ping.choice
                        .as_deref()
                        .or(ping.text.as_deref())
                        .unwrap_or("")
                ),
                None => String::new(),
            };
            format!(
                "{}  {}: {}{options}{state}",
                ping.ping,
                ping.asker_handle.as_deref().unwrap_or(&ping.asker),
                ping.question
            )
        })
        .collect::<Vec<_>>()
        .join("\n");
    out.show(
        if text.is_empty() {
            "no questions wait for you".into()
        } else {
            text
        },
        &pings,
    )
}

pub(super) async fn answer(
    core: &Core,
    out: &Out,
    ping: &str,
    choice: Option<String>,
    text: Option<String>,
    room: Option<String>,
) -> Result<(), Failure> {
    if choice.is_none() && text.is_none() {
        return Err(Failure::new(
            Exit::Usage,
            "give the option you choose, or an answer with --text",
        ));
    }
    core.synced(PATIENCE).await?;
    let room = match room {
        Some(room) => Some(core.room_id(&room).await?),
        None => None,
    };
    let answered = core
        .answer_ping(room.as_deref(), ping, choice.as_deref(), text.as_deref())
        .await?;
    out.show(
        format!("answered {ping} in {}", answered.room),
        PingAnswered {
            ping,
            room: &answered.room,
            seq: answered.seq,
        },
    )
}
