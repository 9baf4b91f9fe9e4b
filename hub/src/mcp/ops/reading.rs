//! What the tools read for their caller: a room's events page by page, the device's read
//! markers and acknowledgements, the messages after them with their senders' handles, and
//! waits woken by the dispatcher.

use super::*;

impl CallerOps {
    /// Events of `room` after `after` (before `before`), as this caller may read them (an
    /// agent: those routed to it, unless `everything`).
    pub(super) async fn events(
        &self,
        room: &str,
        after: Option<u64>,
        before: Option<u64>,
        limit: u32,
        everything: bool,
    ) -> Result<Vec<EventRecord>, ToolError> {
        self.page(room, after, before, limit, everything)
            .await
            .map(|page| page.events)
    }

    /// A page of events (see [`CallerOps::events`]), with whether more were left out.
    pub(super) async fn page(
        &self,
        room: &str,
        after: Option<u64>,
        before: Option<u64>,
        limit: u32,
        everything: bool,
    ) -> Result<crate::reads::HistoryPage, ToolError> {
        let range = HistoryRange {
            before,
            after,
            limit,
            max_bytes: self.gateway.context().config.page_bytes,
        };
        let is_agent = self.is_agent() && !everything;
        self.gateway
            .history(&self.caller, is_agent, room, range)
            .await
            .map_err(read_failed)
    }

    /// Every room the caller is in, with this device's read marker and the room's head.
    pub(super) async fn read_markers(&self) -> Result<BTreeMap<String, (u64, u64)>, ToolError> {
        let plan = self
            .gateway
            .sync_plan(&self.caller.id)
            .await
            .map_err(read_failed)?;
        let markers: BTreeMap<StreamKey, u64> = self
            .gateway
            .device_read_markers(&self.caller)
            .await
            .map_err(read_failed)?
            .into_iter()
            .collect();
        Ok(plan
            .streams
            .iter()
            .filter_map(|stream| match &stream.stream {
                StreamKey::Room(room) => Some((
                    room.clone(),
                    (
                        markers.get(&stream.stream).copied().unwrap_or(0),
                        stream.head,
                    ),
                )),
                StreamKey::Inbox(_) => None,
            })
            .collect())
    }

    pub(super) async fn acknowledge(
        &self,
        cursors: BTreeMap<String, u64>,
    ) -> Result<(), ToolError> {
        if cursors.is_empty() {
            return Ok(());
        }
        self.execute(ClientFrame::Ack(Ack { id: 1, cursors }))
            .await
            .map(drop)
    }

    /// The handles of the members of the caller's rooms, by id.
    pub(super) async fn handles(&self) -> Handles {
        self.rooms()
            .await
            .unwrap_or_default()
            .into_iter()
            .flat_map(|room| room.members)
            .map(|member| (member.id, (member.handle, member.kind)))
            .collect()
    }

    pub(super) fn message_out(event: &EventRecord, handles: &Handles) -> Option<MessageOut> {
        if event.kind != "message" {
            return None;
        }
        let body: MessageBody = serde_json::from_str(&event.body).ok()?;
        let known = handles.get(&event.from);
        Some(MessageOut {
            room: room_of(event).to_owned(),
            seq: event.seq,
            id: event.id.clone(),
            ts_ms: event.ts_ms,
            from: event.from.clone(),
            from_handle: known.map(|(handle, _)| handle.clone()),
            from_kind: known.map(|(_, kind)| *kind),
            text: body.text,
            mentions: event.mentions.clone(),
            reply_to: body.reply_to,
        })
    }

    /// The messages for the caller after its read markers (in `room` only, when given),
    /// oldest first per room; the markers move past every event looked at.
    pub(super) async fn unread(&self, room: Option<&str>) -> Result<Vec<MessageOut>, ToolError> {
        let only = match room {
            Some(room) => Some(self.room_id(room).await?),
            None => None,
        };
        let handles = self.handles().await;
        self.unread_with(only.as_deref(), &handles).await
    }

