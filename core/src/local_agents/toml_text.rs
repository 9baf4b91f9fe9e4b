//! Text-preserving edits to TOML configuration files, with an exact undo.
//!
//! Why this exists: Roundtable onboards Codex by adding an `[mcp_servers.NAME]` table and a
//! top-level `notify = [...]` key to `~/.codex/config.toml`, and offboarding must take out
//! exactly what onboarding put in. Even `toml_edit`'s format-preserving writer normalizes some
//! whitespace when a document is modified, so this module uses `toml_edit` only to validate a
//! file and to find byte spans, and makes every edit by splicing text: the user's bytes stay as
//! they were. Each edit returns a record ([`Appended`], [`TopLevelEdit`]) from which the undo
//! restores the original bytes when nothing else changed, and otherwise removes only our part.
//!
//! The promises:
//! - A file that does not parse (a duplicate key, an unterminated string, ...) is refused with
//!   its line and column and never rewritten; every edit is re-parsed before it is returned.
//! - What we add is "ours" while it still holds the values we wrote; if the user removed or
//!   edited it, undo leaves the text as it is (the caller can compare the text to notice).
//! - Pure: text in, text out, no file I/O.
//!
//! Layout: the public API and records; locating things by span; value comparison; tests.

use super::line_and_column;
use serde::{Deserialize, Serialize};
use toml_edit::{Document, DocumentMut, InlineTable, Item, Key, Table, TomlError, Value};

/// Why a TOML edit was refused. No variant comes with edited text: on error the caller keeps
/// the file as it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TomlTextError {
    #[error(
        "the file is not valid TOML at line {line}, column {column}: {message}. \
         Fix it by hand and try again; Roundtable does not rewrite a file it cannot read"
    )]
    Unparsable {
        line: usize,
        column: usize,
        message: String,
    },
    #[error("a table path needs at least one key")]
    EmptyTablePath,
    #[error(
        "`{path}` is {found}, not a table, so Roundtable cannot add its table under it. \
         Fix or remove it by hand and try again"
    )]
    NotATable { path: String, found: &'static str },
    #[error(
        "`{path}` is written as an inline table (`{{ ... }}`), which cannot be extended with a \
         [section]. Rewrite it as [{path}.NAME] sections, or add Roundtable's entry by hand"
    )]
    InlineTable { path: String },
    #[error("`{path}` is already in the file; remove it first if it should be replaced")]
    AlreadyPresent { path: String },
    #[error(
        "`{key}` at the top level is a table, not a value, so Roundtable cannot set it. \
         Fix or remove it by hand and try again"
    )]
    NotAValue { key: String },
    #[error("`{value}` is not a TOML value: {message}")]
    InvalidValue { value: String, message: String },
    #[error(
        "the undo record does not fit this edit ({reason}); remove Roundtable's entry from the \
         file by hand"
    )]
    InvalidRecord { reason: String },
    #[error(
        "the edited text failed its own check ({reason}), so the file was left unchanged. \
         This is a bug in Roundtable; please report it"
    )]
    EditCheckFailed { reason: String },
}

/// What [`append_table`] added. Serializable so the caller can keep it in a manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Appended {
    /// Keys of the table, e.g. `["mcp_servers", "roundtable"]`.
    path: Vec<String>,
    /// Line endings added before the header so that one blank line separates it.
    separator: String,
    /// The header line and the `key = value` lines exactly as written; undo reads the values
    /// back from it to recognise the table as ours.
    table_text: String,
}

/// What [`set_top_level`] changed. Serializable so the caller can keep it in a manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopLevelEdit {
    key: String,
    /// The value text we wrote; undo acts only while the key still holds this value.
    value_text: String,
    change: TopLevelChange,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum TopLevelChange {
    /// The key was there: its value text was replaced in place.
    Replaced { previous_value_text: String },
    /// The key was absent: `text_before`, `line` and `text_after` were inserted together.
    Inserted {
        text_before: String,
        line: String,
        text_after: String,
    },
}

/// Appends a table `[path]` (segments quoted where TOML needs it) holding `entries`, at the end
/// of the document after one blank line (none when the file is empty). Refuses when the table
/// is already there or a key on the path is not a table.
pub fn append_table(
    text: &str,
    path: &[&str],
    entries: &InlineTable,
) -> Result<(String, Appended), TomlTextError> {
    if path.is_empty() {
        return Err(TomlTextError::EmptyTablePath);
    }
    let document = parse(text)?;
    check_table_can_be_added(document.as_table(), path)?;

    let newline = detect_newline(text);
    let mut table_text = header_line(path);
    table_text.push_str(newline);
    for (key, value) in entries.iter() {
        let value = value.clone().decorated("", "");
        table_text.push_str(&format!(
            "{} = {value}{newline}",
            Key::new(key).display_repr()
        ));
    }
    let separator = separator_before_table(text, newline);
    let new_text = format!("{text}{separator}{table_text}");
    let appended = Appended {
        path: path.iter().map(|segment| (*segment).to_owned()).collect(),
        separator,
        table_text,
    };

    let recorded = parse_record(&appended.table_text)?;
    let new_document = parse(&new_text).map_err(edit_check_failed)?;
    let ours = table_in(recorded.as_table(), &appended.path);
    let written = table_in(new_document.as_table(), &appended.path);
    match (ours, written) {
        (Some(ours), Some(written)) if same_table(ours, written) => Ok((new_text, appended)),
        _ => Err(TomlTextError::EditCheckFailed {
            reason: "the appended table reads back differently".to_owned(),
        }),
    }
}

