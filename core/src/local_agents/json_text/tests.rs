use super::*;
use proptest::prelude::*;
use serde_json::json;

fn roundtable_server() -> Value {
    // Keys in alphabetical order, so the rendering is the same whether or not serde_json's
    // `preserve_order` feature is on.
    json!({"args": ["mcp"], "command": "roundtable", "type": "stdio"})
}

fn our_stop_hook() -> Value {
    json!({"hooks": [{"command": "roundtable hook stop", "type": "command"}], "matcher": ""})
}

/// The document as a value; an empty file counts as `{}`.
fn document_value(text: &str) -> Value {
    value_at(text, &[])
        .expect("test documents parse")
        .unwrap_or_else(|| json!({}))
}

/// `document` with `value` put at `path` + `key` (missing objects created), or appended to
/// the array at `path` when `key` is `None`: what an edit must mean.
fn expected_document(document: &Value, path: &[&str], key: Option<&str>, value: &Value) -> Value {
    let mut expected = document.clone();
    let mut node = &mut expected;
    for segment in path {
        node = node
            .as_object_mut()
            .expect("path goes through objects")
            .entry((*segment).to_owned())
            .or_insert_with(|| {
                if key.is_none() && std::ptr::eq(segment, path.last().unwrap()) {
                    json!([])
                } else {
                    json!({})
                }
            });
    }
    match key {
        Some(key) => {
            node.as_object_mut()
                .expect("an object")
                .insert(key.to_owned(), value.clone());
        }
        None => node.as_array_mut().expect("an array").push(value.clone()),
    }
    expected
}

/// True when `shorter` can be had from `longer` by deleting characters: the edit only added.
fn only_added(shorter: &str, longer: &str) -> bool {
    let mut remaining = longer.chars();
    shorter
        .chars()
        .all(|wanted| remaining.any(|found| found == wanted))
}

/// Inserts, checks meaning and byte preservation, undoes, checks the original bytes are back;
/// returns the edited text for the golden comparison.
fn insert_and_undo(original: &str, path: &[&str], key: Option<&str>, value: &Value) -> String {
    let (edited, inserted) = match key {
        Some(key) => insert_member(original, path, key, value),
        None => append_element(original, path, value),
    }
    .expect("the edit succeeds");
    let expected = expected_document(&document_value(original), path, key, value);
    assert_eq!(document_value(&edited), expected, "edited text:\n{edited}");
    if inserted.replaced_value_text.is_none() {
        assert!(
            only_added(original, &edited),
            "original bytes changed:\n{edited}"
        );
    }
    let manifest = serde_json::to_string(&inserted).expect("the record serializes");
    let inserted: Inserted = serde_json::from_str(&manifest).expect("the record reads back");
    let restored = remove_inserted(&edited, &inserted).expect("the undo succeeds");
    assert_eq!(
        restored, original,
        "undo did not restore the original bytes"
    );
    edited
}

struct Golden {
    name: &'static str,
    original: &'static str,
    path: &'static [&'static str],
    /// `None`: append an element to the array at `path`.
    key: Option<&'static str>,
    value: fn() -> Value,
    expected: &'static str,
}

const CLAUDE_JSON: &str = r#"{
  "numStartups": 12,
  "mcpServers": {
"github": {
  "type": "stdio",
  "command": "gh-mcp",
  "args": []
}
  },
  "projects": {
"/home/me/work": {
  "allowedTools": [],
  "mcpServers": {}
}
  },
  "userID": "abc"
}
"#;

const CLAUDE_SETTINGS: &str = r#"{
  "permissions": {
"allow": ["Bash(git status)", "Read(~/notes/**)"],
"deny": []
  },
  "hooks": {
"Stop": [
  {
    "matcher": "",
    "hooks": [
      {
        "type": "command",
        "command": "other-tool notify --done"
      }
    ]
  }
]
  },
  "model": "opus"
}
"#;

const GEMINI_SETTINGS: &str = "// Gemini CLI settings\n{\n  \"theme\": \"GitHub\", // my favourite\n  /* MCP servers go here */\n  \"mcpServers\": {\n    \"local\": { \"command\": \"node\", \"args\": [\"server.js\"] } // inline style\n  },\n  \"selectedAuthType\": \"oauth-personal\" /* last */ // member\n}\n";

