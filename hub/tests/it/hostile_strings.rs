//! Hostile strings in every string field a client sends (NUL, other control characters, a
//! terminal's escape sequence, a bidi override, a lone surrogate escaped in JSON, 64 KiB):
//! each gets a clear refusal that names the field, never `internal` (which PostgreSQL's
//! refusal of NUL once turned into, retried forever), on every store; the connection goes on,
//! and another client's writes meanwhile are all stored.

use roundtable_protocol::ErrorCode;
use roundtable_protocol::server::{ErrReply, ServerFrame};
use roundtable_testkit::{Client, Incoming, TestHub, http, message};
use serde_json::Value;

use crate::support::{agent, login, room, say};

/// A hostile value, as the text of a JSON string (escapes and all), and which fields must
/// refuse it.
struct Hostile {
    name: &'static str,
    json: String,
    refused_by: Refusers,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Refusers {
    /// Every field, opaque ones (extensions, cards) included.
    Every,
    /// Every field the hub reads: ids and texts.
    Read,
    /// Ids, keys, kinds, handles, codes, paths.
    Identifiers,
    None,
}

fn hostile_values() -> Vec<Hostile> {
    let value = |name, json: &str, refused_by| Hostile {
        name,
        json: format!("ok{json}ok"),
        refused_by,
    };
    vec![
        value("NUL", "\\u0000", Refusers::Every),
        value("a bell", "\\u0007", Refusers::Read),
        value("an escape sequence", "\\u001b[2J", Refusers::Read),
        value("a C1 control", "\\u009b", Refusers::Read),
        value("a bidi override", "\\u202e", Refusers::Identifiers),
        value("a lone surrogate", "\\ud800", Refusers::Every),
        Hostile {
            name: "64 KiB",
            json: "a".repeat(64 * 1024),
            refused_by: Refusers::None,
        },
    ]
}

/// What a field is, as far as hostile values go.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Field {
    /// An id, key, kind, handle, code, path…: a bidi override is refused too.
    Identifier,
    /// Text people read.
    Text,
    /// JSON the hub keeps without reading it (an extension's fields, an agent's card): only
    /// NUL, which some stores cannot keep, is refused there.
    Opaque,
}

/// One field of one frame: the frame's JSON with `@` where the value goes (inside quotes),
/// and the field's name as a refusal names it.
struct Case {
    frame: String,
    field: &'static str,
    kind: Field,
}

