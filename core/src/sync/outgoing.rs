//! What a session sends while it runs: the outbox drained in order (a send retried with its
//! `client_key` until acknowledged, any other command at most once), gaps filled with
//! `history`, the `rooms` snapshot asked for, read markers sent with `ack`.

use super::*;

impl Session {
    /// Asks for the snapshot of our rooms (titles, topics, members as of their heads).
    pub(super) async fn request_rooms(&mut self, link: &mut Link) -> Result<(), SyncError> {
        let id = link.id();
        link.send(&ClientFrame::Rooms(Rooms { id })).await?;
        self.pending.insert(id, Pending::Rooms);
        Ok(())
    }

    /// Asks for history pages of the gaps not being fetched yet.
    pub(super) async fn fill_gaps(&mut self, link: &mut Link) -> Result<(), SyncError> {
        let gaps = self.shared.write(|cache| cache.gaps()).await?;
        for (room, from, to) in gaps {
            if self.filling.len() >= HISTORY_IN_FLIGHT {
                break;
            }
            if !self.filling.insert((room.clone(), from)) {
                continue;
            }
            let id = link.id();
            link.send(&ClientFrame::History(History {
                id,
                room: room.clone(),
                before: Some(to + 1),
                after: Some(from - 1),
                limit: Some(HISTORY_PAGE),
            }))
            .await?;
            self.pending.insert(
                id,
                Pending::History {
                    room,
                    gap_from: from,
                    gap_to: to,
                },
            );
        }
        Ok(())
    }

    /// Sends the oldest queued entry, unless one is in flight or a delay holds the queue.
    pub(super) async fn flush_outbox(&mut self, link: &mut Link) -> Result<(), SyncError> {
        if !self.synced || self.outbox_busy {
            return Ok(());
        }
        if let Some(at) = self.outbox_not_before
            && tokio::time::Instant::now() < at
        {
            return Ok(());
        }
        let owner = self.shared.lock.id.clone();
        let id = link.id();
        let (next, unreadable) = self
            .shared
            .write(move |cache| {
                let mut unreadable = Vec::new();
                loop {
                    let Some(entry) = cache.next_queued(&owner)? else {
                        return Ok((Next::Nothing, unreadable));
                    };
                    let Some(frame) = with_id(&entry, id) else {
                        cache.mark_failed(
                            entry.n,
                            FailureCode::Unreadable.as_str(),
                            "this outbox entry is unreadable; it was not sent",
                        )?;
                        unreadable.push(entry.n);
                        continue;
                    };
                    if let Some(retry_ms) = entry.retry_ms
                        && retry_ms > now_ms()
                    {
                        return Ok((Next::NotBefore(retry_ms), unreadable));
                    }
                    if !cache.claim(entry.n, &owner)? {
                        // Another process on this profile took it a moment ago.
                        return Ok((Next::Taken, unreadable));
                    }
                    return Ok((Next::Send(entry.n, entry.kind, frame), unreadable));
                }
            })
            .await?;
        for n in unreadable {
            self.shared.finish(
                n,
                Outcome::Failed {
                    code: FailureCode::Unreadable,
                    msg: "unreadable outbox entry".into(),
                },
            );
            self.shared.changed(Change::Outbox);
        }
        match next {
            Next::Nothing => Ok(()),
            Next::NotBefore(retry_ms) => {
                let wait = Duration::from_millis((retry_ms - now_ms()).max(0) as u64);
                self.outbox_not_before = Some(tokio::time::Instant::now() + wait);
                Ok(())
            }
            Next::Taken => {
                self.shared.outbox_ready.notify_one();
                Ok(())
            }
            Next::Send(n, kind, frame) => {
                self.outbox_busy = true;
                self.pending.insert(
                    id,
                    Pending::Outbox {
                        n,
                        kind,
                        secret: frame.reply_has_secret(),
                    },
                );
                Ok(link.send(&frame).await?)
            }
        }
    }

    /// Tells the hub of read markers it has not heard of.
    pub(super) async fn send_acks(&mut self, link: &mut Link) -> Result<(), SyncError> {
        if !self.synced || self.acking {
            return Ok(());
        }
        let markers = self
            .shared
            .write(|cache| cache.unsent_read_markers())
            .await?;
        if markers.is_empty() {
            return Ok(());
        }
        let id = link.id();
        self.acking = true;
        let cursors = markers.iter().cloned().collect();
        self.pending.insert(id, Pending::Ack(markers));
        Ok(link.send(&ClientFrame::Ack(Ack { id, cursors })).await?)
    }
}

/// The entry's frame with its command id set.
pub(super) fn with_id(entry: &OutboxEntry, id: u64) -> Option<ClientFrame> {
    let mut value: serde_json::Value = serde_json::from_str(&entry.frame).ok()?;
    value["id"] = serde_json::Value::from(id);
    serde_json::from_value(value).ok()
}