fn goldens() -> Vec<Golden> {
    vec![
        Golden {
            name: "claude.json: a server beside another user server",
            original: CLAUDE_JSON,
            path: &["mcpServers"],
            key: Some("roundtable"),
            value: roundtable_server,
            expected: r#"{
  "numStartups": 12,
  "mcpServers": {
"github": {
  "type": "stdio",
  "command": "gh-mcp",
  "args": []
},
"roundtable": {
  "args": [
    "mcp"
  ],
  "command": "roundtable",
  "type": "stdio"
}
  },
  "projects": {
"/home/me/work": {
  "allowedTools": [],
  "mcpServers": {}
}
  },
  "userID": "abc"
}
"#,
        },
        Golden {
            name: "claude.json: a project server into an empty object",
            original: CLAUDE_JSON,
            path: &["projects", "/home/me/work", "mcpServers"],
            key: Some("roundtable"),
            value: roundtable_server,
            expected: r#"{
  "numStartups": 12,
  "mcpServers": {
"github": {
  "type": "stdio",
  "command": "gh-mcp",
  "args": []
}
  },
  "projects": {
"/home/me/work": {
  "allowedTools": [],
  "mcpServers": {
    "roundtable": {
      "args": [
        "mcp"
      ],
      "command": "roundtable",
      "type": "stdio"
    }
  }
}
  },
  "userID": "abc"
}
"#,
        },
        Golden {
            name: "settings.json: a Stop hook after another tool's",
            original: CLAUDE_SETTINGS,
            path: &["hooks", "Stop"],
            key: None,
            value: our_stop_hook,
            expected: r#"{
  "permissions": {
"allow": ["Bash(git status)", "Read(~/notes/**)"],
"deny": []
  },
  "hooks": {
"Stop": [
  {
    "matcher": "",
    "hooks": [
      {
        "type": "command",
        "command": "other-tool notify --done"
      }
    ]
  },
  {
    "hooks": [
      {
        "command": "roundtable hook stop",
        "type": "command"
      }
    ],
    "matcher": ""
  }
]
  },
  "model": "opus"
}
"#,
        },
        Golden {
            name: "settings.json: a new event array is created",
            original: CLAUDE_SETTINGS,
            path: &["hooks", "SessionStart"],
            key: None,
            value: our_stop_hook,
            expected: r#"{
  "permissions": {
"allow": ["Bash(git status)", "Read(~/notes/**)"],
"deny": []
  },
  "hooks": {
"Stop": [
  {
    "matcher": "",
    "hooks": [
      {
        "type": "command",
        "command": "other-tool notify --done"
      }
    ]
  }
],
"SessionStart": [
  {
    "hooks": [
      {
        "command": "roundtable hook stop",
        "type": "command"
      }
    ],
    "matcher": ""
  }
]
  },
  "model": "opus"
}
"#,
        },
        Golden {
            name: "settings.json: an element of a one-line array stays on the line",
            original: CLAUDE_SETTINGS,
            path: &["permissions", "allow"],
            key: None,
            value: || json!("mcp__roundtable"),
            expected: r#"{
  "permissions": {
"allow": ["Bash(git status)", "Read(~/notes/**)", "mcp__roundtable"],
"deny": []
  },
  "hooks": {
"Stop": [
  {
    "matcher": "",
    "hooks": [
      {
        "type": "command",
        "command": "other-tool notify --done"
      }
    ]
  }
]
  },
  "model": "opus"
}
"#,
        },
        Golden {
            name: "settings.json: an element into an empty array",
            original: CLAUDE_SETTINGS,
            path: &["permissions", "deny"],
            key: None,
            value: || json!("Bash(rm:*)"),
            expected: r#"{
  "permissions": {
"allow": ["Bash(git status)", "Read(~/notes/**)"],
"deny": [
  "Bash(rm:*)"
]
  },
  "hooks": {
"Stop": [
  {
    "matcher": "",
    "hooks": [
      {
        "type": "command",
        "command": "other-tool notify --done"
      }
    ]
  }
]
  },
  "model": "opus"
}
"#,
        },
        Golden {
            name: "gemini: comments stay on their lines",
            original: GEMINI_SETTINGS,
            path: &["mcpServers"],
            key: Some("roundtable"),
            value: roundtable_server,
            expected: "// Gemini CLI settings\n{\n  \"theme\": \"GitHub\", // my favourite\n  /* MCP servers go here */\n  \"mcpServers\": {\n    \"local\": { \"command\": \"node\", \"args\": [\"server.js\"] }, // inline style\n    \"roundtable\": {\n      \"args\": [\n        \"mcp\"\n      ],\n      \"command\": \"roundtable\",\n      \"type\": \"stdio\"\n    }\n  },\n  \"selectedAuthType\": \"oauth-personal\" /* last */ // member\n}\n",
        },
        Golden {
            name: "gemini: after a last member with two trailing comments",
            original: GEMINI_SETTINGS,
            path: &[],
            key: Some("hooks"),
            value: || json!({"Stop": []}),
            expected: "// Gemini CLI settings\n{\n  \"theme\": \"GitHub\", // my favourite\n  /* MCP servers go here */\n  \"mcpServers\": {\n    \"local\": { \"command\": \"node\", \"args\": [\"server.js\"] } // inline style\n  },\n  \"selectedAuthType\": \"oauth-personal\", /* last */ // member\n  \"hooks\": {\n    \"Stop\": []\n  }\n}\n",
        },
        Golden {
            name: "gemini: inside a one-line object, in its style",
            original: GEMINI_SETTINGS,
            path: &["mcpServers", "local"],
            key: Some("cwd"),
            value: || json!("/srv"),
            expected: "// Gemini CLI settings\n{\n  \"theme\": \"GitHub\", // my favourite\n  /* MCP servers go here */\n  \"mcpServers\": {\n    \"local\": { \"command\": \"node\", \"args\": [\"server.js\"], \"cwd\": \"/srv\" } // inline style\n  },\n  \"selectedAuthType\": \"oauth-personal\" /* last */ // member\n}\n",
        },
        Golden {
            name: "tab indentation",
            original: "{\n\t\"a\": [\n\t\t1\n\t]\n}",
            path: &["hooks", "Stop"],
            key: None,
            value: || json!({"matcher": ""}),
            expected: "{\n\t\"a\": [\n\t\t1\n\t],\n\t\"hooks\": {\n\t\t\"Stop\": [\n\t\t\t{\n\t\t\t\t\"matcher\": \"\"\n\t\t\t}\n\t\t]\n\t}\n}",
        },
        Golden {
            name: "four spaces and CRLF",
            original: "{\r\n    \"a\": {\r\n        \"b\": true\r\n    }\r\n}\r\n",
            path: &["a"],
            key: Some("c"),
            value: || json!([1, {"d": null}]),
            expected: "{\r\n    \"a\": {\r\n        \"b\": true,\r\n        \"c\": [\r\n            1,\r\n            {\r\n                \"d\": null\r\n            }\r\n        ]\r\n    }\r\n}\r\n",
        },
        Golden {
            name: "compact one line",
            original: r#"{"a":1,"mcpServers":{"x":{"command":"y"}}}"#,
            path: &["mcpServers"],
            key: Some("roundtable"),
            value: roundtable_server,
            expected: r#"{"a":1,"mcpServers":{"x":{"command":"y"},"roundtable":{"args":["mcp"],"command":"roundtable","type":"stdio"}}}"#,
        },
        Golden {
            name: "one line with spaces, missing objects created",
            original: r#"{ "a": 1, "b": [true] }"#,
            path: &["mcpServers"],
            key: Some("roundtable"),
            value: || json!({"command": "rt"}),
            expected: r#"{ "a": 1, "b": [true], "mcpServers": {"roundtable": {"command": "rt"}} }"#,
        },
        Golden {
            name: "an empty file becomes a pretty object",
            original: "",
            path: &["mcpServers"],
            key: Some("roundtable"),
            value: || json!({"command": "rt"}),
            expected: "{\n  \"mcpServers\": {\n    \"roundtable\": {\n      \"command\": \"rt\"\n    }\n  }\n}\n",
        },
        Golden {
            name: "a whitespace-only file",
            original: " \n\n",
            path: &[],
            key: Some("k"),
            value: || json!(1),
            expected: "{\n  \"k\": 1\n}\n",
        },
        Golden {
            name: "a file with only a comment keeps it",
            original: "// settings come here\n",
            path: &[],
            key: Some("k"),
            value: || json!(1),
            expected: "// settings come here\n{\n  \"k\": 1\n}\n",
        },
        Golden {
            name: "an empty object",
            original: "{}",
            path: &[],
            key: Some("k"),
            value: || json!([]),
            expected: "{\n  \"k\": []\n}",
        },
        Golden {
            name: "an empty object over two lines",
            original: "{\n}\n",
            path: &[],
            key: Some("k"),
            value: || json!("v"),
            expected: "{\n  \"k\": \"v\"\n}\n",
        },
        Golden {
            name: "an empty object holding a comment",
            original: "{\n  // add servers below\n}\n",
            path: &[],
            key: Some("k"),
            value: || json!("v"),
            expected: "{\n  // add servers below\n  \"k\": \"v\"\n}\n",
        },
        Golden {
            name: "replacing a member keeps its neighbours",
            original: "{\n  \"a\": 1,\n  \"k\": [1,2], // old\n  \"z\": 3\n}",
            path: &[],
            key: Some("k"),
            value: || json!({"new": true}),
            expected: "{\n  \"a\": 1,\n  \"k\": {\n    \"new\": true\n  }, // old\n  \"z\": 3\n}",
        },
        Golden {
            name: "a byte order mark and escapes survive",
            original: "\u{feff}{\"caf\\u00e9\": \"a\\\"b\", \"n\": -1.5e3}",
            path: &[],
            key: Some("new \"one\""),
            value: || json!("line\nbreak\ttab\u{1}"),
            expected: "\u{feff}{\"caf\\u00e9\": \"a\\\"b\", \"n\": -1.5e3, \"new \\\"one\\\"\": \"line\\nbreak\\ttab\\u0001\"}",
        },
    ]
}

