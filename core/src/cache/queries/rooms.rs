//! Who is who, the rooms, their members and read markers, and their messages.

use super::*;

impl CacheView {
    /// The handle of a principal, if the cache met it.
    pub fn handle_of(&self, id: &str) -> Result<Option<String>, CacheError> {
        Ok(self
            .conn
            .query_row("SELECT handle FROM principals WHERE id = ?1", [id], |row| {
                row.get(0)
            })
            .optional()?)
    }

    /// A principal by id, if the cache met it.
    pub fn principal(&self, id: &str) -> Result<Option<PrincipalRow>, CacheError> {
        self.principal_where("id", id)
    }

    /// A principal by handle, if the cache met it.
    pub fn principal_by_handle(&self, handle: &str) -> Result<Option<PrincipalRow>, CacheError> {
        self.principal_where("handle", handle)
    }

    fn principal_where(
        &self,
        column: &str,
        value: &str,
    ) -> Result<Option<PrincipalRow>, CacheError> {
        Ok(self
            .conn
            .prepare_cached(&format!(
                "SELECT id, kind, handle, name, owner FROM principals WHERE {column} = ?1"
            ))?
            .query_row([value], PrincipalRow::from_row)
            .optional()?)
    }

    /// The rooms we are a member of, with their members and unread counts for `me`.
    pub fn rooms(&self) -> Result<Vec<RoomView>, CacheError> {
        let mut statement = self.conn.prepare(
            "SELECT r.id, r.title, r.topic, r.creator, coalesce(c.seq, 0), coalesce(m.seq, 0)
             FROM rooms r LEFT JOIN cursors c ON c.stream = r.id
             LEFT JOIN read_markers m ON m.stream = r.id
             WHERE r.joined = 1 ORDER BY r.title, r.id",
        )?;
        let mut rooms: Vec<RoomView> = statement
            .query_map([], |row| {
                Ok(RoomView {
                    id: row.get(0)?,
                    title: row.get(1)?,
                    topic: row.get(2)?,
                    creator: row.get(3)?,
                    head: row.get::<_, i64>(4)? as u64,
                    members: Vec::new(),
                    read_to: row.get::<_, i64>(5)? as u64,
                    unread: 0,
                    unread_mentions: 0,
                })
            })?
            .collect::<Result<_, _>>()?;
        for room in &mut rooms {
            room.members = self.members(&room.id)?;
            let (unread, mentions) = self
                .conn
                .prepare_cached(
                    "SELECT others - others_read, mentions - mentions_read FROM room_counts
                     WHERE room = ?1",
                )?
                .query_row([&room.id], |row| {
                    Ok((row.get::<_, i64>(0)?, row.get::<_, i64>(1)?))
                })
                .optional()?
                .unwrap_or((0, 0));
            room.unread = unread.max(0) as u64;
            room.unread_mentions = mentions.max(0) as u64;
        }
        Ok(rooms)
    }

    /// The present members of a room.
    pub fn members(&self, room: &str) -> Result<Vec<MemberView>, CacheError> {
        let mut statement = self.conn.prepare_cached(
            "SELECT m.principal, coalesce(p.handle, m.principal), p.kind FROM members m
             LEFT JOIN principals p ON p.id = m.principal
             WHERE m.room = ?1 AND m.present = 1 ORDER BY 2",
        )?;
        let members = statement
            .query_map([room], |row| {
                Ok(MemberView {
                    id: row.get(0)?,
                    handle: row.get(1)?,
                    kind: closed_opt(row, 2)?,
                })
            })?
            .collect::<Result<_, _>>()?;
        Ok(members)
    }

    /// Our read marker of a stream (0: nothing read).
    pub fn read_marker(&self, stream: &str) -> Result<u64, CacheError> {
        Ok(self
            .conn
            .query_row(
                "SELECT seq FROM read_markers WHERE stream = ?1",
                [stream],
                |row| row.get::<_, i64>(0),
            )
            .optional()?
            .unwrap_or(0) as u64)
    }

    /// Read markers the hub has not been told of yet.
    pub fn unsent_read_markers(&self) -> Result<Vec<(String, u64)>, CacheError> {
        let mut statement = self
            .conn
            .prepare_cached("SELECT stream, seq FROM read_markers WHERE sent = 0")?;
        let markers = statement
            .query_map([], |row| Ok((row.get(0)?, row.get::<_, i64>(1)? as u64)))?
            .collect::<Result<_, _>>()?;
        Ok(markers)
    }

    /// Messages of a room after `after` (oldest first), at most `limit` of the latest, with
    /// our own messages still waiting in the outbox at the end.
    pub fn messages(
        &self,
        room: &str,
        after: u64,
        limit: u32,
    ) -> Result<Vec<MessageView>, CacheError> {
        Ok(self.messages_keyed(room, after, limit)?.0)
    }

