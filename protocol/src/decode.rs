//! Decoding untrusted client frames.
//!
//! The protocol distinguishes three failures, and the reply must carry the command's `id`
//! whenever there is one, so a plain `serde_json::from_str::<ClientFrame>` is not enough:
//! a first pass reads only `t` and `id`, the second decodes the command, and a third checks
//! its strings ([`crate::text::Shape`]).

use serde::Deserialize;
use serde_json::Value;

use crate::client::ClientFrame;
use crate::codes::ErrorCode;

/// Why a text frame is not a valid command: the `err` the hub answers with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    /// The frame's `id`, when it had a usable one.
    pub re: Option<u64>,
    /// `bad_frame` or `unsupported`.
    pub code: ErrorCode,
    pub msg: String,
}

#[derive(Deserialize)]
struct Envelope {
    #[serde(default)]
    t: Option<Value>,
    #[serde(default)]
    id: Option<Value>,
}

/// Decodes one text frame from a client.
pub fn decode_client_frame(text: &str) -> Result<ClientFrame, DecodeError> {
    let bad = |re: Option<u64>, msg: String| DecodeError {
        re,
        code: ErrorCode::BadFrame,
        msg,
    };
    // A struct also deserializes from a JSON array (`[t, id]`): refuse anything but an object.
    if !text
        .trim_start_matches([' ', '\t', '\n', '\r'])
        .starts_with('{')
    {
        return Err(match serde_json::from_str::<serde::de::IgnoredAny>(text) {
            Ok(_) => bad(
                None,
                "a frame must be a JSON object with a string field \"t\"".into(),
            ),
            Err(error) => bad(
                None,
                format!("the frame is not valid JSON: {}", describe(&error)),
            ),
        });
    }
    let envelope: Envelope = match serde_json::from_str(text) {
        Ok(envelope) => envelope,
        Err(error) if error.is_data() => {
            return Err(bad(
                None,
                "a frame must be a JSON object with a string field \"t\"".into(),
            ));
        }
        Err(error) => {
            return Err(bad(
                None,
                format!("the frame is not valid JSON: {}", describe(&error)),
            ));
        }
    };
    let re = match envelope.id {
        None => None,
        Some(id) => match id.as_u64() {
            Some(id) => Some(id),
            None => {
                return Err(bad(
                    None,
                    format!(
                        "\"id\" must be a non-negative integer, got {}",
                        truncate(&id.to_string())
                    ),
                ));
            }
        },
    };
    let t = match envelope.t {
        Some(Value::String(t)) => t,
        Some(other) => {
            return Err(bad(
                re,
                format!("\"t\" must be a string, got {}", kind_of(&other)),
            ));
        }
        None => return Err(bad(re, "the frame has no \"t\" (its type)".into())),
    };
    if !ClientFrame::TYPES.contains(&t.as_str()) {
        return Err(DecodeError {
            re,
            code: ErrorCode::Unsupported,
            msg: format!("unknown frame type {:?}", truncate(&t)),
        });
    }
    let Some(id) = re else {
        return Err(bad(
            None,
            format!("a {t} command needs an integer \"id\" to answer to"),
        ));
    };
    match decode_as(&t, text) {
        Ok(frame) => {
            debug_assert_eq!(frame.id(), id);
            match frame.check_strings() {
                Ok(()) => Ok(frame),
                Err(refused) => Err(bad(Some(id), format!("invalid {t} command: {refused}"))),
            }
        }
        Err(error) => Err(bad(
            Some(id),
            format!("invalid {t} command: {}", describe(&error)),
        )),
    }
}

/// Decodes the command `t` directly as its struct: unlike the tagged enum, which first
/// buffers every field, this reads the frame once (the `t` field is ignored as unknown).
fn decode_as(t: &str, text: &str) -> Result<ClientFrame, serde_json::Error> {
    use crate::client::*;
    use serde_json::from_str;
    Ok(match t {
        "auth" => ClientFrame::Auth(from_str(text)?),
        "sync" => ClientFrame::Sync(from_str(text)?),
        "ack" => ClientFrame::Ack(from_str(text)?),
        "send" => ClientFrame::Send(from_str(text)?),
        "history" => ClientFrame::History(from_str(text)?),
        "room_create" => ClientFrame::RoomCreate(from_str(text)?),
        "room_invite" => ClientFrame::RoomInvite(from_str(text)?),
        "room_kick" => ClientFrame::RoomKick(from_str(text)?),
        "room_update" => ClientFrame::RoomUpdate(from_str(text)?),
        "room_leave" => ClientFrame::RoomLeave(from_str(text)?),
        "rooms" => ClientFrame::Rooms(from_str::<Rooms>(text)?),
        "member_set" => ClientFrame::MemberSet(from_str(text)?),
        "profile_set" => ClientFrame::ProfileSet(from_str(text)?),
        "directory" => ClientFrame::Directory(from_str(text)?),
        "register_agent" => ClientFrame::RegisterAgent(from_str(text)?),
        "register_remote_agent" => ClientFrame::RegisterRemoteAgent(from_str(text)?),
        "agent_token" => ClientFrame::AgentToken(from_str(text)?),
        "user_token" => ClientFrame::UserToken(from_str(text)?),
        "contact_request" => ClientFrame::ContactRequest(from_str(text)?),
        "contact_respond" => ClientFrame::ContactRespond(from_str(text)?),
        "contacts" => ClientFrame::Contacts(from_str::<Contacts>(text)?),
        "invite_create" => ClientFrame::InviteCreate(from_str(text)?),
        "invite_redeem" => ClientFrame::InviteRedeem(from_str(text)?),
        "invite_revoke" => ClientFrame::InviteRevoke(from_str(text)?),
        "invites" => ClientFrame::Invites(from_str::<Invites>(text)?),
        "control" => ClientFrame::Control(from_str(text)?),
        "audit" => ClientFrame::Audit(from_str(text)?),
        other => {
            return Err(serde::de::Error::custom(format!(
                "unknown frame type {other:?}"
            )));
        }
    })
}

