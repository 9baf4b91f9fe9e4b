//! OpenCode database rows of any text (a message's and a part's JSON, a session's model, a
//! todo's status): made into events without a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use roundtable_core::work::opencode::{DataRow, SessionRow, TodoRow, read_rows};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut pieces = text.splitn(4, '\u{1f}');
    let (first, second, third, fourth) = (
        pieces.next().unwrap_or_default(),
        pieces.next().unwrap_or_default(),
        pieces.next().unwrap_or_default(),
        pieces.next().unwrap_or_default(),
    );
    let sessions = [
        SessionRow {
            id: "ses_a".into(),
            directory: fourth.into(),
            parent_id: None,
            model: Some(third.into()),
            time_created: 1,
        },
        SessionRow {
            id: "ses_b".into(),
            directory: String::new(),
            parent_id: Some("ses_a".into()),
            model: None,
            time_created: 2,
        },
    ];
    let row = |id: &str, session: &str, data: &str| DataRow {
        id: id.into(),
        session_id: session.into(),
        time_created: 3,
        data: data.into(),
    };
    let messages = [row("msg_1", "ses_a", first), row("msg_2", "ses_b", second)];
    let parts = [row("prt_1", "ses_b", first), row("prt_2", "ses_a", second)];
    let todos = [TodoRow {
        session_id: "ses_b".into(),
        content: fourth.into(),
        status: third.into(),
        position: first.len() as i64,
    }];
    let changed = ["ses_a".to_owned(), "ses_b".to_owned()];
    let _ = read_rows(&sessions, &changed, &messages, &parts, &todos);
});