#[test]
fn golden_edits_render_in_the_file_style_and_undo_to_the_original_bytes() {
    for golden in goldens() {
        let edited = insert_and_undo(golden.original, golden.path, golden.key, &(golden.value)());
        assert_eq!(edited, golden.expected, "golden case: {}", golden.name);
    }
}

#[test]
fn malformed_files_are_refused_with_their_position() {
    let cases: &[(&str, usize, usize)] = &[
        ("{\"a\": 1} x", 1, 10),
        ("{\n  \"a\": \"unterminated\n}", 2, 21),
        ("{\"a\": 1,}", 1, 9),
        ("{\"a\" 1}", 1, 6),
        ("{\"a\": tru}", 1, 7),
        ("{\"a\": 01}", 1, 8),
        ("{\"a\": \"\\x\"}", 1, 8),
        ("{/* never closed", 1, 2),
        ("[1, 2", 1, 6),
        ("{'a': 1}", 1, 2),
        ("{\"a\": 1}{}", 1, 9),
    ];
    for (text, line, column) in cases {
        let expected = |error: JsonTextError| match error {
            JsonTextError::Unparsable {
                line: l, column: c, ..
            } => assert_eq!((l, c), (*line, *column), "{text:?}"),
            other => panic!("{text:?}: unexpected error {other}"),
        };
        expected(insert_member(text, &[], "k", &json!(1)).expect_err(text));
        expected(append_element(text, &["k"], &json!(1)).expect_err(text));
        expected(value_at(text, &[]).expect_err(text));
    }
}

