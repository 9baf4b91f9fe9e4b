//! The `roundtable` client commands as people and scripts use them: text and `--json`
//! output, contacts with consent, rooms, tail and history, agents under their owner's
//! control, the outbox, and exit codes that say what went wrong.

use std::time::Duration;

use roundtable_core::Core;
use roundtable_e2e::{Home, Hub, json};
use tokio::io::{AsyncBufReadExt, BufReader};

/// Exit codes (see `cli/src/client.rs`).
const USAGE: i32 = 2;
const UNREACHABLE: i32 = 3;
const REFUSED: i32 = 4;
const TOKEN: i32 = 5;

fn lines_json(stdout: &str) -> Vec<serde_json::Value> {
    stdout.lines().map(json).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn people_meet_through_contacts_rooms_and_messages() {
    let hub = Hub::start(&[]).await;
    let addr = hub.addr();
    let home = Home::default();
    home.ok("dana", &["signup", "--hub", &addr, "--handle", "dana"])
        .await;
    home.ok(
        "sam",
        &[
            "signup",
            "--hub",
            &addr,
            "--handle",
            "sam",
            "--discoverable",
            "public",
        ],
    )
    .await;
    home.ok(
        "lee",
        &[
            "signup",
            "--hub",
            &addr,
            "--handle",
            "lee",
            "--discoverable",
            "public",
        ],
    )
    .await;

    // The token is private to its owner.
    let dir = home.profiles().join("dana");
    roundtable_e2e::assert_owner_only(&dir.join("token"));
    roundtable_e2e::assert_owner_only(&dir);

    let status = json(&home.ok("dana", &["--json", "status"]).await);
    assert_eq!(status["handle"], "dana");
    assert_eq!(status["sync"], "idle (up to date)");
    assert_eq!(status["outbox"]["waiting"], 0);

    // Consent: dana asks, sam accepts; lee refuses.
    let asked = json(
        &home
            .ok(
                "dana",
                &[
                    "--json",
                    "contacts",
                    "request",
                    "sam",
                    "--message",
                    "pairing?",
                ],
            )
            .await,
    );
    let request = asked["id"].as_str().unwrap().to_owned();
    let pending = json(&home.ok("sam", &["--json", "contacts"]).await);
    assert_eq!(pending["requests"][0]["id"], request.as_str());
    assert_eq!(pending["requests"][0]["message"], "pairing?");
    // Only the target decides.
    let stderr = home
        .fails("dana", &["contacts", "accept", &request], REFUSED)
        .await;
    assert!(stderr.contains("forbidden"), "{stderr}");
    home.ok("sam", &["contacts", "accept", &request]).await;
    let contacts = json(&home.ok("dana", &["--json", "contacts"]).await);
    let handles: Vec<&str> = contacts["contacts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["handle"].as_str().unwrap())
        .collect();
    assert_eq!(handles, vec!["sam"]);
    let asked = json(
        &home
            .ok("dana", &["--json", "contacts", "request", "lee"])
            .await,
    );
    home.ok(
        "lee",
        &["contacts", "reject", asked["id"].as_str().unwrap()],
    )
    .await;
    let stderr = home
        .fails(
            "dana",
            &["room", "create", "--title", "design", "--member", "lee"],
            REFUSED,
        )
        .await;
    assert!(stderr.contains("no_consent"), "{stderr}");

    // A room with the contact; messages both ways; text and JSON views.
    home.ok(
        "dana",
        &["room", "create", "--title", "design", "--member", "sam"],
    )
    .await;
    let rooms = json(&home.ok("sam", &["--json", "rooms"]).await);
    assert_eq!(rooms[0]["title"], "design");
    let sent = json(
        &home
            .ok("dana", &["--json", "send", "design", "hello @sam"])
            .await,
    );
    assert_eq!(sent["state"], "sent");
    home.ok("sam", &["send", "design", "hi dana"]).await;
    let text = home.ok("sam", &["tail", "design"]).await;
    assert!(text.contains("dana: hello @sam"), "{text}");
    assert!(text.contains("sam: hi dana"), "{text}");
    let first_seq = sent["seq"].as_u64().unwrap();
    let before = (first_seq + 1).to_string();
    let page = lines_json(
        &home
            .ok(
                "sam",
                &[
                    "--json", "history", "design", "--before", &before, "--limit", "1",
                ],
            )
            .await,
    );
    assert_eq!(page.len(), 1);
    assert_eq!(page[0]["text"], "hello @sam");

    // `tail --follow` prints what arrives later.
    let mut follow = home
        .command("sam", &["--json", "tail", "design", "--follow"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(follow.stdout.take().unwrap()).lines();
    for _ in 0..2 {
        tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .unwrap()
            .unwrap();
    }
    home.ok("dana", &["send", "design", "third"]).await;
    let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .expect("tail --follow printed the new message")
        .unwrap()
        .unwrap();
    assert_eq!(json(&line)["text"], "third");
    follow.kill().await.unwrap();

    // Leaving: the room is no longer sam's, by title or by id, and nothing is queued.
    let room_id = rooms[0]["id"].as_str().unwrap().to_owned();
    home.ok("sam", &["room", "leave", "design"]).await;
    for room in ["design", room_id.as_str()] {
        let stderr = home
            .fails("sam", &["send", room, "still here?"], REFUSED)
            .await;
        assert!(stderr.contains(&format!("no room {room:?}")), "{stderr}");
    }
    assert_eq!(
        json(&home.ok("sam", &["--json", "outbox"]).await),
        serde_json::json!([])
    );

    // Bad usage.
    home.fails("sam", &["send", "design"], USAGE).await;
    let stderr = home.fails("../x", &["rooms"], 1).await;
    assert!(stderr.contains("profile names"), "{stderr}");
    let stderr = home.fails("nobody", &["rooms"], 1).await;
    assert!(stderr.contains("roundtable signup"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_controls_an_agent_and_its_failed_sends_are_retried() {
    let mut hub = Hub::start(&[]).await;
    let addr = hub.addr();
    let home = Home::default();
    home.ok("dana", &["signup", "--hub", &addr, "--handle", "dana"])
        .await;
    let agent = json(
        &home
            .ok(
                "dana",
                &[
                    "--json",
                    "agents",
                    "register",
                    "writer",
                    "--description",
                    "writes docs",
                ],
            )
            .await,
    );
    home.login("writer", &addr, agent["token"].as_str().unwrap())
        .await;
    home.ok(
        "dana",
        &[
            "room",
            "create",
            "--title",
            "work",
            "--member",
            "dana/writer",
        ],
    )
    .await;
    home.ok("writer", &["send", "work", "starting"]).await;

    // Paused: its message is refused, kept in its outbox, and goes once resumed.
    home.ok("dana", &["agents", "pause", "writer"]).await;
    let stderr = home
        .fails("writer", &["send", "work", "while paused"], REFUSED)
        .await;
    assert!(stderr.contains("paused"), "{stderr}");
    let outbox = json(&home.ok("writer", &["--json", "outbox"]).await);
    assert_eq!(
        (
            outbox[0]["state"].as_str(),
            outbox[0]["error_code"].as_str()
        ),
        (Some("failed"), Some("paused"))
    );
    let n = outbox[0]["n"].as_u64().unwrap().to_string();
    home.ok("dana", &["agents", "resume", "writer"]).await;
    home.ok("writer", &["outbox", "retry", &n]).await;
    assert_eq!(
        json(&home.ok("writer", &["--json", "outbox"]).await),
        serde_json::json!([])
    );
    home.fails("writer", &["outbox", "retry", &n], USAGE).await;
    let texts: Vec<String> = lines_json(&home.ok("dana", &["--json", "tail", "work"]).await)
        .iter()
        .map(|m| m["text"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(texts, vec!["starting", "while paused"]);

    // Stopped: it cannot connect at all until resumed.
    home.ok("dana", &["agents", "stop", "dana/writer"]).await;
    let stderr = home.fails("writer", &["rooms"], TOKEN).await;
    assert!(stderr.contains("stop"), "{stderr}");
    home.ok("dana", &["agents", "resume", "writer"]).await;
    home.ok("writer", &["rooms"]).await;

    // Revoked: the token no longer works; a rotated one does.
    home.ok("dana", &["agents", "revoke", "writer"]).await;
    let stderr = home.fails("writer", &["rooms"], TOKEN).await;
    assert!(stderr.contains("token"), "{stderr}");
    let rotated = json(
        &home
            .ok("dana", &["--json", "agents", "rotate", "writer"])
            .await,
    );
    home.login("writer", &addr, rotated["token"].as_str().unwrap())
        .await;
    home.ok("writer", &["rooms"]).await;
    // Only the owner controls it.
    home.ok("lee", &["signup", "--hub", &addr, "--handle", "lee"])
        .await;
    home.fails("lee", &["agents", "pause", "dana/writer"], REFUSED)
        .await;

    // Unreachable: commands that need the hub say so; a send waits in the outbox.
    hub.stop().await;
    let stderr = home.fails("dana", &["rooms"], UNREACHABLE).await;
    assert!(stderr.contains("unreachable"), "{stderr}");
    let queued = json(
        &home
            .ok("dana", &["--json", "send", "work", "offline note"])
            .await,
    );
    assert_eq!(queued["state"], "queued");
    let status = json(&home.ok("dana", &["--json", "status"]).await);
    assert_eq!(status["outbox"]["waiting"], 1);
    hub.start_again().await;
    home.ok("dana", &["sync"]).await;
    let status = json(&home.ok("dana", &["--json", "status"]).await);
    assert_eq!(status["outbox"]["waiting"], 0);
    let last = lines_json(
        &home
            .ok("dana", &["--json", "tail", "work", "--limit", "1"])
            .await,
    );
    assert_eq!(last[0]["text"], "offline note");
}

/// A home where dana has signed up to `hub` and created a room titled `title`.
async fn dana_with_a_room(hub: &Hub, title: &str) -> Home {
    let home = Home::default();
    home.ok(
        "dana",
        &["signup", "--hub", &hub.addr(), "--handle", "dana"],
    )
    .await;
    home.ok("dana", &["room", "create", "--title", title]).await;
    home
}

/// What `tail --follow` shows: a message of ours that waited in the outbox when the page was
/// read is on the page, and is not shown a second time once the hub has stored it (as it
/// was, under load, when `tail` read its page between a `send`'s queueing and its sending).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_followed_room_shows_a_message_that_waited_once() {
    let hub = Hub::start(&[]).await;
    let home = dana_with_a_room(&hub, "design").await;
    let core = Core::open(home.profile("dana")).await.unwrap();
    let room = core.room_id("design").await.unwrap();
    // Queued with no sync running: the page shows it waiting.
    core.send_message(&room, "one").await.unwrap();
    let patience = Duration::from_secs(5);
    let page = core
        .latest_messages(&room, None, 20, patience)
        .await
        .unwrap();
    let shown: Vec<_> = page
        .messages
        .iter()
        .map(|m| (m.text.as_str(), m.seq))
        .collect();
    assert_eq!(shown, [("one", None)]);
    let mut follower = core.follow(&room, &page);
    let sync = core.start();
    core.send_message(&room, "two").await.unwrap();
    let mut followed = Vec::new();
    while !followed.iter().any(|text| text == "two") {
        let messages = tokio::time::timeout(Duration::from_secs(30), follower.next(&core))
            .await
            .expect("the follower saw the second message")
            .unwrap()
            .unwrap();
        followed.extend(messages.into_iter().map(|m| m.text));
    }
    assert_eq!(followed, ["two"]);
    // The first was stored all the same.
    let page = core
        .latest_messages(&room, None, 20, patience)
        .await
        .unwrap();
    let stored: Vec<_> = page
        .messages
        .iter()
        .map(|m| (m.text.as_str(), m.seq.is_some()))
        .collect();
    assert_eq!(stored, [("one", true), ("two", true)]);
    sync.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_processes_share_one_profile() {
    let hub = Hub::start(&[]).await;
    let home = dana_with_a_room(&hub, "design").await;

    // A `tail --follow` holds a connection open while other commands run beside it.
    let mut follow = home
        .command("dana", &["--json", "tail", "design", "--follow"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(follow.stdout.take().unwrap()).lines();
    // It is connected once `status` (a third process) sees the hub; sends go now.
    home.ok("dana", &["status"]).await;
    for text in ["one", "two", "three"] {
        let sent = json(&home.ok("dana", &["--json", "send", "design", text]).await);
        assert_eq!(sent["state"], "sent", "{text}: {sent}");
    }
    home.ok("dana", &["room", "create", "--title", "side"])
        .await;
    for expected in ["one", "two", "three"] {
        let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("tail --follow printed the message")
            .unwrap()
            .unwrap();
        assert_eq!(json(&line)["text"], expected);
    }
    follow.kill().await.unwrap();
    // Every command ran once.
    let rooms = json(&home.ok("dana", &["--json", "rooms"]).await);
    let mut titles: Vec<&str> = rooms
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["title"].as_str().unwrap())
        .collect();
    titles.sort();
    assert_eq!(titles, vec!["design", "side"]);
    assert_eq!(
        json(&home.ok("dana", &["--json", "outbox"]).await),
        serde_json::json!([])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invite_is_listed_until_withdrawn_and_then_refused() {
    let hub = Hub::start(&[]).await;
    let home = Home::default();
    home.signup(&hub, "dana").await;
    home.signup(&hub, "sam").await;
    let created = json(
        &home
            .ok("dana", &["--json", "invite", "create", "--max-uses", "2"])
            .await,
    );
    let id = created["invite"]
        .as_str()
        .expect("the invite's id")
        .to_owned();
    let listed = json(&home.ok("dana", &["--json", "invite", "list"]).await);
    assert_eq!(listed[0]["id"], id.as_str());
    assert_eq!(listed[0]["uses_left"], 2);
    assert!(home.ok("dana", &["invite", "list"]).await.contains(&id));

    // Only its creator withdraws it.
    let stderr = home.fails("sam", &["invite", "revoke", &id], REFUSED).await;
    assert!(stderr.contains("not_found"), "{stderr}");
    home.ok("dana", &["invite", "revoke", &id]).await;
    assert!(
        home.ok("dana", &["invite", "list"])
            .await
            .starts_with("no invites")
    );
    let stderr = home
        .fails(
            "sam",
            &["invite", "redeem", created["link"].as_str().unwrap()],
            REFUSED,
        )
        .await;
    assert!(stderr.contains("withdrawn"), "{stderr}");
}

/// `roundtable hub …` as the operator runs it, on the hub's machine.
async fn operator(data: &std::path::Path, args: &[&str]) -> std::process::Output {
    tokio::process::Command::new(roundtable_testkit::roundtable_bin())
        .arg("hub")
        .arg("--data")
        .arg(data)
        .args(args)
        .env("ROUNDTABLE_LOG", "warn")
        .kill_on_drop(true)
        .output()
        .await
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The operator revokes a user's token while the hub runs (amendment 6: its connections
/// close with 4010 at once, the token is dead), and holds the audit log to a head recorded
/// from `GET /v1/health` (amendment 9): a log cut back since fails, clearly, non-zero.
#[tokio::test]
async fn the_operator_revokes_tokens_online_and_verifies_the_log_against_a_recorded_head() {
    let mut hub = Hub::start(&[]).await;
    let home = Home::default();
    home.signup(&hub, "dana").await;
    let old_token = home.profile("dana").token.expose().to_owned();
    let mut live = roundtable_testkit::Client::connect(&hub.ws_url())
        .await
        .unwrap();
    live.auth(&old_token, "laptop").await.unwrap();

    let rotated = operator(hub.data(), &["user", "token", "--handle", "dana"]).await;
    assert!(rotated.status.success(), "{}", text(&rotated.stderr));
    let new_token = text(&rotated.stdout).trim().to_owned();
    assert!(new_token.starts_with("rt_"), "{new_token}");
    assert_eq!(live.closed().await.unwrap(), Some(4010));
    let mut old = roundtable_testkit::Client::connect(&hub.ws_url())
        .await
        .unwrap();
    assert!(old.auth(&old_token, "laptop").await.is_err());
    let mut fresh = roundtable_testkit::Client::connect(&hub.ws_url())
        .await
        .unwrap();
    fresh.auth(&new_token, "laptop").await.unwrap();

    let revoked = operator(
        hub.data(),
        &["user", "token", "--handle", "dana", "--revoke"],
    )
    .await;
    assert!(revoked.status.success(), "{}", text(&revoked.stderr));
    assert!(revoked.stdout.is_empty());
    assert_eq!(fresh.closed().await.unwrap(), Some(4010));
    let unknown = operator(hub.data(), &["user", "token", "--handle", "nobody"]).await;
    assert!(!unknown.status.success());
    assert!(text(&unknown.stderr).contains("no user has the handle"));

    // The head as health shows it; the log holds it while the hub runs.
    let health = roundtable_testkit::http(hub.addr().parse().unwrap(), "GET", "/v1/health", None)
        .await
        .unwrap()
        .json();
    let head = format!(
        "{}:{}",
        health["audit_head"]["n"],
        health["audit_head"]["hash"].as_str().unwrap()
    );
    let verified = operator(hub.data(), &["audit", "verify", "--expect-head", &head]).await;
    assert!(verified.status.success(), "{}", text(&verified.stderr));
    assert!(text(&verified.stdout).contains("extends the recorded entry"));
    let malformed = operator(hub.data(), &["audit", "verify", "--expect-head", "12"]).await;
    assert_eq!(malformed.status.code(), Some(USAGE));
    assert!(text(&malformed.stderr).contains("N:HASH"));

    // Someone cuts the log back to before that head: the chain alone still verifies, the
    // recorded head does not.
    drop((live, old, fresh));
    hub.stop().await;
    let n: i64 = health["audit_head"]["n"].as_i64().unwrap();
    rusqlite::Connection::open(hub.data().join("hub.sqlite3"))
        .unwrap()
        .execute("DELETE FROM audit WHERE n >= ?1", [n])
        .unwrap();
    let plain = operator(hub.data(), &["audit", "verify"]).await;
    assert!(plain.status.success(), "{}", text(&plain.stderr));
    let caught = operator(hub.data(), &["audit", "verify", "--expect-head", &head]).await;
    assert!(!caught.status.success());
    let stderr = text(&caught.stderr);
    assert!(
        stderr.contains(&format!("broken at entry {n}")) && stderr.contains("removed"),
        "{stderr}"
    );
}

#[tokio::test]
async fn the_cli_signs_up_and_syncs_with_a_hub_over_tls_trusting_its_ca() {
    let pki = tempfile::tempdir().unwrap();
    let pki = roundtable_testkit::pki::signed_by_ca(pki.path());
    let ca = pki.ca;
    let hub = Hub::start(&[
        "--tls-cert",
        pki.hub.cert.to_str().unwrap(),
        "--tls-key",
        pki.hub.key.to_str().unwrap(),
    ])
    .await;
    let port = hub.addr().rsplit_once(':').unwrap().1.to_owned();
    let address = format!("https://localhost:{port}");
    let home = Home::default();
    home.ok(
        "dana",
        &[
            "signup",
            "--hub",
            &address,
            "--handle",
            "dana",
            "--ca-file",
            ca.to_str().unwrap(),
        ],
    )
    .await;
    home.ok("dana", &["room", "create", "--title", "secure"])
        .await;
    home.ok("dana", &["send", "secure", "over rustls"]).await;
    let rooms = json(&home.ok("dana", &["--json", "rooms"]).await);
    assert_eq!(rooms[0]["title"], "secure", "{rooms}");
    // A profile that does not trust the CA is refused at the handshake.
    let stranger = Home::default();
    let output = stranger
        .run("dana", &["signup", "--hub", &address, "--handle", "sam"])
        .await;
    assert_ne!(output.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("TLS"),
        "{output:?}"
    );
}