/// serde's message without the "at line 1 column 57" suffix, which helps no one reading a
/// one-line frame.
fn describe(error: &serde_json::Error) -> String {
    let text = error.to_string();
    match text.rfind(" at line ") {
        Some(position) => text[..position].to_owned(),
        None => text,
    }
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn truncate(text: &str) -> &str {
    match text.char_indices().nth(64) {
        Some((index, _)) => &text[..index],
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(text: &str) -> DecodeError {
        decode_client_frame(text).unwrap_err()
    }

    #[test]
    fn decodes_a_valid_command() {
        let frame = decode_client_frame(r#"{"t":"rooms","id":4}"#).unwrap();
        assert_eq!(frame, ClientFrame::Rooms(crate::client::Rooms { id: 4 }));
    }

    #[test]
    fn classifies_failures() {
        let invalid = error("{not json");
        assert_eq!((invalid.re, invalid.code), (None, ErrorCode::BadFrame));

        let not_object = error("[1,2]");
        assert_eq!(
            (not_object.re, not_object.code),
            (None, ErrorCode::BadFrame)
        );

        let unknown = error(r#"{"t":"teleport","id":9}"#);
        assert_eq!(
            (unknown.re, unknown.code),
            (Some(9), ErrorCode::Unsupported)
        );

        let no_t = error(r#"{"id":3}"#);
        assert_eq!((no_t.re, no_t.code), (Some(3), ErrorCode::BadFrame));

        let t_number = error(r#"{"t":5,"id":3}"#);
        assert_eq!((t_number.re, t_number.code), (Some(3), ErrorCode::BadFrame));

        let bad_id = error(r#"{"t":"rooms","id":"x"}"#);
        assert_eq!((bad_id.re, bad_id.code), (None, ErrorCode::BadFrame));

        let negative_id = error(r#"{"t":"rooms","id":-1}"#);
        assert_eq!(negative_id.re, None);

        let no_id = error(r#"{"t":"rooms"}"#);
        assert_eq!((no_id.re, no_id.code), (None, ErrorCode::BadFrame));

        let wrong_type = error(
            r#"{"t":"send","id":2,"room":7,"client_key":"abcdefgh","kind":"message","body":{}}"#,
        );
        assert_eq!(
            (wrong_type.re, wrong_type.code),
            (Some(2), ErrorCode::BadFrame)
        );
        assert!(
            wrong_type.msg.contains("invalid send command"),
            "{}",
            wrong_type.msg
        );

        let missing = error(r#"{"t":"history","id":2}"#);
        assert!(missing.msg.contains("room"), "{}", missing.msg);
    }

    #[test]
    fn a_string_with_a_character_its_field_refuses_names_the_field() {
        for (frame, field) in [
            (
                r#"{"t":"send","id":2,"room":"r_1","client_key":"aaaaaaa\u0000","kind":"message","body":{"text":"x"}}"#,
                "client_key holds U+0000",
            ),
            (
                r#"{"t":"send","id":2,"room":"r_1","client_key":"aaaaaaaa","kind":"x-a\u0000","body":{}}"#,
                "kind holds U+0000",
            ),
            (
                r#"{"t":"auth","id":2,"token":"rt_x","device":"d\u0000"}"#,
                "device holds U+0000",
            ),
            (
                r#"{"t":"ack","id":2,"cursors":{"r\n":1}}"#,
                "a key of cursors holds",
            ),
            (
                r#"{"t":"room_create","id":2,"members":["dana","sam\u0007"]}"#,
                "members[1] holds U+0007",
            ),
            (
                r#"{"t":"control","id":2,"agent":"p_1","action":"pause","reason":"\u001b[2J"}"#,
                "reason holds U+001B",
            ),
            (
                r#"{"t":"invite_redeem","id":2,"code":"abc\u202e"}"#,
                "code holds U+202E",
            ),
        ] {
            let refused = error(frame);
            assert_eq!(
                (refused.re, refused.code),
                (Some(2), ErrorCode::BadFrame),
                "{frame}"
            );
            assert!(refused.msg.contains(field), "{}", refused.msg);
        }
        // A lone surrogate is not a string at all.
        let surrogate = error(r#"{"t":"room_leave","id":2,"room":"r\ud800"}"#);
        assert_eq!(surrogate.code, ErrorCode::BadFrame);
    }
}
