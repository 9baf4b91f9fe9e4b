//! Dana's team as the window's in-memory backend shows it (`npm run dev`, the views' unit
//! tests): written here as the events the hub would deliver and the lines an agent's log
//! would hold, and turned into boards by the core's own projections, so the demo cannot
//! show a board the core would never produce. The test writes the boards to
//! `ui/src/backend/fixtures/boards.json` and fails when the file there differs: run it with
//! `UPDATE_UI_FIXTURES=1` after changing a projection or this world, and commit the file.

use roundtable_protocol::server::Event;
use serde_json::{Value, json};

use super::*;
use crate::cache::{
    Cache, LocalChanges, LogFileState, LogRead, PrincipalRow, Publication, ReadSpan,
};
use crate::log_events::{Billing, LogEvent, TaskItem, TaskStatus, TokenCounts};
use crate::work::digest::digest;
use crate::work::figures::figures;

/// The demo's "now": 2026-11-30T12:00:00Z. The UI moves every time by the same amount.
const NOW: i64 = 1_796_040_000_000;
const MINUTE: i64 = 60_000;
const HOUR: i64 = 60 * MINUTE;
const DAY: i64 = 24 * HOUR;

const DANA: &str = "u-dana";
const SAM: &str = "u-sam";
const WRITER: &str = "a-writer";
const REVIEWER: &str = "a-reviewer";
const SECURITY: &str = "a-security";
const PARSER: &str = "r-parser";
const SECURITY_ROOM: &str = "r-security";

fn iso(ms: i64) -> String {
    let seconds = ms.div_euclid(1000);
    let days = seconds.div_euclid(86_400);
    let of_day = seconds.rem_euclid(86_400);
    // Civil date from days since the epoch (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.000Z",
        of_day / 3600,
        of_day % 3600 / 60,
        of_day % 60
    )
}

/// One room's events, numbered in the order written.
struct Room {
    id: &'static str,
    events: Vec<Event>,
}

impl Room {
    fn new(id: &'static str) -> Room {
        Room {
            id,
            events: Vec::new(),
        }
    }

    fn add(&mut self, at: i64, from: &str, kind: &str, body: Value) -> u64 {
        let seq = self.events.len() as u64 + 1;
        self.events.push(Event {
            room: Some(self.id.into()),
            stream: None,
            seq,
            id: format!("{}-e{seq}", self.id),
            ts: iso(at),
            from: from.into(),
            kind: kind.into(),
            body,
            client_key: None,
        });
        seq
    }

    fn join(&mut self, at: i64, who: &str, by: &str) {
        self.add(
            at,
            by,
            "member",
            json!({"principal": who, "action": "join", "by": by}),
        );
    }

    fn tasks(
        &mut self,
        at: i64,
        agent: &str,
        framework: &str,
        session: &str,
        source: &str,
        tasks: Value,
    ) {
        let session = json!({"agent": agent, "framework": framework, "session_id": session});
        self.add(
            at,
            agent,
            "tasks",
            json!({"session": session, "source": source, "tasks": tasks}),
        );
    }

    #[allow(
        clippy::too_many_arguments,
        reason = "one usage report, field by field"
    )]
    fn usage(
        &mut self,
        at: i64,
        agent: &str,
        framework: &str,
        session: &str,
        model: &str,
        tokens: (u64, u64, u64),
        cost: Option<f64>,
    ) {
        let session = json!({"agent": agent, "framework": framework, "session_id": session});
        let mut body = json!({"session": session, "model": model, "input": tokens.0, "output": tokens.1,
            "cache_write": 0, "cache_read": tokens.2, "from": iso(at - 10 * MINUTE), "to": iso(at)});
        if let Some(cost) = cost {
            body["cost_usd"] = json!(cost);
        }
        self.add(at, agent, "usage", body);
    }
}

fn task(title: &str, status: &str) -> Value {
    json!({"title": title, "status": status})
}

