//! Consent: contacts made by a request one side sends and the other side (or, for an
//! agent, its owner) accepts. Nothing crosses owners without it. (The directory, a read
//! over every principal, is served by the connection: see `ReadStore::directory`.)

use std::collections::BTreeSet;

use roundtable_protocol::ErrorCode;
use roundtable_protocol::bodies::ContactBody;
use roundtable_protocol::client::{ContactRequestCmd, ContactRespond, RoomCreate, SendCmd};
use roundtable_protocol::limits;
use roundtable_protocol::model::{self, RequestState};
use roundtable_protocol::server::{ContactRequestOk, ContactsOk, OkReply};

use super::existence::shown;
use super::{Caller, ConnId, Engine, ExecError, NewEvent, Outcome, Refusal, Reply, Via, refuse};
use crate::records::{ContactRecord, HeldMessage, PrincipalRecord, RequestRecord, StreamKey};
use crate::state::HubState;
use crate::store::WriteTx;

/// A contact request as `open_request` takes it.
struct NewRequest {
    id: u64,
    to: String,
    message: Option<String>,
    held: Option<HeldMessage>,
}

/// A message from a gateway (an A2A client) to an agent its sender has no consent for. The
/// hub makes one contact request for it, carrying `note`, and holds the message with the
/// request, in no room: accepted, it is sent as the sender in a new room of the two;
/// rejected, cancelled or expired, its body is deleted. One held message per pending
/// request: another is refused (`conflict`) until the owner decides.
#[derive(Debug, Clone)]
pub struct HoldForConsent {
    /// The agent's handle.
    pub target: String,
    /// What the owner reads with the request (at most [`limits::CONTACT_MESSAGE`] bytes).
    pub note: String,
    /// The key the message is sent with once accepted.
    pub client_key: String,
    /// The `message` body to send, as JSON.
    pub body: serde_json::Value,
}

impl HoldForConsent {
    /// Its strings, checked as those of a `contact_request` and of the `send` it becomes
    /// are (see `roundtable_protocol::text`).
    /// `length` is the body's, serialized.
    fn check_strings(&self, length: usize) -> Result<(), Refusal> {
        use roundtable_protocol::text::{self, Shape};
        let bad = |msg: String| Refusal::new(ErrorCode::BadFrame, msg);
        text::check(|| "target".into(), &self.target, Shape::Identifier)
            .and_then(|()| text::check(|| "note".into(), &self.note, Shape::Prose))
            .and_then(|()| text::check(|| "client_key".into(), &self.client_key, Shape::Identifier))
            .map_err(|refused| bad(format!("invalid held message: {refused}")))?;
        roundtable_protocol::bodies::parse_client_body(
            &roundtable_protocol::bodies::EventKind::Message,
            &self.body,
            length,
        )
        .map(drop)
        .map_err(|error| Refusal::new(error.code, error.msg))
    }
}

/// The largest body held (a message's text is at most 16 KiB, with its A2A parts).
pub const HELD_BODY_MAX: usize = 64 * 1024;

/// Contact requests one principal may make in a day.
pub const DAILY_REQUESTS_AGENT: usize = 10;
pub const DAILY_REQUESTS_USER: usize = 50;
const DAY_MS: i64 = 24 * 60 * 60 * 1000;

pub use crate::records::REQUEST_LIFETIME_MS;

/// Whether a pending request's time is up.
fn expired(request: &RequestRecord, now_ms: i64) -> bool {
    request.state == RequestState::Pending && now_ms >= request.created_ms + REQUEST_LIFETIME_MS
}

/// The request as replies show it.
pub(super) fn wire_request(request: &RequestRecord) -> model::ContactRequest {
    model::ContactRequest {
        id: request.id.clone(),
        from: request.from.clone(),
        to: request.to.clone(),
        state: request.state,
        message: request.message.clone(),
        ts: roundtable_protocol::ts::format_millis(request.created_ms),
    }
}

/// The title of the room an A2A client and an agent talk in.
pub fn pair_room_title(sender: &PrincipalRecord, target: &PrincipalRecord) -> String {
    format!("A2A: {} → {}", sender.handle, target.handle)
}

