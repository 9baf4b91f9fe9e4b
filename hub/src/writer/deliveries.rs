//! What a committed batch releases: each command's reply, the events with their recipients
//! of that moment, closes; and, in a cluster, the same as a shared batch for the others.

use super::*;

impl Writer {
    /// What the dispatcher must do for one committed (or failed) request, in order.
    pub(super) fn deliveries(&self, item: Pending, committed: Instant, out: &mut Vec<Delivery>) {
        match item {
            Pending::Command {
                caller,
                command,
                result,
                permit,
                ..
            } => match result {
                Ok(outcome) => {
                    let reply = match outcome.reply {
                        Reply::Ok(ok) => Outbound::Frame(ServerFrame::Ok(ok).to_json()),
                        Reply::Sent { event, dup } => Outbound::Sent {
                            re: command.id(),
                            event,
                            dup,
                        },
                    };
                    out.push(Delivery::Reply {
                        conn: caller.conn,
                        item: reply,
                        permit: Some(permit),
                    });
                    self.outcome_deliveries(outcome.events, outcome.effects, committed, out);
                }
                Err(refusal) => {
                    self.metrics.refused.fetch_add(1, Ordering::Relaxed);
                    out.push(Delivery::Reply {
                        conn: caller.conn,
                        item: Outbound::Err {
                            re: Some(command.id()),
                            refusal,
                        },
                        permit: Some(permit),
                    });
                }
            },
            Pending::Auth {
                conn,
                device,
                reply,
                result,
                ..
            } => out.push(Delivery::Auth {
                conn,
                device,
                reply,
                result,
            }),
            Pending::Call { reply, result, .. } => {
                let result = match result {
                    Ok(outcome) => {
                        self.outcome_deliveries(outcome.events, outcome.effects, committed, out);
                        Ok(outcome.reply)
                    }
                    Err(refusal) => {
                        self.metrics.refused.fetch_add(1, Ordering::Relaxed);
                        Err(refusal)
                    }
                };
                out.push(Delivery::Answer(crate::dispatch::Answer::Call {
                    reply,
                    result,
                }));
            }
            Pending::Authenticated { reply, result, .. } => {
                out.push(Delivery::Answer(crate::dispatch::Answer::Principal {
                    reply,
                    result,
                }));
            }
            Pending::Signup { reply, result, .. } => {
                let result = result.map(|mut outcome| {
                    for event in std::mem::take(&mut outcome.events) {
                        out.push(self.event_delivery(event, committed));
                    }
                    outcome
                });
                out.push(Delivery::Signup { reply, result });
            }
            Pending::Operator { reply, result, .. } => {
                let result = result.map(|(token, close)| {
                    out.push(Delivery::Effect(close));
                    token
                });
                out.push(Delivery::Operator { reply, result });
            }
            Pending::Events(events) => {
                for event in events {
                    out.push(self.event_delivery(event, committed));
                }
            }
            Pending::Refused(_) => {}
        }
    }

    /// A command's events and effects, counted and queued for the dispatcher.
    pub(super) fn outcome_deliveries(
        &self,
        events: Vec<NewEvent>,
        effects: Vec<roundtable_engine::Effect>,
        committed: Instant,
        out: &mut Vec<Delivery>,
    ) {
        self.metrics
            .events_written
            .fetch_add(events.len() as u64, Ordering::Relaxed);
        for event in events {
            out.push(self.event_delivery(event, committed));
        }
        out.extend(effects.into_iter().map(Delivery::Effect));
    }

    /// A committed event, for the dispatcher.
    pub(super) fn event_delivery(&self, event: NewEvent, committed: Instant) -> Delivery {
        Delivery::Event {
            event: Arc::new(LiveEvent::new(event.record, committed)),
            recipients: event.recipients,
            origin: event.origin,
        }
    }
}

/// What a committed batch tells the other processes of a cluster: its changes, and what
/// it delivers to everyone (events, closes, authenticated devices).
pub(super) fn shared_batch(
    ops: Vec<roundtable_engine::records::WriteOp>,
    pending: &[Pending],
    buckets: Vec<roundtable_engine::records::SharedBucket>,
) -> SharedBatch {
    let mut shared = SharedBatch {
        ops,
        buckets,
        ..SharedBatch::default()
    };
    let mut events = |events: &[NewEvent]| {
        for event in events {
            shared.events.push(roundtable_engine::records::SharedEvent {
                stream: event.record.stream.clone(),
                seq: event.record.seq,
                recipients: (&event.recipients).into(),
            });
        }
    };
    let mut closes = Vec::new();
    let mut auths = Vec::new();
    for item in pending {
        match item {
            Pending::Command {
                result: Ok(outcome),
                ..
            }
            | Pending::Call {
                result: Ok(outcome),
                ..
            } => {
                events(&outcome.events);
                closes.extend(outcome.effects.iter().map(close_of));
            }
            Pending::Signup {
                result: Ok(outcome),
                ..
            } => events(&outcome.events),
            Pending::Events(written) => events(written),
            Pending::Auth {
                device,
                result: Ok(principal),
                ..
            } => auths.push(roundtable_engine::records::SharedAuth {
                principal: principal.id.clone(),
                device: device.clone(),
            }),
            Pending::Operator {
                result: Ok((_, close)),
                ..
            } => closes.push(close_of(close)),
            _ => {}
        }
    }
    shared.closes = closes;
    shared.auths = auths;
    shared
}

pub(super) fn close_of(effect: &roundtable_engine::Effect) -> (String, u16) {
    let roundtable_engine::Effect::Close { principal, code } = effect;
    (principal.clone(), code.code())
}
