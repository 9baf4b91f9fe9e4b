//! encode → decode is the identity for every client and server frame.

use std::collections::BTreeMap;

use proptest::collection::{btree_map, vec};
use proptest::option;
use proptest::prelude::*;
use roundtable_protocol::client::*;
use roundtable_protocol::decode::decode_client_frame;
use roundtable_protocol::model::*;
use roundtable_protocol::server::*;
use roundtable_protocol::{ClientFrame, ErrorCode, ServerFrame};
use serde_json::{Map, Value};

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z0-9_/-]{0,16}",
        "\\PC{0,24}",
        Just(String::new()),
        Just("quote \" backslash \\ newline \n".to_owned()),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        // Finite only: JSON has no NaN or infinity (`Value::from` makes them null).
        any::<f64>()
            .prop_filter("finite", |x| x.is_finite())
            .prop_map(Value::from),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..4).prop_map(Value::Array),
            btree_map("[a-z_]{1,8}", inner, 0..4)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

fn json_object() -> impl Strategy<Value = Value> {
    btree_map("[a-z_]{1,8}", json_value(), 0..5)
        .prop_map(|map| Value::Object(map.into_iter().collect()))
}

fn cursors() -> impl Strategy<Value = BTreeMap<String, u64>> {
    btree_map("[a-z0-9_]{1,10}", any::<u64>(), 0..5)
}

fn discoverable() -> impl Strategy<Value = Discoverable> {
    prop_oneof![
        Just(Discoverable::Private),
        Just(Discoverable::Contacts),
        Just(Discoverable::Public)
    ]
}

fn client_frame() -> impl Strategy<Value = ClientFrame> {
    let id = any::<u64>();
    prop_oneof![
        (id, text(), text(), text(), text()).prop_map(|(id, token, device, name, version)| {
            ClientFrame::Auth(Auth {
                id,
                token,
                device,
                client: ClientInfo { name, version },
            })
        }),
        (id, cursors()).prop_map(|(id, cursors)| ClientFrame::Sync(SyncCmd { id, cursors })),
        (id, cursors()).prop_map(|(id, cursors)| ClientFrame::Ack(Ack { id, cursors })),
        (id, text(), text(), text(), json_object()).prop_map(
            |(id, room, client_key, kind, body)| ClientFrame::Send(SendCmd {
                id,
                room,
                client_key,
                kind,
                body
            })
        ),
        (
            id,
            text(),
            option::of(any::<u64>()),
            option::of(any::<u64>()),
            option::of(any::<u32>())
        )
            .prop_map(|(id, room, before, after, limit)| {
                ClientFrame::History(History {
                    id,
                    room,
                    before,
                    after,
                    limit,
                })
            }),
        (
            id,
            option::of(text()),
            option::of(text()),
            vec(text(), 0..3)
        )
            .prop_map(
                |(id, title, topic, members)| ClientFrame::RoomCreate(RoomCreate {
                    id,
                    title,
                    topic,
                    members
                })
            ),
        (id, text(), text()).prop_map(|(id, room, handle)| ClientFrame::RoomInvite(RoomInvite {
            id,
            room,
            handle
        })),
        (id, text(), text()).prop_map(|(id, room, handle)| ClientFrame::RoomKick(RoomKick {
            id,
            room,
            handle
        })),
        (id, text(), option::of(text()), option::of(text())).prop_map(
            |(id, room, title, topic)| ClientFrame::RoomUpdate(RoomUpdate {
                id,
                room,
                title,
                topic
            })
        ),
        (id, text()).prop_map(|(id, room)| ClientFrame::RoomLeave(RoomLeave { id, room })),
        id.prop_map(|id| ClientFrame::Rooms(Rooms { id })),
        (id, text(), any::<bool>()).prop_map(|(id, room, all)| {
            ClientFrame::MemberSet(MemberSet {
                id,
                room,
                routing: if all { Routing::All } else { Routing::Mentions },
            })
        }),
        (
            id,
            option::of(text()),
            option::of(text()),
            option::of(discoverable())
        )
            .prop_map(|(id, principal, name, discoverable)| {
                ClientFrame::ProfileSet(ProfileSet {
                    id,
                    principal,
                    name,
                    discoverable,
                })
            }),
        (id, option::of(text()), option::of(any::<u32>())).prop_map(|(id, query, limit)| {
            ClientFrame::Directory(Directory { id, query, limit })
        }),
        (
            id,
            text(),
            option::of(text()),
            option::of(json_object()),
            option::of(discoverable())
        )
            .prop_map(|(id, name, description, card, discoverable)| {
                ClientFrame::RegisterAgent(RegisterAgent {
                    id,
                    name,
                    description,
                    card,
                    discoverable,
                })
            }),
        (id, any::<bool>()).prop_map(|(id, rotate)| {
            ClientFrame::UserToken(UserToken {
                id,
                action: if rotate {
                    TokenAction::Rotate
                } else {
                    TokenAction::Revoke
                },
            })
        }),
        (id, text(), any::<bool>()).prop_map(|(id, agent, rotate)| {
            ClientFrame::AgentToken(AgentToken {
                id,
                agent,
                action: if rotate {
                    TokenAction::Rotate
                } else {
                    TokenAction::Revoke
                },
            })
        }),
        (id, text(), option::of(text())).prop_map(|(id, to, message)| {
            ClientFrame::ContactRequest(ContactRequestCmd { id, to, message })
        }),
        (id, text(), any::<bool>()).prop_map(|(id, request, accept)| {
            ClientFrame::ContactRespond(ContactRespond {
                id,
                request,
                accept,
            })
        }),
        id.prop_map(|id| ClientFrame::Contacts(Contacts { id })),
        (
            id,
            option::of(text()),
            option::of(any::<u32>()),
            option::of(any::<u64>())
        )
            .prop_map(|(id, room, max_uses, expires_in_s)| {
                ClientFrame::InviteCreate(InviteCreate {
                    id,
                    room,
                    max_uses,
                    expires_in_s,
                })
            }),
        (id, text()).prop_map(|(id, code)| ClientFrame::InviteRedeem(InviteRedeem { id, code })),
        (id, text())
            .prop_map(|(id, invite)| ClientFrame::InviteRevoke(InviteRevoke { id, invite })),
        id.prop_map(|id| ClientFrame::Invites(Invites { id })),
        (id, text(), 0..3u8, option::of(text()), option::of(text())).prop_map(
            |(id, agent, action, room, reason)| {
                ClientFrame::Control(Control {
                    id,
                    agent,
                    action: [
                        ControlAction::Pause,
                        ControlAction::Resume,
                        ControlAction::Stop,
                    ][action as usize],
                    room,
                    reason,
                })
            }
        ),
        (
            id,
            option::of(text()),
            option::of(text()),
            option::of(any::<u32>())
        )
            .prop_map(|(id, principal, since, limit)| ClientFrame::Audit(Audit {
                id,
                principal,
                since,
                limit
            })),
    ]
}