/// A contact note cut to fit a request: at most [`limits::CONTACT_MESSAGE`] bytes with its
/// `…`, on a character boundary.
pub fn cut_note(text: &str) -> String {
    if text.len() <= limits::CONTACT_MESSAGE {
        return text.to_owned();
    }
    let mut end = limits::CONTACT_MESSAGE - '…'.len_utf8();
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

impl HubState {
    /// The principals who hear about a request: both parties and their owners.
    fn request_audience(&self, request: &RequestRecord) -> BTreeSet<String> {
        let mut audience = BTreeSet::new();
        for party in [&request.from, &request.to] {
            audience.insert(party.clone());
            if let Some(principal) = self.principal(party) {
                audience.insert(self.owner_of(principal).to_owned());
            }
        }
        audience
    }
}

impl Engine {
    pub(super) fn contact_request(
        &mut self,
        tx: &mut dyn WriteTx,
        now_ms: i64,
        caller: &Caller,
        request: ContactRequestCmd,
    ) -> Result<Outcome, ExecError> {
        let request = NewRequest {
            id: request.id,
            to: request.to,
            message: request.message,
            held: None,
        };
        self.open_request(tx, now_ms, caller, request)
    }

    /// Opens a contact request from the caller (after every check `contact_request`
    /// makes), holding a message with it when a gateway asks.
    fn open_request(
        &mut self,
        tx: &mut dyn WriteTx,
        now_ms: i64,
        caller: &Caller,
        request: NewRequest,
    ) -> Result<Outcome, ExecError> {
        if let Some(message) = &request.message
            && message.len() > limits::CONTACT_MESSAGE
        {
            return refuse(
                ErrorCode::TooLarge,
                format!(
                    "the message is {} bytes; a contact request carries at most {}",
                    message.len(),
                    limits::CONTACT_MESSAGE
                ),
            );
        }
        let from = self.caller_record(caller)?.clone();
        let Some(to) = self.state.by_handle(&request.to).cloned() else {
            return refuse(
                ErrorCode::NotFound,
                format!(
                    "no principal you can see has the handle {}",
                    shown(&request.to)
                ),
            );
        };
        if to.id == from.id {
            return refuse(
                ErrorCode::Conflict,
                "you cannot ask yourself to be a contact",
            );
        }
        if !self.state.may_see(&from, &to) {
            // The same answer as for a handle that does not exist: nothing leaks.
            return refuse(
                ErrorCode::NotFound,
                format!(
                    "no principal you can see has the handle {}",
                    shown(&request.to)
                ),
            );
        }
        if self.state.are_kin(&from, &to) {
            return refuse(
                ErrorCode::Conflict,
                format!("{} is your kin: invite it to rooms directly", to.handle),
            );
        }
        if self.state.is_contact(&from.id, &to.id) {
            return refuse(
                ErrorCode::Conflict,
                format!("{} is already a contact", to.handle),
            );
        }
        // Checked before anything is written (the expiry just below writes).
        self.check_request_allowance(now_ms, &from)?;
        // A request between them whose 14 days are up is recorded as expired now, before
        // the new one takes its place.
        let mut events = Vec::new();
        for pair in [
            (from.id.clone(), to.id.clone()),
            (to.id.clone(), from.id.clone()),
        ] {
            if let Some(id) = self.state.pending.get(&pair)
                && expired(&self.state.requests[id], now_ms)
            {
                let stale = self.state.requests[id].clone();
                events.extend(self.decide(tx, now_ms, &from.id, stale, RequestState::Expired)?);
            }
        }
        if let Some(id) = self.state.pending.get(&(from.id.clone(), to.id.clone()))
            && !expired(&self.state.requests[id], now_ms)
        {
            return refuse(
                ErrorCode::Conflict,
                format!("your request {id} to {} is still pending", to.handle),
            );
        }
        if let Some(id) = self.state.pending.get(&(to.id.clone(), from.id.clone()))
            && !expired(&self.state.requests[id], now_ms)
        {
            return refuse(
                ErrorCode::Conflict,
                format!(
                    "{} already asked you (request {id}): accept it with contact_respond",
                    to.handle
                ),
            );
        }
        let record = RequestRecord {
            id: self.ids.id("c"),
            from: from.id.clone(),
            to: to.id.clone(),
            state: RequestState::Pending,
            message: request.message.filter(|message| !message.is_empty()),
            created_ms: now_ms,
            decided_ms: None,
            held: request.held,
        };
        tx.upsert_request(&record)?;
        self.state.put_request(record.clone());
        self.requests_made
            .entry(from.id.clone())
            .or_default()
            .push_back(now_ms);
        self.undo.push(super::Undo::RequestMade(from.id.clone()));
        events.extend(self.announce_request(tx, now_ms, &from.id, &record)?);
        let mut outcome = Outcome::with_events(
            OkReply::with(
                request.id,
                &ContactRequestOk {
                    request: wire_request(&record),
                },
            ),
            events,
        );
        outcome.audit_target = Some(format!("{} {}", record.id, to.id));
        Ok(outcome)
    }

    /// Writes a `contact` event about `request` in the inbox of everyone concerned.
    fn announce_request(
        &mut self,
        tx: &mut dyn WriteTx,
        now_ms: i64,
        by: &str,
        request: &RequestRecord,
    ) -> Result<Vec<NewEvent>, ExecError> {
        let body = ContactBody {
            request: request.id.clone(),
            from: request.from.clone(),
            to: request.to.clone(),
            state: request.state,
            message: request.message.clone(),
        };
        let mut events = Vec::new();
        for principal in self.state.request_audience(request) {
            events.push(self.append_hub(
                tx,
                now_ms,
                StreamKey::Inbox(principal),
                by,
                "contact",
                &body,
            )?);
        }
        Ok(events)
    }

    pub(super) fn contact_respond(
        &mut self,
        tx: &mut dyn WriteTx,
        now_ms: i64,
        caller: &Caller,
        respond: ContactRespond,
    ) -> Result<Outcome, ExecError> {
        // A pending request is in memory; a decided one only in the store.
        let request = match self.state.requests.get(&respond.request) {
            Some(request) => Some(request.clone()),
            None => tx.request(&respond.request)?,
        };
        let Some(request) = request else {
            return refuse(
                ErrorCode::NotFound,
                format!("there is no contact request {}", shown(&respond.request)),
            );
        };
        let owner_of = |id: &str| {
            self.state
                .principal(id)
                .map(|p| self.state.owner_of(p).to_owned())
                .unwrap_or_default()
        };
        // Consent belongs to people (amendment 3): the target decides, or its owner when
        // the target is an agent; the agent itself does not.
        let decider = owner_of(&request.to);
        if caller.id == request.to && decider != request.to {
            return refuse(
                ErrorCode::Forbidden,
                "an agent's contacts are its owner's decision: your owner accepts or rejects \
                 this request",
            );
        }
        let requesters = [request.from.clone(), owner_of(&request.from)];
        let state = if respond.accept {
            if caller.id != decider {
                return refuse(
                    ErrorCode::Forbidden,
                    "only the target of a contact request (or, for an agent, its owner) may \
                     accept it",
                );
            }
            RequestState::Accepted
        } else if caller.id == decider {
            RequestState::Rejected
        } else if requesters.contains(&caller.id) {
            RequestState::Cancelled
        } else {
            return refuse(
                ErrorCode::Forbidden,
                "this contact request is not yours to decide",
            );
        };
        if expired(&request, now_ms) {
            // The writer's housekeeping records and announces the expiry itself.
            return refuse(
                ErrorCode::Conflict,
                "this contact request expired (after 14 days); send a new one",
            );
        }
        if request.state != RequestState::Pending {
            return refuse(
                ErrorCode::Conflict,
                format!("this contact request is already {}", request.state.as_str()),
            );
        }
        let request_id = request.id.clone();
        let events = self.decide(tx, now_ms, &caller.id, request, state)?;
        let mut outcome = Outcome::with_events(OkReply::empty(respond.id), events);
        outcome.audit_target = Some(format!("{request_id} {}", state.as_str()));
        Ok(outcome)
    }

    /// Moves a pending request to its final `state`, makes the contact when accepted, and
    /// tells everyone concerned.
    fn decide(
        &mut self,
        tx: &mut dyn WriteTx,
        now_ms: i64,
        by: &str,
        mut request: RequestRecord,
        state: RequestState,
    ) -> Result<Vec<NewEvent>, ExecError> {
        request.state = state;
        request.decided_ms = Some(now_ms);
        // The held message leaves the request either way: sent, or deleted.
        let held = request
            .held
            .as_mut()
            .and_then(|held| held.body.take().map(|body| (held.client_key.clone(), body)));
        tx.upsert_request(&request)?;
        if state == RequestState::Accepted {
            self.make_contact(tx, now_ms, &request.from, &request.to, Some(&request.id))?;
        }
        self.state.put_request(request.clone());
        let mut events = self.announce_request(tx, now_ms, by, &request)?;
        if state == RequestState::Accepted
            && let Some((client_key, body)) = held
        {
            events.extend(self.deliver_held(tx, now_ms, &request, client_key, &body)?);
        }
        Ok(events)
    }

    /// Sends a message held until consent, as its sender, in a new room of the two; what
    /// the hub refuses (the sender paused or out of writes, say) is not sent, and its task
    /// tells the sender to send again.
    fn deliver_held(
        &mut self,
        tx: &mut dyn WriteTx,
        now_ms: i64,
        request: &RequestRecord,
        client_key: String,
        body: &str,
    ) -> Result<Vec<NewEvent>, ExecError> {
        let (Some(sender), Some(target)) = (
            self.state.principal(&request.from).cloned(),
            self.state.principal(&request.to).cloned(),
        ) else {
            return Ok(Vec::new());
        };
        let caller = Caller {
            id: sender.id.clone(),
            kind: sender.kind,
            device: Via::A2a.as_str().to_owned(),
            conn: ConnId(0),
            via: Via::A2a,
        };
        let mut events = Vec::new();
        let created = self.room_create(
            tx,
            now_ms,
            &caller,
            RoomCreate {
                id: 0,
                title: Some(pair_room_title(&sender, &target)),
                topic: None,
                members: vec![target.handle.clone()],
            },
        );
        let room = match created {
            Ok(outcome) => {
                let room = match &outcome.reply {
                    Reply::Ok(ok) => ok
                        .decode::<roundtable_protocol::server::RoomOk>()
                        .ok()
                        .map(|created| created.room.id),
                    Reply::Sent { .. } => None,
                };
                events.extend(outcome.events);
                room
            }
            Err(ExecError::Refused(refusal)) => {
                tracing::info!(request = %request.id, code = refusal.code.as_str(), "a held message could not be delivered");
                None
            }
            Err(error) => return Err(error),
        };
        let Some(room) = room else {
            return Ok(events);
        };
        let body: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
        let prepared = super::prepare_send(SendCmd {
            id: 0,
            room,
            client_key,
            kind: "message".into(),
            body,
        });
        match prepared
            .map_err(ExecError::Refused)
            .and_then(|prepared| self.send(tx, now_ms, &caller, &prepared))
        {
            Ok(outcome) => events.extend(outcome.events),
            Err(ExecError::Refused(refusal)) => {
                tracing::info!(request = %request.id, code = refusal.code.as_str(), "a held message could not be delivered");
            }
            Err(error) => return Err(error),
        }
        Ok(events)
    }

    /// Whether the caller has a contact request left today, or a refusal (`rate_limited`,
    /// with when the oldest of the day frees one). The request made is counted when stored.
    fn check_request_allowance(
        &mut self,
        now_ms: i64,
        from: &PrincipalRecord,
    ) -> Result<(), ExecError> {
        let limit = match from.kind {
            model::PrincipalKind::Agent => DAILY_REQUESTS_AGENT,
            model::PrincipalKind::User => DAILY_REQUESTS_USER,
        };
        let made = self.requests_made.entry(from.id.clone()).or_default();
        while made.front().is_some_and(|at| *at <= now_ms - DAY_MS) {
            made.pop_front();
        }
        if made.len() >= limit {
            let wait_ms = made
                .front()
                .map_or(DAY_MS, |oldest| oldest + DAY_MS - now_ms);
            let mut refusal = Refusal::new(
                ErrorCode::RateLimited,
                format!(
                    "{limit} contact requests a day is the most for this principal; \
                     the next one is possible in {} minutes",
                    wait_ms / 60_000 + 1
                ),
            );
            refusal.retry_after_ms = Some(wait_ms.max(1) as u64);
            return Err(ExecError::Refused(refusal));
        }
        Ok(())
    }

    /// See [`HoldForConsent`].
    pub(super) fn hold_for_consent(
        &mut self,
        tx: &mut dyn WriteTx,
        now_ms: i64,
        caller: &Caller,
        hold: HoldForConsent,
    ) -> Result<Outcome, ExecError> {
        let body = hold.body.to_string();
        if body.len() > HELD_BODY_MAX {
            return refuse(
                ErrorCode::TooLarge,
                format!("a held message is at most {HELD_BODY_MAX} bytes"),
            );
        }
        hold.check_strings(body.len()).map_err(ExecError::Refused)?;
        let from = self.caller_record(caller)?.clone();
        let held = HeldMessage {
            client_key: hold.client_key.clone(),
            body: Some(body),
        };
        let pending = self
            .state
            .by_handle(&hold.target)
            .filter(|to| self.state.may_see(&from, to))
            .and_then(|to| self.state.pending.get(&(from.id.clone(), to.id.clone())))
            .and_then(|id| self.state.requests.get(id))
            .filter(|request| !expired(request, now_ms))
            .cloned();
        if let Some(mut request) = pending {
            match &request.held {
                // A retry of the message it holds: the same request.
                Some(existing) if existing.client_key == hold.client_key => {}
                Some(_) => {
                    return refuse(
                        ErrorCode::Conflict,
                        format!(
                            "a message to {} already waits for its owner's consent (request \
                             {}); send more once it is accepted",
                            hold.target, request.id
                        ),
                    );
                }
                // A request made another way: it carries the message from now on.
                None => {
                    request.held = Some(held);
                    tx.upsert_request(&request)?;
                    self.state.put_request(request.clone());
                }
            }
            let mut outcome = Outcome::ok(OkReply::with(
                0,
                &ContactRequestOk {
                    request: wire_request(&request),
                },
            ));
            outcome.audit_target = Some(format!("{} {}", request.id, request.to));
            return Ok(outcome);
        }
        let request = NewRequest {
            id: 0,
            to: hold.target,
            message: Some(cut_note(&hold.note)),
            held: Some(held),
        };
        self.open_request(tx, now_ms, caller, request)
    }

    /// Stores a contact between two principals (nothing if they already are contacts).
    pub(super) fn make_contact(
        &mut self,
        tx: &mut dyn WriteTx,
        now_ms: i64,
        a: &str,
        b: &str,
        request: Option<&str>,
    ) -> Result<(), ExecError> {
        if self.state.is_contact(a, b) {
            return Ok(());
        }
        let (a, b) = HubState::contact_key(a, b);
        let contact = ContactRecord {
            a,
            b,
            since_ms: now_ms,
            request: request.map(str::to_owned),
        };
        tx.insert_contact(&contact)?;
        self.state.add_contact(contact);
        Ok(())
    }

    /// Expires every pending request older than 14 days; returns the events announcing it.
    pub fn expire_requests(
        &mut self,
        tx: &mut dyn WriteTx,
        now_ms: i64,
    ) -> Result<Vec<NewEvent>, ExecError> {
        let due: Vec<RequestRecord> = self
            .state
            .pending
            .values()
            .filter_map(|id| self.state.requests.get(id))
            .filter(|request| expired(request, now_ms))
            .cloned()
            .collect();
        let mut events = Vec::new();
        for request in due {
            let to = request.to.clone();
            events.extend(self.decide(tx, now_ms, &to, request, RequestState::Expired)?);
        }
        Ok(events)
    }

    pub(super) fn contacts(&self, now_ms: i64, caller: &Caller, re: u64) -> Outcome {
        let contacts = self
            .state
            .contacts_of
            .get(&caller.id)
            .into_iter()
            .flatten()
            .filter_map(|other| {
                let principal = self.state.principal(other)?;
                let key = HubState::contact_key(&caller.id, other);
                let since = self.state.contacts.get(&key)?.since_ms;
                Some(model::Contact {
                    id: principal.id.clone(),
                    kind: principal.kind,
                    handle: principal.handle.clone(),
                    name: principal.name.clone(),
                    owner: principal.owner.clone(),
                    since: roundtable_protocol::ts::format_millis(since),
                })
            })
            .collect();
        // Pending requests where the caller, or one of its agents, is a party (indexed:
        // no scan of every request).
        let mut requests: Vec<&RequestRecord> = self
            .state
            .pending_of
            .get(&caller.id)
            .into_iter()
            .flatten()
            .filter_map(|id| self.state.requests.get(id))
            .filter(|request| request.state == RequestState::Pending)
            .filter(|request| !expired(request, now_ms))
            .collect();
        requests.sort_by_key(|request| (request.created_ms, request.id.clone()));
        let requests = requests.into_iter().map(wire_request).collect();
        Outcome::ok(OkReply::with(re, &ContactsOk { contacts, requests }))
    }
}