#[test]
fn deep_nesting_is_refused_without_overflowing_the_stack() {
    let text = "[".repeat(100_000);
    assert!(matches!(
        value_at(&text, &[]),
        Err(JsonTextError::Unparsable { .. })
    ));
}

#[test]
fn a_path_through_a_non_object_is_refused() {
    let text = r#"{"mcpServers": ["not", "an", "object"], "hooks": {"Stop": {}}}"#;
    assert_eq!(
        insert_member(text, &["mcpServers"], "rt", &json!(1)).unwrap_err(),
        JsonTextError::NotAnObject {
            path: "`mcpServers`".to_owned(),
            found: "an array"
        }
    );
    assert_eq!(
        append_element(text, &["hooks", "Stop"], &json!(1)).unwrap_err(),
        JsonTextError::NotAnArray {
            path: "`hooks.Stop`".to_owned(),
            found: "an object"
        }
    );
    assert_eq!(
        insert_member("[1]", &[], "k", &json!(1)).unwrap_err(),
        JsonTextError::NotAnObject {
            path: "the top level".to_owned(),
            found: "an array"
        }
    );
}

#[test]
fn value_at_reads_the_last_of_repeated_names_and_misses_quietly() {
    let text = "{\"a\": {\"b\": 1}, /* c */ \"a\": {\"b\": 2}}";
    assert_eq!(value_at(text, &["a", "b"]).unwrap(), Some(json!(2)));
    assert_eq!(value_at(text, &["a", "zz"]).unwrap(), None);
    assert_eq!(value_at(text, &["a", "b", "c"]).unwrap(), None);
    assert_eq!(value_at("", &["a"]).unwrap(), None);
}