fn event() -> impl Strategy<Value = Event> {
    (
        any::<bool>(),
        text(),
        any::<u64>(),
        text(),
        text(),
        text(),
        text(),
        json_object(),
        option::of(text()),
    )
        .prop_map(
            |(in_room, stream, seq, id, ts, from, kind, body, client_key)| Event {
                room: in_room.then(|| stream.clone()),
                stream: (!in_room).then_some(stream),
                seq,
                id,
                ts,
                from,
                kind,
                body,
                client_key,
            },
        )
}

fn server_frame() -> impl Strategy<Value = ServerFrame> {
    let codes = proptest::sample::select(ErrorCode::ALL.to_vec());
    prop_oneof![
        (
            any::<u32>(),
            text(),
            text(),
            any::<u64>(),
            any::<u64>(),
            any::<u64>(),
            option::of(any::<u64>()),
            option::of(any::<u64>())
        )
            .prop_map(
                |(proto, hub, epoch, hb_ms, max_frame, max_queue, replay_max, max_queue_bytes)| {
                    ServerFrame::Hello(Hello {
                        proto,
                        hub,
                        epoch,
                        hb_ms,
                        max_frame,
                        max_queue,
                        replay_max,
                        max_queue_bytes,
                    })
                }
            ),
        (any::<u64>(), btree_map("[a-q]{1,8}", json_value(), 0..4)).prop_map(|(re, fields)| {
            ServerFrame::Ok(OkReply {
                re,
                fields: fields.into_iter().collect::<Map<String, Value>>(),
            })
        }),
        (
            option::of(any::<u64>()),
            codes,
            text(),
            option::of(any::<u64>())
        )
            .prop_map(
                |(re, code, msg, retry_after_ms)| ServerFrame::Err(ErrReply {
                    re,
                    code,
                    msg,
                    retry_after_ms
                })
            ),
        event().prop_map(ServerFrame::Evt),
        (text(), any::<u64>(), any::<u64>()).prop_map(|(room, from, to)| ServerFrame::Gap(Gap {
            room,
            from,
            to
        })),
    ]
}