/// Takes out the table [`append_table`] added, with the blank line before it. Works on a file
/// changed elsewhere since; returns the text unchanged when the table is gone or was edited.
pub fn remove_appended(text: &str, appended: &Appended) -> Result<String, TomlTextError> {
    let recorded = parse_record(&appended.table_text)?;
    let Some(ours) = table_in(recorded.as_table(), &appended.path) else {
        return Err(TomlTextError::InvalidRecord {
            reason: "the recorded table text does not hold the recorded path".to_owned(),
        });
    };
    let document = parse(text)?;
    let Some(current) = table_in(document.as_table(), &appended.path) else {
        return Ok(text.to_owned());
    };
    let Some(header) = current.span() else {
        return Ok(text.to_owned());
    };
    if current.is_implicit() || current.is_dotted() || !same_table(current, ours) {
        return Ok(text.to_owned());
    }

    let start = line_start(text, header.start);
    let last = last_entry_end(current).map_or(header.end, |end| end.max(header.end));
    let end = line_end_including_newline(text, last);
    let (before, after) = (&text[..start], &text[end..]);
    let mut candidates = Vec::with_capacity(2);
    if let Some(trimmed) = before.strip_suffix(appended.separator.as_str()) {
        candidates.push(format!("{trimmed}{after}"));
    }
    candidates.push(format!("{before}{after}"));
    candidates
        .into_iter()
        .find(|candidate| Document::parse(candidate.as_str()).is_ok())
        .ok_or_else(|| TomlTextError::EditCheckFailed {
            reason: "removing the table would leave invalid TOML".to_owned(),
        })
}

/// Sets the top-level `key` to `value_toml` (TOML value text such as `["python3", "x.py"]`).
/// A present value is replaced in place; an absent key gets its own line after the last
/// top-level entry, or before the first table (and the comments just above it).
pub fn set_top_level(
    text: &str,
    key: &str,
    value_toml: &str,
) -> Result<(String, TopLevelEdit), TomlTextError> {
    let value_text = value_toml.trim();
    let new_value: Value =
        value_text
            .parse()
            .map_err(|error: TomlError| TomlTextError::InvalidValue {
                value: value_text.to_owned(),
                message: error.message().to_owned(),
            })?;
    let document = parse(text)?;
    let root = document.as_table();

    let (new_text, change) = match root.get(key) {
        Some(Item::Value(old)) => {
            let span = old.span().ok_or_else(|| TomlTextError::EditCheckFailed {
                reason: "the current value has no position".to_owned(),
            })?;
            let change = TopLevelChange::Replaced {
                previous_value_text: text[span.clone()].to_owned(),
            };
            (splice(text, span, value_text), change)
        }
        None | Some(Item::None) => {
            let line = format!("{} = {value_text}", Key::new(key).display_repr());
            let newline = detect_newline(text);
            let (at, text_before, text_after) = place_new_top_level_line(text, root, newline);
            let insertion = format!("{text_before}{line}{text_after}");
            let change = TopLevelChange::Inserted {
                text_before,
                line,
                text_after,
            };
            (splice(text, at..at, &insertion), change)
        }
        Some(_) => {
            return Err(TomlTextError::NotAValue {
                key: key.to_owned(),
            });
        }
    };

    let new_document = parse(&new_text).map_err(edit_check_failed)?;
    match new_document.as_table().get(key) {
        Some(Item::Value(written)) if same_value(written, &new_value) => {}
        _ => {
            return Err(TomlTextError::EditCheckFailed {
                reason: "the value reads back differently".to_owned(),
            });
        }
    }
    let edit = TopLevelEdit {
        key: key.to_owned(),
        value_text: value_text.to_owned(),
        change,
    };
    Ok((new_text, edit))
}

/// Undoes [`set_top_level`]: puts the previous value text back, or takes out the inserted line.
/// Returns the text unchanged when the key no longer holds the value we wrote.
pub fn revert_top_level(text: &str, edit: &TopLevelEdit) -> Result<String, TomlTextError> {
    let ours: Value =
        edit.value_text
            .parse()
            .map_err(|error: TomlError| TomlTextError::InvalidRecord {
                reason: format!("the recorded value does not parse: {}", error.message()),
            })?;
    let document = parse(text)?;
    let root = document.as_table();
    let Some(Item::Value(current)) = root.get(&edit.key) else {
        return Ok(text.to_owned());
    };
    let Some(value_span) = current.span() else {
        return Ok(text.to_owned());
    };
    if !same_value(current, &ours) {
        return Ok(text.to_owned());
    }

    let new_text = match &edit.change {
        TopLevelChange::Replaced {
            previous_value_text,
        } => splice(text, value_span, previous_value_text),
        TopLevelChange::Inserted {
            text_before,
            line,
            text_after,
        } => {
            let Some(key_span) = root.key(&edit.key).and_then(Key::span) else {
                return Ok(text.to_owned());
            };
            let inserted = format!("{text_before}{line}{text_after}");
            let exact = key_span
                .start
                .checked_sub(text_before.len())
                .map(|from| from..from + inserted.len())
                .filter(|range| text.get(range.clone()) == Some(inserted.as_str()));
            match exact {
                Some(range) => splice(text, range, ""),
                None => remove_key_value_line(text, key_span.start, value_span.end),
            }
        }
    };
    parse(&new_text).map_err(edit_check_failed)?;
    Ok(new_text)
}

