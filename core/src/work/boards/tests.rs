use super::*;
use crate::log_events::{TaskItem, TaskStatus, TokenCounts};
use roundtable_protocol::bodies::ComponentStatus;
use roundtable_protocol::client::ControlAction;

fn task(title: &str, status: &str, since: i64) -> TaskView {
    TaskView {
        id: None,
        title: title.into(),
        status: crate::wire(status),
        active_form: None,
        since_ms: since,
        history: vec![TaskStateChange {
            status: crate::wire(status),
            ts_ms: since,
        }],
    }
}

fn published(agent: &str, handle: &str, session: &str, ts: i64) -> TaskSession {
    TaskSession {
        agent: agent.into(),
        agent_handle: Some(handle.into()),
        framework: "claude-code".into(),
        session_id: session.into(),
        room: "r_home".into(),
        ts_ms: ts,
        source: "TodoWrite".into(),
        tasks: vec![task("parse", "in_progress", ts)],
    }
}

fn local(session: &str, last: i64, tasks: Vec<TaskItem>) -> LocalSession {
    LocalSession {
        framework: "claude-code".into(),
        session_id: session.into(),
        cwd: Some("/work/app".into()),
        model: None,
        first_ms: Some(0),
        last_ms: Some(last),
        tasks,
        task_source: None,
        files: Vec::new(),
        tokens: TokenCounts::default(),
        claimed_by: None,
    }
}

fn item(title: &str, status: TaskStatus) -> TaskItem {
    TaskItem {
        id: None,
        title: title.into(),
        status,
        active_form: None,
    }
}