#[test]
fn undo_keeps_a_member_the_user_added_after_ours() {
    let (ours, inserted) = insert_member(
        CLAUDE_JSON,
        &["mcpServers"],
        "roundtable",
        &roundtable_server(),
    )
    .unwrap();
    let (theirs, _) =
        insert_member(&ours, &["mcpServers"], "theirs", &json!({"command": "t"})).unwrap();
    let restored = remove_inserted(&theirs, &inserted).unwrap();
    let (expected, _) = insert_member(
        CLAUDE_JSON,
        &["mcpServers"],
        "theirs",
        &json!({"command": "t"}),
    )
    .unwrap();
    assert_eq!(restored, expected);
}

#[test]
fn undo_keeps_the_users_edits_elsewhere() {
    let (ours, inserted) = insert_member(
        CLAUDE_JSON,
        &["mcpServers"],
        "roundtable",
        &roundtable_server(),
    )
    .unwrap();
    let changed = ours
        .replace("\"numStartups\": 12", "\"numStartups\":13")
        .replace("\"userID\": \"abc\"", "\"userID\": \"abc\", \"x\": [ ]");
    let restored = remove_inserted(&changed, &inserted).unwrap();
    let expected = CLAUDE_JSON
        .replace("\"numStartups\": 12", "\"numStartups\":13")
        .replace("\"userID\": \"abc\"", "\"userID\": \"abc\", \"x\": [ ]");
    assert_eq!(restored, expected);
}

#[test]
fn undo_leaves_an_entry_the_user_edited_or_removed() {
    let (ours, inserted) = insert_member(
        CLAUDE_JSON,
        &["mcpServers"],
        "roundtable",
        &roundtable_server(),
    )
    .unwrap();
    let edited = ours.replace(
        "\"command\": \"roundtable\"",
        "\"command\": \"/opt/roundtable\"",
    );
    assert_eq!(remove_inserted(&edited, &inserted).unwrap(), edited);
    assert_eq!(
        remove_inserted(CLAUDE_JSON, &inserted).unwrap(),
        CLAUDE_JSON
    );
    assert_eq!(remove_inserted("", &inserted).unwrap(), "");
}

#[test]
fn undo_keeps_a_created_container_the_user_added_to() {
    let original = "{\n  \"model\": \"opus\"\n}\n";
    let (ours, inserted) = append_element(original, &["hooks", "Stop"], &our_stop_hook()).unwrap();
    let (theirs, _) = insert_member(&ours, &["hooks"], "Notification", &json!([])).unwrap();
    let restored = remove_inserted(&theirs, &inserted).unwrap();
    // `Stop` was created for our hook and goes with it; `hooks` now holds the user's entry.
    assert_eq!(
        document_value(&restored),
        json!({"model": "opus", "hooks": {"Notification": []}})
    );
}

#[test]
fn undo_of_a_replacement_restores_the_previous_value_text() {
    let original = "{\"mcpServers\": {\"roundtable\": {\"command\": \"old\" /* v1 */}}}";
    let (edited, inserted) = insert_member(
        original,
        &["mcpServers"],
        "roundtable",
        &roundtable_server(),
    )
    .unwrap();
    assert_eq!(
        value_at(&edited, &["mcpServers", "roundtable"]).unwrap(),
        Some(roundtable_server())
    );
    assert_eq!(remove_inserted(&edited, &inserted).unwrap(), original);
}