/// The parser room: Dana's writer and reviewer at work on a config parser.
fn parser_room() -> (Room, u64) {
    let mut room = Room::new(PARSER);
    let t0 = NOW - 6 * DAY - HOUR;
    room.add(
        t0,
        WRITER,
        "room",
        json!({"title": "parser", "topic": "Implement and review the config parser"}),
    );
    room.join(t0, WRITER, WRITER);
    room.join(t0, DANA, WRITER);
    room.join(t0, REVIEWER, DANA);
    let (writer_session, reviewer_session) = ("7f1c5e2a", "019a2b");
    for days_ago in (0..=6).rev() {
        let at = NOW - days_ago * DAY - 2 * HOUR;
        let writer_cost = 1.2 + days_ago as f64 * 0.31;
        room.usage(
            at,
            WRITER,
            "claude-code",
            writer_session,
            "claude-sonnet-4-5",
            (40_000, 6_000, 300_000),
            Some(writer_cost),
        );
        let reviewer_cost = 0.4 + (days_ago % 3) as f64 * 0.2;
        room.usage(
            at + MINUTE,
            REVIEWER,
            "codex",
            reviewer_session,
            "gpt-5-codex",
            (30_000, 4_000, 90_000),
            Some(reviewer_cost),
        );
    }
    room.add(
        NOW - 5 * HOUR,
        DANA,
        "arch",
        json!({"define": [
            {"id": "tokenizer", "name": "Tokenizer", "description": "Bytes to tokens", "paths": ["src/tokenizer/**"], "depends_on": []},
            {"id": "parser", "name": "Parser", "description": "Tokens to a syntax tree", "paths": ["src/parser/**"], "depends_on": ["tokenizer"]},
            {"id": "loader", "name": "Loader", "description": "Reads config files", "paths": ["src/loader/**"], "depends_on": ["parser"]},
            {"id": "cli", "name": "CLI", "paths": ["src/main.rs"], "depends_on": ["loader", "parser"]},
            {"id": "docs", "name": "Docs", "paths": ["docs/**"], "depends_on": ["cli"]}
        ]}),
    );
    let plan = |tokenizer: &str, parser: &str, loader: &str| {
        json!([
            task("write the tokenizer", tokenizer),
            task("write the parser", parser),
            task("wire the loader", loader),
            task("document the format", "pending")
        ])
    };
    room.tasks(
        NOW - 5 * HOUR,
        WRITER,
        "claude-code",
        writer_session,
        "TodoWrite",
        plan("pending", "pending", "pending"),
    );
    room.tasks(
        NOW - 4 * HOUR,
        WRITER,
        "claude-code",
        writer_session,
        "TodoWrite",
        plan("in_progress", "pending", "pending"),
    );
    room.tasks(
        NOW - 3 * HOUR,
        WRITER,
        "claude-code",
        writer_session,
        "TodoWrite",
        plan("completed", "in_progress", "pending"),
    );
    room.add(
        NOW - 3 * HOUR,
        WRITER,
        "arch",
        json!({"component": "tokenizer", "status": "done", "files": ["src/tokenizer/mod.rs"]}),
    );
    room.add(
        NOW - 3 * HOUR + MINUTE,
        WRITER,
        "arch",
        json!({"component": "parser", "status": "working", "files": ["src/parser/mod.rs"]}),
    );
    // Dana's last look at the room.
    let read_to = room.add(
        NOW - 3 * HOUR + 2 * MINUTE,
        DANA,
        "message",
        json!({"text": "Tokenizer looks good, go on with the parser."}),
    );
    let mut say = |at: i64, from: &str, text: &str, mentions: &[&str]| {
        room.add(
            at,
            from,
            "message",
            json!({"text": text, "mentions": mentions}),
        );
    };
    say(
        NOW - 2 * HOUR,
        WRITER,
        "Parser draft is up: src/parser/mod.rs.",
        &[],
    );
    say(
        NOW - 50 * MINUTE,
        WRITER,
        "@dana/reviewer the parser is ready for review.",
        &[REVIEWER],
    );
    say(NOW - 45 * MINUTE, REVIEWER, "On it.", &[]);
    room.tasks(
        NOW - 40 * MINUTE,
        WRITER,
        "claude-code",
        writer_session,
        "TodoWrite",
        plan("completed", "completed", "pending"),
    );
    room.add(
        NOW - 40 * MINUTE,
        WRITER,
        "arch",
        json!({"component": "parser", "status": "done", "files": ["src/parser/mod.rs"]}),
    );
    room.tasks(
        NOW - 30 * MINUTE,
        WRITER,
        "claude-code",
        writer_session,
        "TodoWrite",
        plan("completed", "completed", "in_progress"),
    );
    room.add(
        NOW - 30 * MINUTE,
        WRITER,
        "arch",
        json!({"component": "loader", "status": "working", "files": ["src/loader/mod.rs"]}),
    );
    room.add(NOW - 20 * MINUTE, WRITER, "arch", json!({"component": "cli", "status": "blocked", "note": "waits for the config format decision"}));
    room.tasks(
        NOW - 20 * MINUTE,
        REVIEWER,
        "codex",
        reviewer_session,
        "update_plan",
        json!([
            task("read src/parser.rs", "completed"),
            task("check error messages", "pending"),
            task("write the review", "pending")
        ]),
    );
    room.tasks(
        NOW - 10 * MINUTE,
        REVIEWER,
        "codex",
        reviewer_session,
        "update_plan",
        json!([
            task("read src/parser.rs", "completed"),
            task("check error messages", "in_progress"),
            task("write the review", "pending")
        ]),
    );
    room.add(NOW - 10 * MINUTE, REVIEWER, "arch", json!({"component": "parser", "status": "working", "note": "review under way", "files": ["src/parser/errors.rs"]}));
    room.usage(
        NOW - 15 * MINUTE,
        REVIEWER,
        "codex",
        reviewer_session,
        "homegrown-9",
        (12_000, 900, 0),
        None,
    );
    room.add(
        NOW - 5 * MINUTE,
        WRITER,
        "status",
        json!({"state": "idle", "detail": "Waiting for a review"}),
    );
    room.add(
        NOW - 2 * MINUTE,
        REVIEWER,
        "ping",
        json!({"ping": "p-format", "question": "Keep the old config format for one release?", "options": ["keep", "drop"], "to": [DANA]}),
    );
    room.add(
        NOW - 2 * MINUTE,
        REVIEWER,
        "status",
        json!({"state": "waiting_human", "detail": "Keep the old config format for one release?"}),
    );
    (room, read_to)
}