    /// [`CallerOps::unread`] with the room already found and the members' handles known.
    pub(super) async fn unread_with(
        &self,
        only: Option<&str>,
        handles: &Handles,
    ) -> Result<Vec<MessageOut>, ToolError> {
        let markers = self.read_markers().await?;
        let mut found = Vec::new();
        let mut read_through = BTreeMap::new();
        for (room, (marker, head)) in markers {
            if only.is_some_and(|only| only != room) || head <= marker {
                continue;
            }
            let mut after = marker;
            while after < head && found.len() < READ_AT_ONCE {
                let page = self.page(&room, Some(after), None, PAGE, false).await?;
                // Read to the end: an agent's routing may have passed over every event up to
                // the head (read before), which then counts as read too.
                let to_the_end = page.events.len() < PAGE as usize && !page.more;
                for event in &page.events {
                    if found.len() == READ_AT_ONCE {
                        break;
                    }
                    after = event.seq;
                    if event.from != self.me()
                        && let Some(message) = Self::message_out(event, handles)
                    {
                        found.push(message);
                    }
                }
                if to_the_end && found.len() < READ_AT_ONCE {
                    after = after.max(head);
                }
                if page.events.is_empty() || to_the_end {
                    break;
                }
            }
            if after > marker {
                read_through.insert(room, after);
            }
            if found.len() == READ_AT_ONCE {
                break;
            }
        }
        self.acknowledge(read_through).await?;
        Ok(found)
    }

    /// The answer to ping `ping` of `room`, stored after `after`, if there is one.
    /// The answer to ping `ping` of `room` stored after `*after`, if there is one; `*after`
    /// moves past what was read, so the next look reads on from there.
    pub(super) async fn answer_to(
        &self,
        room: &str,
        ping: &str,
        after: &mut u64,
    ) -> Result<Option<(EventRecord, AnswerBody)>, ToolError> {
        loop {
            let events = self.events(room, Some(*after), None, PAGE, true).await?;
            let Some(last) = events.last().map(|event| event.seq) else {
                return Ok(None);
            };
            for event in events {
                if event.kind == "answer"
                    && let Ok(body) = serde_json::from_str::<AnswerBody>(&event.body)
                    && body.ping == ping
                {
                    return Ok(Some((event, body)));
                }
            }
            *after = last;
        }
    }
}

/// Waits for room writes until `deadline`: `false` once it has passed or the caller was
/// closed (revoked, stopped).
pub(super) async fn woken(
    watch: &mut tokio::sync::broadcast::Receiver<crate::dispatch::RoomWritten>,
    closes: &mut tokio::sync::broadcast::Receiver<crate::dispatch::PrincipalClosed>,
    me: &str,
    rooms: &std::collections::BTreeSet<String>,
    deadline: tokio::time::Instant,
) -> Result<bool, ToolError> {
    use tokio::sync::broadcast::error::RecvError;
    let look_again = (tokio::time::Instant::now() + LOOK_AGAIN).min(deadline);
    loop {
        tokio::select! {
            written = watch.recv() => match written {
                // Only a write to one of the rooms looked at wakes (a room joined meanwhile
                // is looked at again within LOOK_AGAIN).
                Ok(written) if !rooms.contains(&*written.room) => {}
                Ok(_) | Err(RecvError::Lagged(_)) => return Ok(true),
                Err(RecvError::Closed) => return Ok(false),
            },
            closed = closes.recv() => match closed {
                Ok(closed) if *closed.principal == *me => return Err(ToolError::new(
                    "your token was revoked or you were stopped: nothing more is served",
                    "unauthorized",
                )),
                Ok(_) | Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => return Ok(false),
            },
            () = tokio::time::sleep_until(look_again) => {
                return Ok(tokio::time::Instant::now() < deadline);
            }
        }
    }
}