#[test]
fn undo_of_an_edit_to_an_empty_file_gives_back_the_empty_file() {
    for original in ["", "\n", "  \r\n", "// only a comment"] {
        let (edited, inserted) = insert_member(
            original,
            &["mcpServers"],
            "roundtable",
            &roundtable_server(),
        )
        .unwrap();
        assert_eq!(remove_inserted(&edited, &inserted).unwrap(), original);
        // The user added a member of their own: only ours goes.
        let (theirs, _) = insert_member(&edited, &[], "theme", &json!("dark")).unwrap();
        let restored = remove_inserted(&theirs, &inserted).unwrap();
        assert_eq!(document_value(&restored), json!({"theme": "dark"}));
    }
}

#[test]
fn a_float_reads_back_exactly_and_survives_a_manifest_round_trip() {
    // serde_json's default float parsing can be off by an ulp for this one.
    let value = json!([-979312846.5722827, {"x": 0.30000000000000004}]);
    let (edited, inserted) = insert_member("{}", &[], "k", &value).unwrap();
    assert_eq!(value_at(&edited, &["k"]).unwrap(), Some(value));
    let manifest = serde_json::to_string(&inserted).unwrap();
    let inserted: Inserted = serde_json::from_str(&manifest).unwrap();
    assert_eq!(remove_inserted(&edited, &inserted).unwrap(), "{}");
}

#[test]
fn an_undo_record_that_cannot_come_from_an_edit_is_refused() {
    let (edited, mut inserted) = insert_member("{}", &[], "k", &json!(1)).unwrap();
    inserted.existing_depth = 3;
    assert!(matches!(
        remove_inserted(&edited, &inserted),
        Err(JsonTextError::InvalidRecord { .. })
    ));
}

#[test]
fn errors_tell_the_user_what_to_do() {
    let error = insert_member("{\"a\": }", &[], "k", &json!(1)).unwrap_err();
    assert_eq!(
        error.to_string(),
        "the file is not valid JSON at line 1, column 7: expected a value, found `}`. \
         Fix it by hand and try again; Roundtable does not rewrite a file it cannot read"
    );
}

// -----------------------------------------------------------------------------------------
// Property tests: random documents in random styles
// -----------------------------------------------------------------------------------------

/// How a generated document is written out.
#[derive(Debug, Clone)]
struct TextStyle {
    /// `None`: everything on one line.
    indent: Option<&'static str>,
    newline: &'static str,
    colon: &'static str,
    after_comma: &'static str,
    /// Extra whitespace or comments, used in turn at each gap between tokens.
    gaps: Vec<&'static str>,
    /// Write non-ASCII characters as `\u` escapes.
    escape_unicode: bool,
}

fn text_style(with_comments: bool) -> impl Strategy<Value = TextStyle> {
    let plain_gaps = vec!["", "", "", "", " ", "  ", "\t", "\n", "\r\n", "\n\n"];
    let comment_gaps = vec![
        "",
        "",
        "",
        " ",
        "\n",
        "/* c */",
        " /* multi\nline */ ",
        "// line\n",
        " // x\r\n",
        "/**/",
    ];
    let gap_pool = if with_comments {
        comment_gaps
    } else {
        plain_gaps
    };
    (
        prop::option::of(prop::sample::select(vec!["  ", "    ", "\t", " "])),
        prop::sample::select(vec!["\n", "\r\n"]),
        prop::sample::select(vec![": ", ":", " : "]),
        prop::sample::select(vec![" ", ""]),
        prop::collection::vec(prop::sample::select(gap_pool), 0..12),
        any::<bool>(),
    )
        .prop_map(
            |(indent, newline, colon, after_comma, gaps, escape_unicode)| TextStyle {
                indent,
                newline,
                colon,
                after_comma,
                gaps,
                escape_unicode,
            },
        )
}

struct Writer<'s> {
    style: &'s TextStyle,
    out: String,
    gap_index: usize,
}