/// Sam's security review, which Dana's writer joined.
fn security_room() -> Room {
    let mut room = Room::new(SECURITY_ROOM);
    let t0 = NOW - 6 * DAY - 2 * HOUR;
    room.add(t0, DANA, "room", json!({"title": "security review"}));
    room.join(t0, DANA, DANA);
    room.join(t0, SAM, DANA);
    room.join(t0, SECURITY, SAM);
    room.join(t0, WRITER, DANA);
    for days_ago in (0..=6).rev().filter(|days| days % 2 == 0) {
        let at = NOW - days_ago * DAY - 3 * HOUR;
        let cost = 2.1 + days_ago as f64 * 0.1;
        room.usage(
            at,
            SECURITY,
            "claude-code",
            "c3d4",
            "claude-opus-4-6",
            (150_000, 30_000, 800_000),
            Some(cost),
        );
    }
    room.tasks(
        NOW - 2 * HOUR,
        SECURITY,
        "claude-code",
        "c3d4",
        "TodoWrite",
        json!([
            task("list token stores", "in_progress"),
            task("check file permissions", "pending")
        ]),
    );
    room.tasks(
        NOW - HOUR,
        SECURITY,
        "claude-code",
        "c3d4",
        "TodoWrite",
        json!([
            task("list token stores", "completed"),
            task("check file permissions", "in_progress")
        ]),
    );
    room.add(
        NOW - HOUR,
        SECURITY,
        "status",
        json!({"state": "working", "detail": "Reviewing token storage"}),
    );
    room.add(
        NOW - HOUR + MINUTE,
        SECURITY,
        "message",
        json!({"text": "Token storage: reading the file store now."}),
    );
    room
}

/// A session of this machine that no agent claimed: a person trying lint rules yesterday.
fn local_log() -> LogRead {
    let session = "e5f6";
    let at = NOW - 26 * HOUR;
    let events = vec![
        (
            0,
            LogEvent::Session {
                session_id: session.into(),
                cwd: Some("/home/dana/src/app".into()),
                model: Some("claude-sonnet-4-5".into()),
                at_ms: Some(at - 20 * MINUTE),
            },
        ),
        (
            100,
            LogEvent::Tasks {
                session_id: session.into(),
                lane: None,
                source: "TodoWrite".into(),
                tasks: vec![TaskItem {
                    id: None,
                    title: "try the new lint rules".into(),
                    status: TaskStatus::Completed,
                    active_form: None,
                }],
                at_ms: Some(at),
            },
        ),
    ]
    .into_iter()
    .chain((0..12).map(|request| {
        (
            200 + request,
            LogEvent::Usage {
                session_id: session.into(),
                key: None,
                sidechain: false,
                model: "claude-sonnet-4-5".into(),
                tokens: TokenCounts {
                    input: 3_000,
                    output: 400,
                    cache_read: 20_000,
                    ..TokenCounts::default()
                },
                billing: Billing::default(),
                at_ms: Some(at - 20 * MINUTE + request as i64 * MINUTE),
            },
        )
    }))
    .collect();
    LogRead {
        framework: Framework::ClaudeCode,
        state: LogFileState {
            path: "/home/dana/.claude/projects/-home-dana-src-app/e5f6.jsonl".into(),
            kind: "claude_transcript".into(),
            device: 1,
            inode: 1,
            size: 300,
            offset: 300,
            parser: None,
            skipped: 0,
        },
        events,
        from: 0,
        based_on: None,
    }
}