/// The top-level value of `key`, or `None` when absent; an error when `key` names a table.
pub fn top_level_value(text: &str, key: &str) -> Result<Option<Value>, TomlTextError> {
    let document: DocumentMut = text.parse().map_err(|error| unparsable(text, &error))?;
    match document.get(key) {
        None | Some(Item::None) => Ok(None),
        Some(Item::Value(value)) => Ok(Some(value.clone().decorated("", ""))),
        Some(_) => Err(TomlTextError::NotAValue {
            key: key.to_owned(),
        }),
    }
}

/// The table at `path` (written as a section, with dotted keys or inline), or `None` when
/// absent or not a table. Lets the caller ask "is our table there?" before appending.
pub fn table_at(text: &str, path: &[&str]) -> Result<Option<Table>, TomlTextError> {
    let document: DocumentMut = text.parse().map_err(|error| unparsable(text, &error))?;
    let mut item = document.as_item();
    for segment in path {
        let Some(next) = item.get(segment) else {
            return Ok(None);
        };
        item = next;
    }
    Ok(item.clone().into_table().ok())
}

// ---------------------------------------------------------------------------------------------
// Locating things
// ---------------------------------------------------------------------------------------------

fn parse(text: &str) -> Result<Document<&str>, TomlTextError> {
    Document::parse(text).map_err(|error| unparsable(text, &error))
}

fn parse_record(table_text: &str) -> Result<Document<&str>, TomlTextError> {
    Document::parse(table_text).map_err(|error| TomlTextError::InvalidRecord {
        reason: format!(
            "the recorded table text does not parse: {}",
            error.message()
        ),
    })
}

fn unparsable(text: &str, error: &TomlError) -> TomlTextError {
    let (line, column) = line_and_column(text, error.span().map_or(0, |span| span.start));
    TomlTextError::Unparsable {
        line,
        column,
        message: error.message().to_owned(),
    }
}

fn edit_check_failed(error: TomlTextError) -> TomlTextError {
    TomlTextError::EditCheckFailed {
        reason: error.to_string(),
    }
}

fn check_table_can_be_added(root: &Table, path: &[&str]) -> Result<(), TomlTextError> {
    let mut table = root;
    for (depth, segment) in path.iter().enumerate() {
        let here = path[..=depth].join(".");
        let Some(item) = table.get(segment).filter(|item| !item.is_none()) else {
            return Ok(());
        };
        if depth + 1 == path.len() {
            return Err(TomlTextError::AlreadyPresent { path: here });
        }
        table = match item {
            Item::Table(inner) => inner,
            Item::Value(Value::InlineTable(_)) => {
                return Err(TomlTextError::InlineTable { path: here });
            }
            Item::Value(value) => {
                return Err(TomlTextError::NotATable {
                    path: here,
                    found: value_description(value),
                });
            }
            Item::ArrayOfTables(_) | Item::None => {
                return Err(TomlTextError::NotATable {
                    path: here,
                    found: "an array of tables",
                });
            }
        };
    }
    Ok(())
}

fn table_in<'d>(root: &'d Table, path: &[String]) -> Option<&'d Table> {
    let mut table = root;
    for segment in path {
        table = table.get(segment)?.as_table()?;
    }
    Some(table)
}

fn header_line(path: &[&str]) -> String {
    let keys: Vec<String> = path
        .iter()
        .map(|segment| Key::new(*segment).display_repr().into_owned())
        .collect();
    format!("[{}]", keys.join("."))
}

/// Line endings to add after `text` so that exactly one blank line (at least) comes before an
/// appended table; none for an empty file.
fn separator_before_table(text: &str, newline: &str) -> String {
    if text.is_empty() {
        return String::new();
    }
    let without_last_line_ending = text
        .strip_suffix("\r\n")
        .or_else(|| text.strip_suffix('\n'));
    match without_last_line_ending {
        Some(rest) if rest.is_empty() || rest.ends_with('\n') => String::new(),
        Some(_) => newline.to_owned(),
        None => format!("{newline}{newline}"),
    }
}

/// Where a new top-level `key = value` line goes, with what must come before and after it.
fn place_new_top_level_line(text: &str, root: &Table, newline: &str) -> (usize, String, String) {
    if let Some(last) = last_entry_end(root) {
        let at = line_end_including_newline(text, last);
        if at == text.len() && !text.ends_with('\n') {
            return (at, newline.to_owned(), String::new());
        }
        return (at, String::new(), newline.to_owned());
    }
    if let Some(header) = first_header_start(root) {
        let at = start_of_comments_above(text, line_start(text, header));
        return (at, String::new(), format!("{newline}{newline}"));
    }
    let text_before = if text.is_empty() || text.ends_with('\n') {
        String::new()
    } else {
        newline.to_owned()
    };
    (text.len(), text_before, newline.to_owned())
}

/// End of the last `key = value` written directly in `table` (dotted keys included, sections
/// below it not).
fn last_entry_end(table: &Table) -> Option<usize> {
    table
        .iter()
        .filter_map(|(_, item)| match item {
            Item::Value(value) => value.span().map(|span| span.end),
            Item::Table(inner) if inner.is_dotted() => last_entry_end(inner),
            _ => None,
        })
        .max()
}