impl Writer<'_> {
    fn gap(&mut self) {
        if !self.style.gaps.is_empty() {
            let gap = self.style.gaps[self.gap_index % self.style.gaps.len()];
            self.gap_index += 1;
            self.out.push_str(gap);
        }
    }

    fn string(&mut self, text: &str) {
        if self.style.escape_unicode {
            self.out.push('"');
            for character in text.chars() {
                if character.is_ascii() {
                    let escaped = serde_json::to_string(&character.to_string()).unwrap();
                    self.out.push_str(&escaped[1..escaped.len() - 1]);
                } else {
                    let mut units = [0u16; 2];
                    for unit in character.encode_utf16(&mut units) {
                        self.out.push_str(&format!("\\u{unit:04X}"));
                    }
                }
            }
            self.out.push('"');
        } else {
            self.out.push_str(&serde_json::to_string(text).unwrap());
        }
    }

    fn line(&mut self, depth: usize) {
        if let Some(indent) = self.style.indent {
            self.out.push_str(self.style.newline);
            self.out.push_str(&indent.repeat(depth));
        }
    }

    fn value(&mut self, value: &Value, depth: usize) {
        match value {
            Value::Object(members) => {
                let entries: Vec<_> = members.iter().map(|(k, v)| (Some(k.as_str()), v)).collect();
                self.container(('{', '}'), &entries, depth);
            }
            Value::Array(elements) => {
                let entries: Vec<_> = elements.iter().map(|v| (None, v)).collect();
                self.container(('[', ']'), &entries, depth);
            }
            Value::String(text) => self.string(text),
            other => self.out.push_str(&other.to_string()),
        }
    }

    fn container(
        &mut self,
        (open, close): (char, char),
        entries: &[(Option<&str>, &Value)],
        depth: usize,
    ) {
        self.out.push(open);
        self.gap();
        for (position, (key, value)) in entries.iter().enumerate() {
            if position > 0 {
                self.out.push(',');
                if self.style.indent.is_none() {
                    self.out.push_str(self.style.after_comma);
                }
            }
            self.line(depth + 1);
            self.gap();
            if let Some(key) = key {
                self.string(key);
                self.gap();
                self.out.push_str(self.style.colon);
                self.gap();
            }
            self.value(value, depth + 1);
            self.gap();
        }
        if !entries.is_empty() {
            self.line(depth);
        }
        self.out.push(close);
    }
}

fn write_document(value: &Value, style: &TextStyle) -> String {
    let mut writer = Writer {
        style,
        out: String::new(),
        gap_index: 0,
    };
    writer.gap();
    writer.value(value, 0);
    writer.gap();
    if style.indent.is_some() {
        writer.out.push_str(style.newline);
    }
    writer.out
}

fn json_string() -> impl Strategy<Value = String> {
    "[a-c \"\\\\/\n\t\u{1}é€😀]{0,5}"
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        (-1.0e9f64..1.0e9).prop_map(Value::from),
        json_string().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(json_string(), inner, 0..4)
                .prop_map(|members| Value::Object(members.into_iter().collect())),
        ]
    })
}

fn json_document() -> impl Strategy<Value = Value> {
    prop::collection::btree_map(json_string(), json_value(), 0..5)
        .prop_map(|members| Value::Object(members.into_iter().collect()))
}

/// Paths (through objects only) to every object in `value`, and to every array.
fn addressable(value: &Value) -> (Vec<Vec<String>>, Vec<Vec<String>>) {
    fn walk(
        value: &Value,
        path: &mut Vec<String>,
        objects: &mut Vec<Vec<String>>,
        arrays: &mut Vec<Vec<String>>,
    ) {
        match value {
            Value::Object(members) => {
                objects.push(path.clone());
                for (key, member) in members {
                    path.push(key.clone());
                    walk(member, path, objects, arrays);
                    path.pop();
                }
            }
            Value::Array(_) => arrays.push(path.clone()),
            _ => {}
        }
    }
    let (mut objects, mut arrays) = (Vec::new(), Vec::new());
    walk(value, &mut Vec::new(), &mut objects, &mut arrays);
    (objects, arrays)
}

/// Where to insert: an existing object (maybe below it a few new objects), and a key that
/// may already be there.
#[derive(Debug, Clone)]
struct Target {
    path: Vec<String>,
    key: String,
}

fn pick_member_target(
    document: &Value,
    object: prop::sample::Index,
    new_segments: &[String],
    existing_key: Option<prop::sample::Index>,
    new_key: &str,
) -> Target {
    let (objects, _) = addressable(document);
    let mut path = object.get(&objects).clone();
    path.extend(new_segments.iter().cloned());
    let mut node = document;
    for segment in &path {
        node = node.get(segment).unwrap_or(&Value::Null);
    }
    let key = match (existing_key, node.as_object()) {
        (Some(index), Some(members)) if !members.is_empty() => {
            let keys: Vec<&String> = members.keys().collect();
            index.get(&keys).to_string()
        }
        _ => new_key.to_owned(),
    };
    Target { path, key }
}