#[test]
fn an_invite_create_ok_from_a_hub_before_withdrawable_invites_has_no_id() {
    let ok = OkReply {
        re: 1,
        fields: serde_json::from_str(r#"{"code":"abc","link":"roundtable://invite/abc?hub=h:1"}"#)
            .unwrap(),
    };
    let created: InviteCreateOk = ok.decode().unwrap();
    assert_eq!(created.invite, None);
    assert_eq!(created.code, "abc");
}

/// A `send` whose body holds `number` (written as JSON), as a client would frame it.
fn send_with_number(number: &str) -> String {
    format!(
        r#"{{"t":"send","id":1,"room":"r_1","client_key":"k-00000001","kind":"x-measure","body":{{"n":{number},"list":[{number}]}}}}"#
    )
}

/// decode → encode → decode gives the frame of the first decode.
fn decodes_to_itself_again(text: &str) -> Result<(), String> {
    let first = decode_client_frame(text).map_err(|error| format!("{error:?}"))?;
    let again = decode_client_frame(&first.to_json()).map_err(|error| format!("{error:?}"))?;
    if again == first {
        Ok(())
    } else {
        Err(format!("{} became {}", first.to_json(), again.to_json()))
    }
}

/// Decimal numbers with more digits than an `f64` holds, which a hub stores and forwards in
/// bodies: parsing must round them correctly, or the number a client reads back is one ulp
/// off the one it sent (serde_json's fast float parsing did that; see `float_roundtrip` in
/// protocol/Cargo.toml). The first two failed before the fix.
#[test]
fn long_decimal_numbers_in_bodies_round_trip() {
    let digits_170 = "1".repeat(170);
    let fraction_170 = format!("0.{}", "7".repeat(170));
    let nines_170 = format!("{}e-200", "9".repeat(170));
    let cases = [
        // Parsed one ulp low (9.999999999999999e-31) before the fix.
        nines_170.as_str(),
        "27219128784045033000000000000000000000000000000000000000000000000000000000000000000000000000000",
        digits_170.as_str(),
        fraction_170.as_str(),
        "2.2250738585072011e-308",
        "9007199254740993.0000000000000000000000000000000000000000000000000000000000001",
        "0.30000000000000004",
        "1.7976931348623157e308",
        "5e-324",
    ];
    for number in cases {
        decodes_to_itself_again(&send_with_number(number)).unwrap();
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Any decimal of up to 170 digits, integral, fractional or with an exponent, comes back
    /// as the same number after decode → encode → decode.
    #[test]
    fn long_decimal_numbers_round_trip(
        integral in "[1-9][0-9]{0,169}",
        fraction in "[0-9]{0,170}",
        exponent in proptest::option::of(-320i32..300),
    ) {
        let mut number = integral;
        if !fraction.is_empty() {
            number.push('.');
            number.push_str(&fraction);
        }
        if let Some(exponent) = exponent {
            number.push_str(&format!("e{exponent}"));
        }
        // Past f64's range a number is refused (bad_frame), which is fine: nothing to compare.
        let text = send_with_number(&number);
        if decode_client_frame(&text).is_ok() {
            prop_assert_eq!(decodes_to_itself_again(&text), Ok(()), "{}", number);
        }
    }

    #[test]
    fn client_frames_round_trip(frame in client_frame()) {
        let json = frame.to_json();
        prop_assert_eq!(&serde_json::from_str::<ClientFrame>(&json).unwrap(), &frame);
        // The hub's two-pass decoder agrees with serde, but for strings holding what their
        // field refuses (a control character in an id, say), which it names.
        match frame.check_strings() {
            Ok(()) => prop_assert_eq!(decode_client_frame(&json).unwrap(), frame),
            Err(refused) => {
                let error = decode_client_frame(&json).unwrap_err();
                prop_assert_eq!((error.re, error.code), (Some(frame.id()), ErrorCode::BadFrame));
                prop_assert!(error.msg.contains(&refused.field), "{}", error.msg);
            }
        }
    }

    #[test]
    fn server_frames_round_trip(frame in server_frame()) {
        let json = frame.to_json();
        prop_assert_eq!(ServerFrame::from_json(&json).unwrap(), frame);
    }

    #[test]
    fn ok_payloads_round_trip(event in event(), dup in any::<bool>(), re in any::<u64>()) {
        let ok = OkReply::with(re, &SendOk { event: event.clone(), dup });
        let ServerFrame::Ok(back) = ServerFrame::from_json(&ServerFrame::Ok(ok).to_json()).unwrap() else {
            panic!("not an ok");
        };
        prop_assert_eq!(back.re, re);
        prop_assert_eq!(back.decode::<SendOk>().unwrap(), SendOk { event, dup });
    }

    #[test]
    fn decoder_never_panics_on_arbitrary_text(input in "\\PC{0,200}") {
        if let Err(error) = decode_client_frame(&input) {
            prop_assert!(matches!(error.code, ErrorCode::BadFrame | ErrorCode::Unsupported));
        }
    }
}