/// Prices a local session as the watcher would and publishes nothing: no agent claimed it.
struct Unpublished(Pricing);

impl crate::cache::Publishing for Unpublished {
    fn price(&self, model: &str, tokens: &TokenCounts, billing: &Billing) -> Option<f64> {
        self.0.cost(model, tokens, billing)
    }

    fn publishes(&self, _: Framework, _: &str) -> bool {
        false
    }

    fn publications(&mut self, _: Option<ReadSpan<'_>>, _: &LocalChanges) -> Vec<Publication> {
        Vec::new()
    }
}

fn principal(id: &str, kind: &str, handle: &str, name: &str, owner: Option<&str>) -> PrincipalRow {
    PrincipalRow {
        id: id.into(),
        kind: kind.into(),
        handle: handle.into(),
        name: name.into(),
        owner: owner.map(str::to_owned),
    }
}

/// The boards of Dana's team, as the core makes them.
fn demo_boards() -> Value {
    let dir = tempfile::tempdir().unwrap();
    let mut cache = Cache::open(&dir.path().join("cache.db"), NOW).unwrap();
    cache.set_meta("principal", DANA).unwrap();
    cache
        .remember_principals([
            principal(DANA, "user", "dana", "Dana", None),
            principal(SAM, "user", "sam", "Sam", None),
            principal(WRITER, "agent", "dana/writer", "writer", Some(DANA)),
            principal(REVIEWER, "agent", "dana/reviewer", "reviewer", Some(DANA)),
            principal(SECURITY, "agent", "sam/security", "security", Some(SAM)),
        ])
        .unwrap();
    let (parser, read_to) = parser_room();
    let security = security_room();
    for room in [&parser, &security] {
        let head = room.events.len() as u64;
        cache
            .apply(DANA, room.id, &room.events, Some(head))
            .unwrap();
    }
    cache.mark_read(PARSER, read_to).unwrap();
    cache
        .mark_read(SECURITY_ROOM, security.events.len() as u64)
        .unwrap();
    let pricing = Pricing::built_in();
    cache
        .apply_log_reads(
            &[local_log()],
            NOW,
            "o_demo",
            &mut Unpublished(pricing.clone()),
        )
        .unwrap();

    let view: &CacheView = &cache;
    let local = view.local_sessions().unwrap();
    let tasks = task_board_from(
        view.task_sessions(&TaskFilter::default()).unwrap(),
        &local,
        "dana",
        NOW,
    );
    let architecture = architecture_boards_in(view).unwrap();
    let history = component_history_in(view, PARSER, "parser").unwrap();
    let teams = Teams::default();
    let costs = cost_rows_from(
        figures(
            view,
            &COST_GROUPING,
            &UsageQuery::default(),
            &teams,
            &|_, _| None,
            &pricing,
            "dana",
        )
        .unwrap(),
        &teams,
    );
    let sessions = session_board_in(
        view,
        (DANA, "dana", true),
        local,
        (Vec::new(), HashMap::new()),
        NOW,
    )
    .unwrap();
    let away = digest(view, DANA, true, NOW, None).unwrap();
    json!({
        "now_ms": NOW,
        "tasks": tasks.lanes,
        "architecture": architecture,
        "componentHistory": {"r-parser/parser": history},
        "costs": costs,
        "sessions": sessions,
        "away": away,
    })
}

#[test]
fn the_uis_demo_boards_are_the_cores_own() {
    crate::keep_ui_fixture("boards.json", &demo_boards(), "demo");
}

#[test]
fn the_demo_clock_is_read_right() {
    assert_eq!(iso(NOW), "2026-11-30T12:00:00.000Z");
    assert_eq!(
        roundtable_protocol::ts::parse_millis(&iso(NOW - 26 * HOUR + 7_000)),
        Some(NOW - 26 * HOUR + 7_000)
    );
}