/// Every string field of every command a connected client sends, with the other fields
/// valid, so the hostile value is the only thing wrong.
fn cases(room: &str, agent: &str) -> Vec<Case> {
    use Field::{Identifier as I, Opaque as O, Text as T};
    let session = r#"{"agent":"AGENT","framework":"codex","session_id":"s1"}"#;
    let usage = format!(
        r#""session":{session},"input":1,"output":2,"cache_write":0,"cache_read":0,"from":"2026-11-30T09:00:00Z","to":"2026-11-30T09:01:00Z""#
    );
    let send = |body: &str| {
        format!(r#"{{"t":"send","room":"ROOM","client_key":"KEY","kind":"KIND","body":{body}}}"#)
    };
    let message = |body: &str| send(body).replace("KIND", "message");
    let of_kind = |kind: &str, body: &str| send(body).replace("KIND", kind);
    let table: Vec<(String, &'static str, Field)> = vec![
        (r#"{"t":"sync","cursors":{"@":0}}"#.into(), "cursors", I),
        (r#"{"t":"ack","cursors":{"@":1}}"#.into(), "cursors", I),
        (
            r#"{"t":"send","room":"@","client_key":"KEY","kind":"message","body":{"text":"hi"}}"#
                .into(),
            "room",
            I,
        ),
        (
            r#"{"t":"send","room":"ROOM","client_key":"@","kind":"message","body":{"text":"hi"}}"#
                .into(),
            "client_key",
            I,
        ),
        (
            r#"{"t":"send","room":"ROOM","client_key":"KEY","kind":"x-@","body":{}}"#.into(),
            "kind",
            I,
        ),
        (message(r#"{"text":"@"}"#), "body.text", T),
        (message(r#"{"text":"hi","mentions":["@"]}"#), "body.mentions[0]", I),
        (message(r#"{"text":"hi","reply_to":"@"}"#), "body.reply_to", I),
        (message(r#"{"text":"hi","x_more":{"note":"@"}}"#), "body.x_more.note", O),
        (of_kind("x-cursor", r#"{"at":"@"}"#), "body.at", O),
        (
            of_kind(
                "tasks",
                &format!(r#"{{"session":{session},"source":"@","tasks":[]}}"#),
            ),
            "body.source",
            T,
        ),
        (
            of_kind(
                "tasks",
                r#"{"session":{"agent":"AGENT","framework":"codex","session_id":"@"},"source":"TodoWrite","tasks":[]}"#,
            ),
            "body.session.session_id",
            I,
        ),
        (
            of_kind(
                "tasks",
                &format!(
                    r#"{{"session":{session},"source":"TodoWrite","tasks":[{{"id":"@","title":"t","status":"pending"}}]}}"#
                ),
            ),
            "body.tasks[0].id",
            I,
        ),
        (
            of_kind(
                "tasks",
                &format!(
                    r#"{{"session":{session},"source":"TodoWrite","tasks":[{{"title":"@","status":"pending","active_form":"a"}}]}}"#
                ),
            ),
            "body.tasks[0].title",
            T,
        ),
        (
            of_kind(
                "tasks",
                &format!(
                    r#"{{"session":{session},"source":"TodoWrite","tasks":[{{"title":"t","status":"pending","active_form":"@"}}]}}"#
                ),
            ),
            "body.tasks[0].active_form",
            T,
        ),
        (
            of_kind(
                "arch",
                r#"{"define":[{"id":"@","name":"P","paths":["src/**"],"depends_on":[]}]}"#,
            ),
            "body.define[0].id",
            I,
        ),
        (
            of_kind(
                "arch",
                r#"{"define":[{"id":"p","name":"@","paths":["src/**"],"depends_on":[]}]}"#,
            ),
            "body.define[0].name",
            T,
        ),
        (
            of_kind(
                "arch",
                r#"{"define":[{"id":"p","name":"P","description":"@","paths":[],"depends_on":[]}]}"#,
            ),
            "body.define[0].description",
            T,
        ),
        (
            of_kind(
                "arch",
                r#"{"define":[{"id":"p","name":"P","paths":["@"],"depends_on":[]}]}"#,
            ),
            "body.define[0].paths[0]",
            I,
        ),
        (
            of_kind(
                "arch",
                r#"{"define":[{"id":"p","name":"P","paths":[],"depends_on":["@"]}]}"#,
            ),
            "body.define[0].depends_on[0]",
            I,
        ),
        (
            of_kind(
                "arch",
                r#"{"define":[{"id":"p","name":"P","paths":[],"depends_on":[]}],"source":"@"}"#,
            ),
            "body.source",
            T,
        ),
        (
            of_kind("arch", r#"{"component":"@","status":"working"}"#),
            "body.component",
            I,
        ),
        (
            of_kind("arch", r#"{"component":"p","status":"working","note":"@"}"#),
            "body.note",
            T,
        ),
        (
            of_kind(
                "arch",
                r#"{"component":"p","status":"working","files":["src/a.rs","@"]}"#,
            ),
            "body.files[1]",
            I,
        ),
        (
            of_kind("arch", r#"{"component":"p","status":"working","agent":"@"}"#),
            "body.agent",
            I,
        ),
        (
            of_kind("usage", &format!(r#"{{{usage},"model":"@"}}"#)),
            "body.model",
            T,
        ),
        (
            of_kind(
                "usage",
                &format!(r#"{{{},"model":"m"}}"#, usage.replace("codex", "@")),
            ),
            "body.session.framework",
            I,
        ),
        (
            of_kind("status", r#"{"state":"working","detail":"@"}"#),
            "body.detail",
            T,
        ),
        (
            of_kind("ping", r#"{"ping":"@","question":"ok?"}"#),
            "body.ping",
            I,
        ),
        (
            of_kind("ping", r#"{"ping":"q1","question":"@"}"#),
            "body.question",
            T,
        ),
        (
            of_kind("ping", r#"{"ping":"q2","question":"ok?","options":["@"]}"#),
            "body.options[0]",
            T,
        ),
        (
            of_kind("ping", r#"{"ping":"q3","question":"ok?","to":["@"]}"#),
            "body.to[0]",
            I,
        ),
        (
            of_kind("answer", r#"{"ping":"@","choice":"yes"}"#),
            "body.ping",
            I,
        ),
        (
            of_kind("answer", r#"{"ping":"q0","choice":"@"}"#),
            "body.choice",
            T,
        ),
        (
            of_kind("answer", r#"{"ping":"q0","text":"@"}"#),
            "body.text",
            T,
        ),
        (r#"{"t":"history","room":"@"}"#.into(), "room", I),
        (r#"{"t":"room_create","title":"@"}"#.into(), "title", T),
        (r#"{"t":"room_create","topic":"@"}"#.into(), "topic", T),
        (r#"{"t":"room_create","members":["@"]}"#.into(), "members[0]", I),
        (
            r#"{"t":"room_invite","room":"@","handle":"sam"}"#.into(),
            "room",
            I,
        ),
        (
            r#"{"t":"room_invite","room":"ROOM","handle":"@"}"#.into(),
            "handle",
            I,
        ),
        (r#"{"t":"room_kick","room":"@","handle":"sam"}"#.into(), "room", I),
        (
            r#"{"t":"room_kick","room":"ROOM","handle":"@"}"#.into(),
            "handle",
            I,
        ),
        (r#"{"t":"room_update","room":"@","title":"x"}"#.into(), "room", I),
        (r#"{"t":"room_update","room":"ROOM","title":"@"}"#.into(), "title", T),
        (r#"{"t":"room_update","room":"ROOM","topic":"@"}"#.into(), "topic", T),
        (r#"{"t":"room_leave","room":"@"}"#.into(), "room", I),
        (
            r#"{"t":"member_set","room":"@","routing":"all"}"#.into(),
            "room",
            I,
        ),
        (r#"{"t":"profile_set","principal":"@"}"#.into(), "principal", I),
        (r#"{"t":"profile_set","name":"@"}"#.into(), "name", T),
        (r#"{"t":"directory","query":"@"}"#.into(), "query", T),
        (r#"{"t":"register_agent","name":"@"}"#.into(), "name", I),
        (
            r#"{"t":"register_agent","name":"helper","description":"@"}"#.into(),
            "description",
            T,
        ),
        (
            r#"{"t":"register_agent","name":"carded","card":{"skills":[{"id":"s","name":"@"}]}}"#
                .into(),
            "card.skills[0].name",
            O,
        ),
        (
            r#"{"t":"register_remote_agent","name":"@","card_url":"https://example.com/card.json"}"#
                .into(),
            "name",
            I,
        ),
        (
            r#"{"t":"register_remote_agent","name":"weather","card_url":"@"}"#.into(),
            "card_url",
            I,
        ),
        (
            r#"{"t":"register_remote_agent","name":"weather","card_url":"https://example.com/card.json","credential":{"scheme":"bearer","value":"@"}}"#
                .into(),
            "credential.value",
            I,
        ),
        (
            r#"{"t":"register_remote_agent","name":"weather","card_url":"https://example.com/card.json","credential":{"scheme":"api_key","value":"v","header":"@"}}"#
                .into(),
            "credential.header",
            I,
        ),
        (
            r#"{"t":"agent_token","agent":"@","action":"rotate"}"#.into(),
            "agent",
            I,
        ),
        (r#"{"t":"contact_request","to":"@"}"#.into(), "to", I),
        (
            r#"{"t":"contact_request","to":"sam","message":"@"}"#.into(),
            "message",
            T,
        ),
        (
            r#"{"t":"contact_respond","request":"@","accept":true}"#.into(),
            "request",
            I,
        ),
        (r#"{"t":"invite_create","room":"@"}"#.into(), "room", I),
        (r#"{"t":"invite_redeem","code":"@"}"#.into(), "code", I),
        (r#"{"t":"invite_revoke","invite":"@"}"#.into(), "invite", I),
        (
            r#"{"t":"control","agent":"@","action":"pause"}"#.into(),
            "agent",
            I,
        ),
        (
            r#"{"t":"control","agent":"AGENT","action":"pause","room":"@"}"#.into(),
            "room",
            I,
        ),
        (
            r#"{"t":"control","agent":"AGENT","action":"resume","reason":"@"}"#.into(),
            "reason",
            T,
        ),
        (r#"{"t":"audit","principal":"@"}"#.into(), "principal", I),
        (r#"{"t":"audit","since":"@"}"#.into(), "since", I),
    ];
    table
        .into_iter()
        .map(|(frame, field, kind)| Case {
            frame: frame.replace("ROOM", room).replace("AGENT", agent),
            field,
            kind,
        })
        .collect()
}

/// The command's reply, whatever arrives before it.
async fn reply(client: &mut Client, id: u64) -> Result<(), ErrReply> {
    loop {
        match client.recv().await.expect("a reply") {
            Incoming::Frame(ServerFrame::Ok(ok)) if ok.re == id => return Ok(()),
            Incoming::Frame(ServerFrame::Err(err)) if err.re == Some(id) || err.re.is_none() => {
                return Err(err);
            }
            Incoming::Frame(_) => continue,
            Incoming::Closed(code) => panic!("closed ({code:?}) waiting for {id}"),
        }
    }
}

/// Whether a refusal is as it must be for `value` in `field`; what is wrong otherwise.
fn judge(
    value: &Hostile,
    field: &str,
    kind: Field,
    outcome: &Result<(), ErrReply>,
) -> Option<String> {
    let must_refuse = match value.refused_by {
        Refusers::Every => true,
        Refusers::Read => kind != Field::Opaque,
        Refusers::Identifiers => kind == Field::Identifier,
        Refusers::None => false,
    };
    // A bad first frame is `unauthorized`, whatever is wrong with it (the protocol's rule).
    let code = if field.starts_with("auth ") {
        ErrorCode::Unauthorized
    } else {
        ErrorCode::BadFrame
    };
    let field = field.trim_start_matches("auth ");
    match outcome {
        Err(err) if err.code == ErrorCode::Internal => Some(format!("internal: {}", err.msg)),
        Err(err) if must_refuse && err.code != code => {
            Some(format!("{} instead of {code}: {}", err.code, err.msg))
        }
        // A lone surrogate is not a string at all: the frame is not JSON, whatever field.
        Err(err) if must_refuse && value.name != "a lone surrogate" && !err.msg.contains(field) => {
            Some(format!("the refusal does not name {field}: {}", err.msg))
        }
        Ok(()) if must_refuse => Some("accepted".into()),
        _ => None,
    }
}

#[tokio::test]
async fn every_client_string_field_refuses_what_makes_no_sense_in_it_by_name() {
    let hub = TestHub::start_with(|config| config.rate_limits = None).await;
    let (mut dana, dana_ok) = hub.user("dana").await;
    let (mut sam, _) = hub.user("sam").await;
    let room_id = room(&mut dana, &[]).await;
    let writer = agent(&mut dana, "writer").await;
    let sam_room = room(&mut sam, &[]).await;

    // Another client writes all along; every one of its sends must be stored.
    let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
    let bystander_room = sam_room.clone();
    let bystander = tokio::spawn(async move {
        let sam_room = bystander_room;
        let mut sent = 0u32;
        loop {
            if stopped.try_recv().is_ok() {
                return (sam, sent);
            }
            say(
                &mut sam,
                &sam_room,
                &format!("bystander-{sent:04}"),
                "still here",
            )
            .await;
            sent += 1;
        }
    });

    let mut failures = Vec::new();
    let mut checked = 0;
    let mut refusals_on_this_connection = 0;
    for value in hostile_values() {
        for case in cases(&room_id, &writer.agent.id) {
            // Twenty bad frames a minute close a connection (1008): a fresh one well before.
            if refusals_on_this_connection >= 15 {
                dana = login(&hub, &dana_ok.token, "laptop").await;
                refusals_on_this_connection = 0;
            }
            let id = dana.id();
            let key = format!("key-{id:08}");
            let frame = case
                .frame
                .replacen('{', &format!(r#"{{"id":{id},"#), 1)
                .replace("KEY", &key)
                .replace('@', &value.json);
            dana.send_text(frame).await.unwrap();
            let outcome = reply(&mut dana, id).await;
            if outcome.is_err() {
                refusals_on_this_connection += 1;
            }
            if let Some(wrong) = judge(&value, case.field, case.kind, &outcome) {
                failures.push(format!(
                    "{} in {} ({}): {wrong}",
                    value.name, case.field, case.frame
                ));
            }
            checked += 1;
        }
    }

    // The hand-shake's strings: each on a connection of its own (a refused `auth` closes it).
    for value in hostile_values() {
        for (field, frame) in [
            (
                "token",
                r#"{"t":"auth","id":1,"token":"@","device":"d1"}"#.to_owned(),
            ),
            (
                "device",
                format!(
                    r#"{{"t":"auth","id":1,"token":"{}","device":"@"}}"#,
                    dana_ok.token
                ),
            ),
            (
                "client.name",
                format!(
                    r#"{{"t":"auth","id":1,"token":"{}","device":"d2","client":{{"name":"@"}}}}"#,
                    dana_ok.token
                ),
            ),
        ] {
            let mut client = hub.connect().await;
            client
                .send_text(frame.replace('@', &value.json))
                .await
                .unwrap();
            let outcome = match client.recv().await.unwrap() {
                Incoming::Frame(ServerFrame::Ok(_)) => Ok(()),
                Incoming::Frame(ServerFrame::Err(err)) => Err(err),
                // Past 8 KiB before `auth` succeeds, the socket closes (1009): a refusal too.
                Incoming::Closed(Some(1009)) if value.refused_by == Refusers::None => Ok(()),
                other => panic!("{} in {field}: {other:?}", value.name),
            };
            let kind = if field == "client.name" {
                Field::Text
            } else {
                Field::Identifier
            };
            if let Some(wrong) = judge(&value, &format!("auth {field}"), kind, &outcome) {
                failures.push(format!("{} in auth {field}: {wrong}", value.name));
            }
            checked += 1;
        }
    }

    // Signup's, over HTTP.
    for value in hostile_values() {
        for (field, body) in [
            ("handle", r#"{"handle":"@","name":"Eve"}"#),
            ("name", r#"{"handle":"eve","name":"@"}"#),
            ("invite", r#"{"handle":"eve2","name":"Eve","invite":"@"}"#),
        ] {
            let body: String = body.replace('@', &value.json);
            let response = http(hub.addr, "POST", "/v1/signup", Some(&body))
                .await
                .unwrap();
            let outcome = if response.status == 200 {
                Ok(())
            } else {
                let error: Value = response.json();
                Err(ErrReply {
                    re: None,
                    code: serde_json::from_value(error["code"].clone()).unwrap(),
                    msg: error["msg"].as_str().unwrap_or_default().to_owned(),
                    retry_after_ms: None,
                })
            };
            let kind = if field == "name" {
                Field::Text
            } else {
                Field::Identifier
            };
            if let Some(wrong) = judge(&value, field, kind, &outcome) {
                failures.push(format!("{} in signup {field}: {wrong}", value.name));
            }
            checked += 1;
        }
    }

    stop.send(()).unwrap();
    let (mut sam, sent) = bystander.await.unwrap();
    assert!(
        failures.is_empty(),
        "{} of {checked} cases:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(checked > 400, "{checked}");
    // Every one of the bystander's sends is in its room, once, in order.
    let log = sam.room_log(&sam_room).await.unwrap();
    let keys: Vec<String> = log
        .iter()
        .filter_map(|event| event.client_key.clone())
        .collect();
    let expected: Vec<String> = (0..sent).map(|n| format!("bystander-{n:04}")).collect();
    assert_eq!(keys, expected);
    // And the connection that sent them all still works.
    let id = dana.id();
    dana.ok(message(id, &room_id, "after-it-all", "fine")).await;
}