    /// [`CacheView::messages`], with the `client_key`s of those still in the outbox: stored,
    /// a message carries the same key, so whoever showed it waiting knows it when it lands.
    pub fn messages_keyed(
        &self,
        room: &str,
        after: u64,
        limit: u32,
    ) -> Result<(Vec<MessageView>, Vec<String>), CacheError> {
        let mut messages = self.stored_messages(room, after, u64::MAX, limit, true)?;
        let mut keys = Vec::new();
        for (message, key) in self.pending_messages(room)? {
            messages.push(message);
            keys.extend(key);
        }
        Ok((messages, keys))
    }

    /// The `client_key` of the stored event `seq` of `stream`: known for our own only.
    pub fn client_key_at(&self, stream: &str, seq: u64) -> Result<Option<String>, CacheError> {
        Ok(self
            .conn
            .prepare_cached("SELECT client_key FROM events WHERE stream = ?1 AND seq = ?2")?
            .query_row(params![stream, seq as i64], |row| row.get(0))
            .optional()?
            .flatten())
    }

    /// The latest `limit` stored messages of a room below seq `before`, oldest first.
    pub fn messages_before(
        &self,
        room: &str,
        before: u64,
        limit: u32,
    ) -> Result<Vec<MessageView>, CacheError> {
        self.stored_messages(room, 0, before, limit, true)
    }

    /// The first `limit` stored messages of a room after seq `after`, oldest first.
    pub fn messages_after(
        &self,
        room: &str,
        after: u64,
        limit: u32,
    ) -> Result<Vec<MessageView>, CacheError> {
        self.stored_messages(room, after, u64::MAX, limit, false)
    }

    /// Stored messages with `after < seq < before`: the `limit` latest or earliest of them,
    /// oldest first.
    fn stored_messages(
        &self,
        room: &str,
        after: u64,
        before: u64,
        limit: u32,
        latest: bool,
    ) -> Result<Vec<MessageView>, CacheError> {
        let order = if latest { "DESC" } else { "ASC" };
        let mut statement = self.conn.prepare_cached(&format!(
            "SELECT * FROM (
                 SELECT {MESSAGE_COLUMNS} FROM events e
                 LEFT JOIN principals p ON p.id = e.sender
                 WHERE e.stream = ?1 AND e.kind = 'message' AND e.seq > ?2 AND e.seq < ?3
                 ORDER BY e.seq {order} LIMIT ?4
             ) ORDER BY seq"
        ))?;
        let before = i64::try_from(before).unwrap_or(i64::MAX);
        let messages = statement
            .query_map(params![room, after as i64, before, limit], message_from_row)?
            .collect::<Result<_, _>>()?;
        Ok(messages)
    }

    /// Unread messages (after our read markers, written by someone else) that are for
    /// `principal`: those that mention it, those in rooms of two members, and, when
    /// `principal` is us and an agent, every message the hub let us see (its routing
    /// decided). Oldest first, at most `limit`.
    pub fn unread_messages_for(
        &self,
        principal: &str,
        everything_visible: bool,
        limit: u32,
    ) -> Result<Vec<MessageView>, CacheError> {
        // Three sources, each read through an index from the read markers on: mentions of
        // the principal, rooms of two members it is one of, and (for an agent's own view)
        // every room.
        let mut statement = self.conn.prepare_cached(&format!(
            "WITH marked AS (
                 SELECT r.id AS room, coalesce(m.seq, 0) AS read FROM rooms r
                 LEFT JOIN read_markers m ON m.stream = r.id WHERE r.joined = 1
             ),
             wanted AS (
                 SELECT mn.room, mn.seq FROM marked k
                 JOIN mentions mn ON mn.principal = ?1 AND mn.room = k.room AND mn.seq > k.read
                 UNION
                 SELECT e.stream, e.seq FROM marked k
                 JOIN events e ON e.stream = k.room AND e.kind = 'message' AND e.seq > k.read
                 WHERE ?2 OR (
                     (SELECT count(*) FROM members m WHERE m.room = k.room AND m.present = 1) = 2
                     AND EXISTS (SELECT 1 FROM members m
                                 WHERE m.room = k.room AND m.principal = ?1 AND m.present = 1))
             )
             SELECT {MESSAGE_COLUMNS} FROM wanted w
             JOIN events e ON e.stream = w.room AND e.seq = w.seq
             LEFT JOIN principals p ON p.id = e.sender
             WHERE e.sender != ?1 AND e.kind = 'message'
             ORDER BY e.ts_ms, e.stream, e.seq LIMIT ?3"
        ))?;
        let messages = statement
            .query_map(
                params![principal, everything_visible, limit],
                message_from_row,
            )?
            .collect::<Result<_, _>>()?;
        Ok(messages)
    }
}