#[test]
fn a_lane_per_session_published_ones_once_and_this_machines_own_beside_them() {
    let day = 24 * 3_600_000;
    let now = 10 * day;
    let in_shared_room = TaskSession {
        room: "r_team".into(),
        ts_ms: now - 900,
        ..published("p_writer", "dana/writer", "s1", 0)
    };
    let mut claimed = local("s4", now - 50, vec![item("review", TaskStatus::InProgress)]);
    claimed.claimed_by = Some(SessionOwner {
        id: Some("p_reviewer".into()),
        handle: "dana/reviewer".into(),
    });
    let mut opus = local("s5", now - 40, Vec::new());
    opus.model = Some("claude-opus-5-5".into());
    let board = task_board_from(
        vec![
            published("p_writer", "dana/writer", "s1", now - 1000),
            // The same list in a room the person shares with: once, the latest.
            in_shared_room,
            published("p_writer", "dana/writer", "s1/sub", now - 1100),
            published("p_sec", "sam/security", "s9", now - 100),
        ],
        &[
            // Published (its subagent lane too): shown once, from the room.
            local("s1", now - 800, vec![item("parse", TaskStatus::Pending)]),
            // Nobody claimed it: from the logs, the person's own.
            local("s2", now - 200, vec![item("lint", TaskStatus::Completed)]),
            // Claimed, not yet published: from the logs, under its agent.
            claimed,
            // No list, lately: a lane that says why.
            opus,
            // No list, long ago: no lane.
            local("s3", now - 2 * day, Vec::new()),
        ],
        "dana",
        now,
    );
    let lanes: Vec<(&str, &str, Machine, Option<&str>)> = board
        .lanes
        .iter()
        .map(|lane| {
            (
                lane.key.as_str(),
                lane.person.as_str(),
                lane.machine,
                lane.agent_handle.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        lanes,
        [
            ("local:claude-code:s5", "dana", Machine::ThisMachine, None),
            (
                "p_reviewer:claude-code:s4",
                "dana",
                Machine::ThisMachine,
                Some("dana/reviewer")
            ),
            (
                "p_sec:claude-code:s9",
                "sam",
                Machine::Elsewhere,
                Some("sam/security")
            ),
            ("local:claude-code:s2", "dana", Machine::ThisMachine, None),
            (
                "p_writer:claude-code:s1",
                "dana",
                Machine::ThisMachine,
                Some("dana/writer")
            ),
            (
                "p_writer:claude-code:s1/sub",
                "dana",
                Machine::ThisMachine,
                Some("dana/writer")
            ),
        ]
    );
    let mine = &board.lanes[3];
    assert_eq!(mine.tasks[0].status.as_str(), "completed");
    assert_eq!(mine.tasks[0].since_ms, now - 200);
    assert_eq!(mine.room, None);
    assert_eq!(board.lanes[4].room.as_deref(), Some("r_team"));
    let why = board.lanes[0].no_list.as_deref().unwrap();
    assert!(why.contains("CLAUDE_CODE_ENABLE_TODO_TOOLS"), "{why}");
    assert!(board.lanes[1..].iter().all(|lane| lane.no_list.is_none()));
}

#[test]
fn a_session_without_a_list_says_why_for_its_cli_and_model() {
    let why = |framework, model| why_no_list(framework, model);
    for model in ["claude-opus-5-5", "claude-opus-4-8", "claude-sonnet-5"] {
        assert!(why("claude-code", Some(model)).contains("CLAUDE_CODE_ENABLE_TODO_TOOLS"));
    }
    for model in [
        "claude-sonnet-4-6",
        "claude-haiku-4-5-20251001",
        "claude-opus-4-6",
    ] {
        assert!(why("claude-code", Some(model)).contains("TaskCreate or TodoWrite"));
    }
    assert!(why("codex", Some("gpt-5.5")).contains("[tools.update_plan]"));
    assert!(why("gemini", Some("gemini-3.1-pro-preview")).contains("only to gemini-2.x"));
    assert!(why("gemini", Some("gemini-2.5-pro")).contains("write_todos yet"));
}

fn arch(seq: u64, sender: &str, body: serde_json::Value) -> ArchEventRow {
    ArchEventRow {
        seq,
        ts_ms: seq as i64 * 1000,
        sender: sender.into(),
        sender_handle: Some(sender.trim_start_matches("p_").replace('_', "/")),
        body: body.to_string(),
    }
}

#[test]
fn a_components_history_names_who_did_what_to_it_and_nothing_else() {
    let rows = [
        arch(
            1,
            "p_dana",
            serde_json::json!({"define": [
                {"id": "parser", "name": "Parser", "paths": ["src/parser/**"], "depends_on": ["lexer"]},
                {"id": "lexer", "name": "Lexer", "paths": ["src/lexer/**"], "depends_on": []}]}),
        ),
        arch(
            2,
            "p_dana",
            serde_json::json!({"component": "parser", "status": "working",
                "files": ["/w/src/parser/mod.rs"], "agent": "p_writer"}),
        ),
        arch(
            3,
            "p_dana_writer",
            serde_json::json!({"component": "lexer", "status": "done"}),
        ),
        arch(4, "p_dana", serde_json::json!({"nonsense": true})),
        arch(
            5,
            "p_dana_writer",
            serde_json::json!({"component": "parser", "status": "done", "note": "merged"}),
        ),
    ];
    let history = component_history_from(&rows, "parser", |id| {
        (id == "p_writer").then(|| "dana/writer".to_owned())
    });
    let summary: Vec<(u64, ComponentChangeKind, Option<&str>, Option<&str>)> = history
        .iter()
        .map(|change| {
            (
                change.seq,
                change.kind,
                change.status.map(ComponentStatus::as_str),
                change.agent_handle.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (1, ComponentChangeKind::Defined, None, Some("dana")),
            (
                2,
                ComponentChangeKind::Status,
                Some("working"),
                Some("dana/writer")
            ),
            (
                5,
                ComponentChangeKind::Status,
                Some("done"),
                Some("dana/writer")
            ),
        ]
    );
    assert_eq!(history[0].depends_on, ["lexer"]);
    assert_eq!(history[1].files, ["/w/src/parser/mod.rs"]);
    assert_eq!(history[2].note.as_deref(), Some("merged"));
}

#[test]
fn cost_rows_keep_every_grouping_value_and_name_the_persons_teams() {
    let teams: Teams =
        toml::from_str("[teams]\ncore = [\"dana\", \"sam\"]\nsec = [\"sam\"]\n").unwrap();
    let figure = |person: &str, unpriced: u64| Figure {
        group: [
            (Grouping::Room, "r".to_owned()),
            (Grouping::Day, "2026-11-30".to_owned()),
            (Grouping::Agent, format!("{person}/bot")),
            (Grouping::Person, person.to_owned()),
            (Grouping::Model, "m".to_owned()),
        ]
        .into_iter()
        .collect(),
        input: 1,
        output: 2,
        cache_write: 3,
        cache_read: 4,
        cost_usd: 0.5,
        unpriced_entries: unpriced,
        unpriced_models: if unpriced > 0 {
            vec!["m".into()]
        } else {
            Vec::new()
        },
        local_entries: 0,
        latest_ms: 7,
        unverified_usd: 0.0,
    };
    let rows = cost_rows_from(vec![figure("sam", 0), figure("lee", 2)], &teams);
    assert_eq!(rows[0].teams, ["core", "sec"]);
    assert_eq!(rows[1].teams, Vec::<String>::new());
    assert_eq!(
        (
            rows[0].agent.as_str(),
            rows[0].day.as_str(),
            rows[0].room.as_deref()
        ),
        ("sam/bot", "2026-11-30", Some("r"))
    );
    assert_eq!(
        (rows[1].unpriced_entries, rows[1].unpriced_models.clone()),
        (2, vec!["m".to_owned()])
    );
}

fn status(agent: &str, room: &str, state: &str, detail: Option<&str>, ts: i64) -> AgentStatusView {
    AgentStatusView {
        agent: agent.into(),
        handle: None,
        room: room.into(),
        state: crate::wire(state),
        detail: detail.map(str::to_owned),
        ts_ms: ts,
    }
}

fn ping(asker: &str, id: &str, state: PingState) -> PingView {
    PingView {
        room: "r_home".into(),
        ping: id.into(),
        seq: 1,
        asker: asker.into(),
        asker_handle: None,
        question: "may I?".into(),
        options: vec!["yes".into(), "no".into()],
        recipients: vec!["p_dana".into()],
        asked_ms: Some(1),
        expires_ms: None,
        state,
        answered_by: None,
        answered_by_handle: None,
        answered_ms: None,
        choice: None,
        text: None,
    }
}

fn rows() -> SessionRows {
    let bound = |agent: &str, session: &str, room: Option<&str>, at: i64| BoundSession {
        agent: agent.into(),
        session: SessionRow {
            framework: "claude-code".into(),
            session_id: session.into(),
            transcript: None,
            cwd: None,
            room: room.map(str::to_owned),
            started_ms: at,
            updated_ms: at,
        },
    };
    let agent = |id: &str,
                 handle: &str,
                 owner: &str,
                 controls: &[(Option<&str>, ControlAction)]| KnownAgent {
        id: id.into(),
        handle: Some(handle.into()),
        owner: Some(owner.into()),
        controls: controls
            .iter()
            .map(|(room, action)| ControlView {
                room: room.map(str::to_owned),
                action: *action,
                by: "p_dana".into(),
                seq: 0,
                reason: None,
            })
            .collect(),
    };
    SessionRows {
        me: "p_dana".into(),
        me_handle: "dana".into(),
        now_ms: 1_000_000,
        tasks: vec![published("p_writer", "dana/writer", "s1", 500)],
        usage: vec![UsageSession {
            agent: "p_sec".into(),
            framework: "codex".into(),
            session_id: "t9".into(),
            room: "r_shared".into(),
            last_ms: 900,
        }],
        local: vec![
            local("s1", 600, Vec::new()),
            local("loose", 999_000, Vec::new()),
        ],
        bound: vec![
            bound("p_writer", "s0", Some("r_parser"), 400),
            bound("p_writer", "s1", None, 550),
        ],
        agents: vec![
            // Paused in the parser room, stopped in another: each session sees its own.
            agent(
                "p_writer",
                "dana/writer",
                "p_dana",
                &[
                    (Some("r_parser"), ControlAction::Pause),
                    (Some("r_other"), ControlAction::Stop),
                ],
            ),
            agent("p_sec", "sam/security", "p_sam", &[]),
        ],
        statuses: vec![
            status("p_writer", "r_parser", "waiting_human", Some("may I?"), 700),
            status("p_sec", "r_shared", "error", Some("rate limited"), 800),
        ],
        pings: vec![
            ping("p_writer", "q1", PingState::Open),
            ping("p_writer", "q0", PingState::Answered),
        ],
        waiting: vec![ping("p_writer", "q1", PingState::Open)],
        messages: vec![
            MessageCount {
                room: "r_parser".into(),
                sender: "p_writer".into(),
                count: 4,
                last_ms: 990_000,
            },
            MessageCount {
                room: "r_other".into(),
                sender: "p_writer".into(),
                count: 9,
                last_ms: 990_000,
            },
        ],
        touches: Vec::new(),
    }
}

#[test]
fn sessions_that_need_the_person_come_first_with_what_they_need() {
    let board = session_board_from(&rows());
    let keys: Vec<&str> = board.iter().map(|session| session.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            // Needs you: the writer's bound session waits (its status is in its room),
            // then sam's agent in error.
            "p_sec:codex:t9",
            "p_writer:claude-code:s0",
            // Then by activity.
            "local:claude-code:loose",
            "p_writer:claude-code:s1",
        ]
    );
    let sec = &board[0];
    assert_eq!(sec.state, AgentState::Error);
    assert_eq!(sec.last_error.as_deref(), Some("rate limited"));
    assert_eq!((sec.person.as_str(), sec.mine), ("sam", false));
    assert_eq!(sec.machine, Machine::Elsewhere);
    let waiting = &board[1];
    assert_eq!(waiting.state, AgentState::WaitingHuman);
    assert_eq!(waiting.bound_room.as_deref(), Some("r_parser"));
    assert_eq!((waiting.questions_asked, waiting.questions_waiting), (2, 1));
    assert_eq!(waiting.messages_last_hour, 4, "in its room only");
    assert_eq!(waiting.controls, [ControlAction::Pause]);
    assert!(waiting.mine && waiting.needs_you);
    let loose = &board[2];
    assert_eq!(
        (loose.state, loose.agent.as_deref()),
        (AgentState::Working, None)
    );
    assert_eq!(loose.person, "dana");
    let other = &board[3];
    assert_eq!(
        other.state,
        AgentState::Idle,
        "the status is another session's"
    );
    assert_eq!(other.machine, Machine::ThisMachine);
    assert_eq!(other.rooms, ["r_home"]);
    assert!(
        other.controls.is_empty(),
        "the pause and the stop are in rooms this session is not bound to: {:?}",
        other.controls
    );
    assert_eq!(other.last_active_ms, 600);
    // The agent's questions are its current session's.
    assert_eq!((other.questions_waiting, other.needs_you), (0, false));
}

#[test]
fn person_is_the_handles_first_part() {
    assert_eq!(person_of("dana/writer"), "dana");
    assert_eq!(person_of("sam"), "sam");
}

#[test]
fn the_architecture_board_shows_a_claim_only_while_it_counts() {
    let hour = 3_600_000;
    let now = 100 * hour;
    let holder = |agent: &str, hours_ago: i64| crate::cache::ComponentAgent {
        agent: agent.into(),
        handle: Some(format!("dana/{agent}")),
        status: ComponentStatus::Working,
        note: None,
        files: Vec::new(),
        ts_ms: now - hours_ago * hour,
        claimed: true,
    };
    let board = ArchitectureBoard {
        room: "r".into(),
        title: None,
        source: None,
        components: vec![crate::cache::ComponentView {
            room: "r".into(),
            id: "parser".into(),
            name: None,
            description: None,
            paths: Vec::new(),
            depends_on: Vec::new(),
            status: None,
            note: None,
            files: Vec::new(),
            by: None,
            status_ms: None,
            source: None,
            agents: vec![holder("recent", 3), holder("gone", 5)],
            working: Vec::new(),
        }],
    };
    let shown = without_lapsed_claims(vec![board], now);
    let claimed: Vec<(&str, bool)> = shown[0].components[0]
        .agents
        .iter()
        .map(|agent| (agent.agent.as_str(), agent.claimed))
        .collect();
    assert_eq!(claimed, [("recent", true), ("gone", false)]);
}