/// Start of the first `[table]` or `[[array]]` header anywhere in the document.
fn first_header_start(table: &Table) -> Option<usize> {
    let header_of = |inner: &Table| {
        let own = (!inner.is_implicit() && !inner.is_dotted())
            .then(|| inner.span().map(|span| span.start))
            .flatten();
        own.into_iter().chain(first_header_start(inner)).min()
    };
    table
        .iter()
        .filter_map(|(_, item)| match item {
            Item::Table(inner) => header_of(inner),
            Item::ArrayOfTables(array) => array.iter().filter_map(header_of).min(),
            _ => None,
        })
        .min()
}

/// Moves up from a header over the `#` comment lines directly above it, which belong to it.
fn start_of_comments_above(text: &str, header_line_start: usize) -> usize {
    let mut start = header_line_start;
    while start > 0 {
        let previous_start = line_start(text, start - 1);
        if !text[previous_start..start].trim_start().starts_with('#') {
            break;
        }
        start = previous_start;
    }
    start
}

/// Removes a `key = value` whose exact inserted text was changed around: the whole line when
/// nothing else is on it, else just the key and value.
fn remove_key_value_line(text: &str, key_start: usize, value_end: usize) -> String {
    let start = line_start(text, key_start);
    let end = line_end_including_newline(text, value_end);
    if text[start..key_start].trim().is_empty() && text[value_end..end].trim().is_empty() {
        splice(text, start..end, "")
    } else {
        splice(text, key_start..value_end, "")
    }
}

fn splice(text: &str, range: std::ops::Range<usize>, replacement: &str) -> String {
    format!(
        "{}{replacement}{}",
        &text[..range.start],
        &text[range.end..]
    )
}

fn line_start(text: &str, position: usize) -> usize {
    text[..position].rfind('\n').map_or(0, |index| index + 1)
}

fn line_end_including_newline(text: &str, position: usize) -> usize {
    text[position..]
        .find('\n')
        .map_or(text.len(), |index| position + index + 1)
}

fn detect_newline(text: &str) -> &'static str {
    match text.find('\n') {
        Some(index) if index > 0 && text.as_bytes()[index - 1] == b'\r' => "\r\n",
        _ => "\n",
    }
}

// ---------------------------------------------------------------------------------------------
// Comparing values regardless of how they are written
// ---------------------------------------------------------------------------------------------

fn value_description(value: &Value) -> &'static str {
    match value {
        Value::String(_) => "a string",
        Value::Integer(_) => "an integer",
        Value::Float(_) => "a float",
        Value::Boolean(_) => "a boolean",
        Value::Datetime(_) => "a date-time",
        Value::Array(_) => "an array",
        Value::InlineTable(_) => "an inline table",
    }
}

fn same_value(left: &Value, right: &Value) -> bool {
    match (left, right) {
        (Value::String(a), Value::String(b)) => a.value() == b.value(),
        (Value::Integer(a), Value::Integer(b)) => a.value() == b.value(),
        (Value::Float(a), Value::Float(b)) => {
            a.value() == b.value() || (a.value().is_nan() && b.value().is_nan())
        }
        (Value::Boolean(a), Value::Boolean(b)) => a.value() == b.value(),
        (Value::Datetime(a), Value::Datetime(b)) => a.value() == b.value(),
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b.iter()).all(|(x, y)| same_value(x, y))
        }
        (Value::InlineTable(a), Value::InlineTable(b)) => {
            a.len() == b.len()
                && a.iter()
                    .all(|(key, x)| b.get(key).is_some_and(|y| same_value(x, y)))
        }
        _ => false,
    }
}

fn same_item(left: &Item, right: &Item) -> bool {
    match (left, right) {
        (Item::Value(a), Item::Value(b)) => same_value(a, b),
        (Item::Table(a), Item::Table(b)) => same_table(a, b),
        (Item::ArrayOfTables(a), Item::ArrayOfTables(b)) => {
            a.len() == b.len() && a.iter().zip(b.iter()).all(|(x, y)| same_table(x, y))
        }
        (Item::None, Item::None) => true,
        _ => false,
    }
}