fn pick_array_path(
    document: &Value,
    array: Option<prop::sample::Index>,
    object: prop::sample::Index,
    new_segments: &[String],
) -> Vec<String> {
    let (objects, arrays) = addressable(document);
    match array {
        Some(index) if !arrays.is_empty() => index.get(&arrays).clone(),
        _ => {
            let mut path = object.get(&objects).clone();
            path.extend(new_segments.iter().cloned());
            path.push("new-array".to_owned());
            path
        }
    }
}

fn as_strs(path: &[String]) -> Vec<&str> {
    path.iter().map(String::as_str).collect()
}

fn new_segments() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec("new-[a-z]{1,3}", 0..3)
}

fn member_case(with_comments: bool) -> impl Strategy<Value = (String, Target, Value)> {
    (
        json_document(),
        text_style(with_comments),
        any::<prop::sample::Index>(),
        new_segments(),
        prop::option::of(any::<prop::sample::Index>()),
        "k-[a-z\"]{1,3}",
        json_value(),
    )
        .prop_map(
            |(document, style, object, segments, existing, new_key, value)| {
                let target = pick_member_target(&document, object, &segments, existing, &new_key);
                (write_document(&document, &style), target, value)
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn inserting_a_member_then_undoing_restores_the_bytes((text, target, value) in member_case(false)) {
        insert_and_undo(&text, &as_strs(&target.path), Some(&target.key), &value);
    }

    #[test]
    fn inserting_a_member_into_commented_json_then_undoing_restores_the_bytes((text, target, value) in member_case(true)) {
        insert_and_undo(&text, &as_strs(&target.path), Some(&target.key), &value);
    }

    #[test]
    fn appending_an_element_then_undoing_restores_the_bytes(
        document in json_document(),
        style in text_style(true),
        array in prop::option::of(any::<prop::sample::Index>()),
        object in any::<prop::sample::Index>(),
        segments in new_segments(),
        value in json_value(),
    ) {
        let text = write_document(&document, &style);
        let path = pick_array_path(&document, array, object, &segments);
        insert_and_undo(&text, &as_strs(&path), None, &value);
    }

    #[test]
    fn two_inserts_undone_in_reverse_order_restore_the_bytes(
        (text, first, first_value) in member_case(true),
        second_segments in new_segments(),
        second_key in "k2-[a-z]{1,3}",
        second_value in json_value(),
    ) {
        let (once, first_record) = insert_member(&text, &as_strs(&first.path), &first.key, &first_value).unwrap();
        let mut second_path = first.path.clone();
        second_path.extend(second_segments);
        let (twice, second_record) = insert_member(&once, &as_strs(&second_path), &second_key, &second_value).unwrap();
        let undone_second = remove_inserted(&twice, &second_record).unwrap();
        prop_assert_eq!(&undone_second, &once);
        prop_assert_eq!(remove_inserted(&undone_second, &first_record).unwrap(), text);
    }

    #[test]
    fn two_inserts_undone_in_insertion_order_restore_the_meaning(
        document in json_document(),
        style in text_style(true),
        object in any::<prop::sample::Index>(),
        first_value in json_value(),
        second_value in json_value(),
    ) {
        let text = write_document(&document, &style);
        let target = pick_member_target(&document, object, &[], None, "k-first");
        let path = as_strs(&target.path);
        let (once, first_record) = insert_member(&text, &path, "k-first", &first_value).unwrap();
        let (twice, second_record) = insert_member(&once, &path, "k-second", &second_value).unwrap();
        let without_first = remove_inserted(&twice, &first_record).unwrap();
        prop_assert_eq!(
            document_value(&without_first),
            expected_document(&document, &path, Some("k-second"), &second_value)
        );
        let without_both = remove_inserted(&without_first, &second_record).unwrap();
        prop_assert_eq!(document_value(&without_both), document);
    }

    #[test]
    fn arbitrary_text_never_panics(text in "[{}\\[\\]\",:/* \n0-9a-z\\\\-]{0,40}") {
        let _ = value_at(&text, &[]);
        if let Ok((edited, record)) = insert_member(&text, &["a"], "k", &json!(1)) {
            prop_assert_eq!(remove_inserted(&edited, &record).unwrap(), text);
        }
    }
}