fn same_table(left: &Table, right: &Table) -> bool {
    left.len() == right.len()
        && left
            .iter()
            .all(|(key, item)| right.get(key).is_some_and(|other| same_item(item, other)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use toml_edit::Array;

    fn roundtable_entries() -> InlineTable {
        let mut entries = InlineTable::new();
        entries.insert("command", "roundtable".into());
        entries.insert("args", Value::Array(Array::from_iter(["mcp", "--stdio"])));
        let mut env = InlineTable::new();
        env.insert("ROUNDTABLE_HOME", "/home/me/.roundtable".into());
        entries.insert("env", Value::InlineTable(env));
        entries.insert("startup_timeout_sec", Value::from(20));
        entries
    }

    const ROUNDTABLE_TABLE: &str = "[mcp_servers.roundtable]\ncommand = \"roundtable\"\nargs = [\"mcp\", \"--stdio\"]\nenv = { ROUNDTABLE_HOME = \"/home/me/.roundtable\" }\nstartup_timeout_sec = 20\n";

    const CODEX_CONFIG: &str = r#"# Codex configuration
model = "o3"
approval_policy = "on-request"
notify = ["python3", "/x/notify.py"]
tui.theme = "dark"   # dotted key
sandbox = { mode = "workspace-write", network = false }

# Servers I use
[mcp_servers.other]
command = "npx"
args = [
  "-y",
  "@other/mcp", # pinned below
]
env = { API_KEY = "k" }

[profiles.fast]
model = "o4-mini"
"#;

    fn document_of(text: &str) -> DocumentMut {
        text.parse().expect("test documents parse")
    }

    fn append_and_undo(original: &str, path: &[&str], entries: &InlineTable) -> String {
        let (edited, appended) =
            append_table(original, path, entries).expect("the append succeeds");
        assert!(
            edited.starts_with(original),
            "the original bytes changed:\n{edited}"
        );
        let written = table_at(&edited, path)
            .unwrap()
            .expect("the table is there");
        assert!(same_table(&written, &entries.clone().into_table()));
        let manifest = serde_json::to_string(&appended).unwrap();
        let appended: Appended = serde_json::from_str(&manifest).unwrap();
        assert_eq!(remove_appended(&edited, &appended).unwrap(), original);
        edited
    }

    fn set_and_undo(original: &str, key: &str, value_toml: &str) -> String {
        let (edited, edit) = set_top_level(original, key, value_toml).expect("the set succeeds");
        let expected: Value = value_toml.trim().parse().unwrap();
        let written = top_level_value(&edited, key)
            .unwrap()
            .expect("the key is there");
        assert!(same_value(&written, &expected));
        // Everything else means what it meant.
        let mut before = document_of(original);
        let mut after = document_of(&edited);
        before.remove(key);
        after.remove(key);
        assert!(
            same_table(before.as_table(), after.as_table()),
            "other content changed:\n{edited}"
        );
        let manifest = serde_json::to_string(&edit).unwrap();
        let edit: TopLevelEdit = serde_json::from_str(&manifest).unwrap();
        assert_eq!(revert_top_level(&edited, &edit).unwrap(), original);
        edited
    }

    #[test]
    fn appending_a_server_to_a_codex_config_keeps_every_byte_and_undoes_exactly() {
        let edited = append_and_undo(
            CODEX_CONFIG,
            &["mcp_servers", "roundtable"],
            &roundtable_entries(),
        );
        assert_eq!(edited, format!("{CODEX_CONFIG}\n{ROUNDTABLE_TABLE}"));
    }

    #[test]
    fn appending_separates_with_exactly_one_blank_line() {
        let cases: &[(&str, &str)] = &[
            ("", ""),
            ("model = \"o3\"", "\n\n"),
            ("model = \"o3\"\n", "\n"),
            ("model = \"o3\"\n\n", ""),
            ("model = \"o3\"\n\n\n", ""),
            ("# just a comment\n", "\n"),
        ];
        for (original, separator) in cases {
            let edited = append_and_undo(
                original,
                &["mcp_servers", "roundtable"],
                &roundtable_entries(),
            );
            assert_eq!(
                edited,
                format!("{original}{separator}{ROUNDTABLE_TABLE}"),
                "{original:?}"
            );
        }
    }

    #[test]
    fn appending_to_a_crlf_file_uses_crlf() {
        let original = "model = \"o3\"\r\n\r\n[a]\r\nb = 1\r\n";
        let edited = append_and_undo(
            original,
            &["mcp_servers", "roundtable"],
            &roundtable_entries(),
        );
        assert_eq!(
            edited,
            format!("{original}\r\n{}", ROUNDTABLE_TABLE.replace('\n', "\r\n"))
        );
    }

    #[test]
    fn header_keys_are_quoted_when_toml_needs_it() {
        let mut entries = InlineTable::new();
        entries.insert("a key", Value::from(true));
        let edited = append_and_undo("", &["mcp_servers", "round table.v2"], &entries);
        assert_eq!(
            edited,
            "[mcp_servers.\"round table.v2\"]\n\"a key\" = true\n"
        );
    }

    #[test]
    fn replacing_notify_changes_only_its_value_and_undoes_exactly() {
        let edited = set_and_undo(
            CODEX_CONFIG,
            "notify",
            r#"["roundtable", "notify", "--codex"]"#,
        );
        assert_eq!(
            edited,
            CODEX_CONFIG.replace(
                r#"notify = ["python3", "/x/notify.py"]"#,
                r#"notify = ["roundtable", "notify", "--codex"]"#
            )
        );
    }

    #[test]
    fn a_new_top_level_key_goes_after_the_last_top_level_entry() {
        let edited = set_and_undo(CODEX_CONFIG, "notify_roundtable", "[\"roundtable\"]");
        assert_eq!(
            edited,
            CODEX_CONFIG.replace(
                "network = false }\n",
                "network = false }\nnotify_roundtable = [\"roundtable\"]\n"
            )
        );
    }

    #[test]
    fn a_new_top_level_key_goes_above_the_first_table_and_its_comments() {
        let original = "# Codex\n\n# my servers\n# (two lines)\n[mcp_servers.x]\ncommand = \"x\"\n";
        let edited = set_and_undo(original, "notify", "[\"rt\"]");
        assert_eq!(
            edited,
            "# Codex\n\nnotify = [\"rt\"]\n\n# my servers\n# (two lines)\n[mcp_servers.x]\ncommand = \"x\"\n"
        );
    }

    #[test]
    fn a_new_top_level_key_in_an_empty_or_comment_only_file() {
        assert_eq!(
            set_and_undo("", "notify", "[\"rt\"]"),
            "notify = [\"rt\"]\n"
        );
        assert_eq!(
            set_and_undo("# hi", "notify", "[\"rt\"]"),
            "# hi\nnotify = [\"rt\"]\n"
        );
        assert_eq!(
            set_and_undo("model = 1", "notify", "[\"rt\"]"),
            "model = 1\nnotify = [\"rt\"]"
        );
        assert_eq!(
            set_and_undo("a = 1\r\n[t]\r\n", "notify", " [\"rt\"] "),
            "a = 1\r\nnotify = [\"rt\"]\r\n[t]\r\n"
        );
    }

    #[test]
    fn malformed_files_are_refused_with_their_position() {
        let cases: &[(&str, usize, usize)] = &[
            ("model = \"o3\"\nmodel = \"o4\"\n", 2, 1),
            ("name = \"unterminated\n", 1, 21),
            ("[mcp_servers.x]\ncommand = \"x\"\n[mcp_servers.x]\n", 3, 14),
            ("a = 1 garbage\n", 1, 5),
        ];
        for (text, line, column) in cases {
            let check = |error: TomlTextError| match error {
                TomlTextError::Unparsable {
                    line: l, column: c, ..
                } => {
                    assert_eq!((l, c), (*line, *column), "{text:?}")
                }
                other => panic!("{text:?}: unexpected error {other}"),
            };
            check(append_table(text, &["mcp_servers", "rt"], &roundtable_entries()).unwrap_err());
            check(set_top_level(text, "notify", "[]").unwrap_err());
            check(top_level_value(text, "notify").unwrap_err());
        }
    }

    #[test]
    fn tables_that_cannot_take_ours_are_refused() {
        let entries = roundtable_entries();
        let path = ["mcp_servers", "roundtable"];
        assert_eq!(
            append_table(
                "mcp_servers = { other = { command = \"x\" } }\n",
                &path,
                &entries
            )
            .unwrap_err(),
            TomlTextError::InlineTable {
                path: "mcp_servers".to_owned()
            }
        );
        assert_eq!(
            append_table("mcp_servers = 3\n", &path, &entries).unwrap_err(),
            TomlTextError::NotATable {
                path: "mcp_servers".to_owned(),
                found: "an integer"
            }
        );
        assert_eq!(
            append_table("[mcp_servers.roundtable]\n", &path, &entries).unwrap_err(),
            TomlTextError::AlreadyPresent {
                path: "mcp_servers.roundtable".to_owned()
            }
        );
        assert_eq!(
            append_table("mcp_servers.roundtable.command = \"x\"\n", &path, &entries).unwrap_err(),
            TomlTextError::AlreadyPresent {
                path: "mcp_servers.roundtable".to_owned()
            }
        );
        assert_eq!(
            append_table("", &[], &entries).unwrap_err(),
            TomlTextError::EmptyTablePath
        );
        assert_eq!(
            set_top_level(CODEX_CONFIG, "tui", "1").unwrap_err(),
            TomlTextError::NotAValue {
                key: "tui".to_owned()
            }
        );
        assert!(matches!(
            set_top_level(CODEX_CONFIG, "notify", "[\"unterminated]"),
            Err(TomlTextError::InvalidValue { .. })
        ));
    }

    #[test]
    fn a_table_under_one_made_of_dotted_keys_is_allowed() {
        let original = "mcp_servers.other.command = \"x\"\n";
        append_and_undo(
            original,
            &["mcp_servers", "roundtable"],
            &roundtable_entries(),
        );
    }

    #[test]
    fn undo_keeps_what_the_user_added_after_our_table() {
        let path = ["mcp_servers", "roundtable"];
        let (ours, appended) = append_table(CODEX_CONFIG, &path, &roundtable_entries()).unwrap();
        let theirs = format!("{ours}\n# added later\n[mcp_servers.theirs]\ncommand = \"t\"\n");
        let restored = remove_appended(&theirs, &appended).unwrap();
        assert_eq!(
            restored,
            format!("{CODEX_CONFIG}\n# added later\n[mcp_servers.theirs]\ncommand = \"t\"\n")
        );

        // Right after our last line, without a blank line, in a file that had no final newline.
        let original = "model = \"o3\"";
        let (ours, appended) = append_table(original, &path, &roundtable_entries()).unwrap();
        let theirs = format!("{ours}[x]\n");
        let restored = remove_appended(&theirs, &appended).unwrap();
        assert!(document_of(&restored).get("x").is_some());
        assert!(table_at(&restored, &path).unwrap().is_none());
    }

    #[test]
    fn undo_keeps_the_users_edits_elsewhere() {
        let path = ["mcp_servers", "roundtable"];
        let (ours, appended) = append_table(CODEX_CONFIG, &path, &roundtable_entries()).unwrap();
        let (ours, set) = set_top_level(&ours, "notify", "[\"roundtable\"]").unwrap();
        let changed = ours.replace("model = \"o3\"", "model = \"o3-pro\" # upgraded");
        let restored = remove_appended(&changed, &appended).unwrap();
        let restored = revert_top_level(&restored, &set).unwrap();
        assert_eq!(
            restored,
            CODEX_CONFIG.replace("model = \"o3\"", "model = \"o3-pro\" # upgraded")
        );
    }

    #[test]
    fn undo_leaves_what_the_user_edited_or_removed() {
        let path = ["mcp_servers", "roundtable"];
        let (ours, appended) = append_table(CODEX_CONFIG, &path, &roundtable_entries()).unwrap();
        let edited = ours.replace("startup_timeout_sec = 20", "startup_timeout_sec = 60");
        assert_eq!(remove_appended(&edited, &appended).unwrap(), edited);
        assert_eq!(
            remove_appended(CODEX_CONFIG, &appended).unwrap(),
            CODEX_CONFIG
        );

        let (ours, set) = set_top_level(CODEX_CONFIG, "notify", "[\"roundtable\"]").unwrap();
        let edited = ours.replace("[\"roundtable\"]", "[\"mine\"]");
        assert_eq!(revert_top_level(&edited, &set).unwrap(), edited);
        let reformatted = ours.replace("[\"roundtable\"]", "[ 'roundtable' ]");
        assert_eq!(revert_top_level(&reformatted, &set).unwrap(), CODEX_CONFIG);
    }

    #[test]
    fn undo_of_an_inserted_line_the_user_moved_removes_that_line_only() {
        let (ours, set) = set_top_level("a = 1\nb = 2\n", "notify", "[\"rt\"]").unwrap();
        assert_eq!(ours, "a = 1\nb = 2\nnotify = [\"rt\"]\n");
        let moved = "notify = [\"rt\"]\na = 1\nb = 2\n";
        assert_eq!(revert_top_level(moved, &set).unwrap(), "a = 1\nb = 2\n");
        let commented = "a = 1\nb = 2\nnotify = [\"rt\"] # mine now\n";
        assert_eq!(
            revert_top_level(commented, &set).unwrap(),
            "a = 1\nb = 2\n # mine now\n"
        );
    }

    #[test]
    fn top_level_value_reads_values_and_refuses_tables() {
        let notify = top_level_value(CODEX_CONFIG, "notify").unwrap().unwrap();
        assert_eq!(notify.to_string(), r#"["python3", "/x/notify.py"]"#);
        assert!(top_level_value(CODEX_CONFIG, "missing").unwrap().is_none());
        assert!(top_level_value(CODEX_CONFIG, "profiles").is_err());
        assert!(
            table_at(CODEX_CONFIG, &["mcp_servers", "other"])
                .unwrap()
                .is_some()
        );
        assert!(table_at(CODEX_CONFIG, &["sandbox"]).unwrap().is_some());
        assert!(
            table_at(CODEX_CONFIG, &["mcp_servers", "nope"])
                .unwrap()
                .is_none()
        );
        assert!(table_at(CODEX_CONFIG, &["model", "x"]).unwrap().is_none());
    }

    #[test]
    fn errors_tell_the_user_what_to_do() {
        let error = set_top_level("a = 1\na = 2\n", "notify", "[]").unwrap_err();
        assert_eq!(
            error.to_string(),
            "the file is not valid TOML at line 2, column 1: duplicate key. \
             Fix it by hand and try again; Roundtable does not rewrite a file it cannot read"
        );
    }

    // -----------------------------------------------------------------------------------------
    // Property tests: generated configs in generated styles
    // -----------------------------------------------------------------------------------------

    fn toml_value_text() -> impl Strategy<Value = String> {
        let leaf = prop_oneof![
            any::<i32>().prop_map(|n| n.to_string()),
            "[a-z \"\\\\\n\té😀]{0,6}".prop_map(|s| Value::from(s).to_string()),
            "[a-z .]{0,6}".prop_map(|s| format!("'{s}'")),
            any::<bool>().prop_map(|b| b.to_string()),
            Just("1.5e3".to_owned()),
            Just("1979-05-27T07:32:00Z".to_owned()),
            Just("\"\"\"\nmulti\nline\"\"\"".to_owned()),
        ];
        leaf.prop_recursive(2, 8, 3, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..3)
                    .prop_map(|items| format!("[{}]", items.join(", "))),
                prop::collection::vec(inner.clone(), 1..3)
                    .prop_map(|items| format!("[\n  {},\n]", items.join(",\n  "))),
                prop::collection::btree_map("[a-c]", inner, 0..3).prop_map(|members| {
                    let members: Vec<String> = members
                        .into_iter()
                        .map(|(k, v)| format!("{k} = {v}"))
                        .collect();
                    format!("{{ {} }}", members.join(", ")).replace('\n', " ")
                }),
            ]
        })
        .prop_filter("a TOML value", |text| text.parse::<Value>().is_ok())
    }

    fn toml_key() -> impl Strategy<Value = String> {
        prop::sample::select(vec![
            "model",
            "notify",
            "approval_policy",
            "x-y",
            "\"quoted key\"",
            "n1",
        ])
        .prop_map(str::to_owned)
    }

    /// How a generated config is written out.
    #[derive(Debug, Clone)]
    struct TomlStyle {
        newline: &'static str,
        equals: &'static str,
        /// Used in turn after each line: nothing, a trailing comment, a comment line, a blank line.
        decorations: Vec<&'static str>,
        final_newline: bool,
    }

    fn toml_style() -> impl Strategy<Value = TomlStyle> {
        (
            prop::sample::select(vec!["\n", "\r\n"]),
            prop::sample::select(vec![" = ", "=", "  =\t"]),
            prop::collection::vec(
                prop::sample::select(vec![
                    "",
                    "",
                    "",
                    " # trailing",
                    "\n# a comment line",
                    "\n",
                    "\n\n",
                ]),
                0..6,
            ),
            any::<bool>(),
        )
            .prop_map(|(newline, equals, decorations, final_newline)| TomlStyle {
                newline,
                equals,
                decorations,
                final_newline,
            })
    }

    type Entries = Vec<(String, String)>;

    fn unique_entries() -> impl Strategy<Value = Entries> {
        prop::collection::btree_map(toml_key(), toml_value_text(), 0..4)
            .prop_map(|map| map.into_iter().collect())
    }

    fn table_headers() -> impl Strategy<Value = Vec<(String, Entries)>> {
        let header = (
            prop::sample::select(vec!["mcp_servers", "profiles", "'lit.key'"]),
            prop::option::of(prop::sample::select(vec![
                "a",
                "b-c",
                "\"d e\"",
                "roundtable",
            ])),
        )
            .prop_map(|(first, second)| match second {
                Some(second) => format!("{first}.{second}"),
                None => first.to_owned(),
            });
        prop::collection::btree_map(header, unique_entries(), 0..4)
            .prop_map(|map| map.into_iter().collect())
    }

    fn write_toml(root: &Entries, tables: &[(String, Entries)], style: &TomlStyle) -> String {
        let mut out = String::new();
        let mut decoration = style.decorations.iter().cycle();
        let mut line = |out: &mut String, text: &str| {
            out.push_str(text);
            if let Some(extra) = decoration.next() {
                out.push_str(&extra.replace('\n', style.newline));
            }
            out.push_str(style.newline);
        };
        for (key, value) in root {
            line(
                &mut out,
                &format!("{key}{}{value}", style.equals).replace('\n', style.newline),
            );
        }
        for (header, entries) in tables {
            line(&mut out, &format!("[{header}]"));
            for (key, value) in entries {
                line(
                    &mut out,
                    &format!("{key}{}{value}", style.equals).replace('\n', style.newline),
                );
            }
        }
        if !style.final_newline {
            while out.ends_with('\n') {
                out.pop();
                if out.ends_with('\r') {
                    out.pop();
                }
            }
        }
        out
    }

    fn toml_document() -> impl Strategy<Value = String> {
        (unique_entries(), table_headers(), toml_style())
            .prop_map(|(root, tables, style)| write_toml(&root, &tables, &style))
            .prop_filter("valid TOML", |text| Document::parse(text.as_str()).is_ok())
    }

    fn toml_entries() -> impl Strategy<Value = InlineTable> {
        prop::collection::btree_map("[a-z_]{1,8}|\"[a-z ]{1,4}\"", toml_value_text(), 0..4)
            .prop_map(|map| {
                let mut entries = InlineTable::new();
                for (key, value) in map {
                    let key = key.trim_matches('"').to_owned();
                    if let Ok(value) = value.parse::<Value>() {
                        entries.insert(&key, value);
                    }
                }
                entries
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn appending_a_table_then_undoing_restores_the_bytes(
            text in toml_document(),
            name in prop::sample::select(vec!["roundtable", "a", "new one"]),
            entries in toml_entries(),
        ) {
            let path = ["mcp_servers", name];
            if table_at(&text, &path).unwrap().is_some() {
                let refused = matches!(append_table(&text, &path, &entries), Err(TomlTextError::AlreadyPresent { .. }));
                prop_assert!(refused);
            } else {
                append_and_undo(&text, &path, &entries);
            }
        }

        #[test]
        fn setting_a_top_level_key_then_undoing_restores_the_bytes(
            text in toml_document(),
            key in prop::sample::select(vec!["model", "notify", "x-y", "quoted key", "brand_new", "mcp_servers"]),
            value in toml_value_text(),
        ) {
            match document_of(&text).get(key) {
                Some(item) if !item.is_value() => {
                    let refused = matches!(set_top_level(&text, key, &value), Err(TomlTextError::NotAValue { .. }));
                    prop_assert!(refused);
                }
                _ => {
                    set_and_undo(&text, key, &value);
                }
            }
        }

        #[test]
        fn two_edits_undone_in_reverse_order_restore_the_bytes(
            text in toml_document(),
            key in prop::sample::select(vec!["model", "notify", "brand_new"]),
            value in toml_value_text(),
            entries in toml_entries(),
            table_first in any::<bool>(),
        ) {
            let path = ["mcp_servers", "rt-new"];
            if table_first {
                let (once, appended) = append_table(&text, &path, &entries).unwrap();
                let (twice, set) = set_top_level(&once, key, &value).unwrap();
                let undone = revert_top_level(&twice, &set).unwrap();
                prop_assert_eq!(&undone, &once);
                prop_assert_eq!(remove_appended(&undone, &appended).unwrap(), text);
            } else {
                let (once, set) = set_top_level(&text, key, &value).unwrap();
                let (twice, appended) = append_table(&once, &path, &entries).unwrap();
                let undone = remove_appended(&twice, &appended).unwrap();
                prop_assert_eq!(&undone, &once);
                prop_assert_eq!(revert_top_level(&undone, &set).unwrap(), text);
            }
        }

        #[test]
        fn two_edits_undone_in_the_order_made_restore_the_meaning(
            text in toml_document(),
            key in prop::sample::select(vec!["model", "notify", "brand_new"]),
            value in toml_value_text(),
            entries in toml_entries(),
        ) {
            let path = ["mcp_servers", "rt-new"];
            let (once, appended) = append_table(&text, &path, &entries).unwrap();
            let (twice, set) = set_top_level(&once, key, &value).unwrap();
            let without_table = remove_appended(&twice, &appended).unwrap();
            prop_assert!(table_at(&without_table, &path).unwrap().is_none());
            let restored = revert_top_level(&without_table, &set).unwrap();
            prop_assert!(same_table(document_of(&restored).as_table(), document_of(&text).as_table()));
        }
    }
}
