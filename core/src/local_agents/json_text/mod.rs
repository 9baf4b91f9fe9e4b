//! Text-preserving edits to JSON configuration files, with an exact undo.
//!
//! Why this exists: Roundtable onboards local agent CLIs by adding an MCP server entry and hook
//! entries to *their* configuration files (`~/.claude.json`, `~/.claude/settings.json`, a
//! project's `.mcp.json`, `~/.gemini/settings.json`), and offboarding must take out exactly what
//! onboarding put in. Reading such a file into a `serde_json::Value` and writing it back would
//! reorder keys, drop comments and reformat the user's file, so this module never re-serializes a
//! document. It parses the text into a tree of byte spans, inserts new text at chosen offsets in
//! the file's own style (indentation, colon spacing, line endings), and returns an [`Inserted`]
//! record from which [`remove_inserted`] takes the insertion out again.
//!
//! The promises:
//! - Bytes outside the insertion points are never touched; insert then undo on an unchanged file
//!   gives back the original bytes, also for an empty file.
//! - A file that does not parse is refused with its line and column; it is never rewritten.
//! - `//` and `/* */` comments are read as whitespace wherever whitespace may stand and are kept
//!   byte for byte (Gemini CLI accepts them; a strict JSON file simply has none). Trailing commas
//!   are refused, as `JSON.parse` refuses them.
//! - Undo on a file the user changed elsewhere removes only our entry and one separating comma.
//!   An entry is "ours" while its value still equals what we inserted; if the user removed or
//!   edited it, undo leaves the text as it is (the caller can compare the text to notice).
//! - Pure: text in, text out, no file I/O.
//!
//! Layout: the public API and undo record here; adding entries (`adding.rs`); edit planning and
//! application (`planning.rs`); style detection and rendering (`style.rs`); the parser, a tree
//! of byte spans (`parse.rs`); tests.
//!
//! Why our own parser rather than a maintained one (`jsonc-parser` 0.34, weighed in December
//! 2026): the parser here is some 250 of these lines and yields exactly the spans the edits
//! need — where the whitespace before an entry starts (after any comment), each separating
//! comma, the run before a closing bracket. `jsonc-parser`'s AST gives value ranges only, so
//! those spans would be recovered from its token stream by a pass about as long; its scanner
//! accepts JSON5 by default (single quotes, hex and `+` numbers, `.5`, `Infinity`, loose keys,
//! trailing commas: eight options to turn off to refuse what `JSON.parse` refuses); it descends
//! recursively with no depth option, so the nesting limit would still need a scan of ours; and
//! its error messages would replace the line-and-column ones the golden table checks. Less of
//! our code would not result, and one more dependency would.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::line_and_column;

mod adding;
mod parse;
mod planning;
mod style;
#[cfg(test)]
mod tests;

use adding::*;
use parse::*;
use planning::*;
use style::*;

/// Deeper nesting is refused rather than risking the stack on a hostile file.
const MAX_NESTING: usize = 256;

/// Why a JSON edit was refused. No variant comes with edited text: on error the caller keeps the
/// file as it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JsonTextError {
    #[error(
        "the file is not valid JSON at line {line}, column {column}: {message}. \
         Fix it by hand and try again; Roundtable does not rewrite a file it cannot read"
    )]
    Unparsable {
        line: usize,
        column: usize,
        message: String,
    },
    #[error(
        "{path} is {found}, not an object, so Roundtable cannot add its entry inside it. \
         Fix or remove it by hand and try again"
    )]
    NotAnObject { path: String, found: &'static str },
    #[error(
        "{path} is {found}, not an array, so Roundtable cannot add its entry to it. \
         Fix or remove it by hand and try again"
    )]
    NotAnArray { path: String, found: &'static str },
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

/// What one insertion added, with enough detail to take it out again. Serializable so the caller
/// can keep it in a manifest between onboarding and offboarding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Inserted {
    /// Keys from the root to the object or array that holds the added entry.
    container_path: Vec<String>,
    /// How many leading keys of `container_path` named objects that existed before the edit.
    /// Deeper containers were created by the edit and are removed with it when left empty.
    existing_depth: usize,
    /// The added entry: an object member (found again by its key) or an array element.
    entry: AddedEntry,
    /// The value we wrote. Undo only removes an entry whose value still equals it.
    value: Value,
    /// When the edit replaced an existing member, the exact text of the value it had before.
    replaced_value_text: Option<String>,
    /// When the object or array we added to was empty, its inner text before and after, so
    /// undo can restore that inner text byte for byte.
    empty_container: Option<EmptyContainer>,
    /// When the file held no JSON value (empty, whitespace or comments only), the edit created
    /// the top-level value; this remembers how to give back the file as it was.
    created_root: Option<CreatedRoot>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum AddedEntry {
    Member { key: String },
    Element,
}

/// The text between the brackets of a container that was empty, before and after the edit.
/// Undo puts `inner_before` back while the inner text is still exactly `inner_after`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct EmptyContainer {
    inner_before: String,
    inner_after: String,
}

/// How a file without a JSON value got one: undo returns `document_before` while the text around
/// the top-level value is still exactly what the edit put there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct CreatedRoot {
    document_before: String,
    text_before_root: String,
    text_after_root: String,
}

/// Inserts member `key` with `value` into the object at `path` (keys from the root), creating
/// missing objects along the path; an empty file counts as `{}`. If `key` is already there its
/// value is replaced (the record keeps the old value text, so undo puts it back). The value is
/// rendered in the file's own style.
pub fn insert_member(
    text: &str,
    path: &[&str],
    key: &str,
    value: &Value,
) -> Result<(String, Inserted), JsonTextError> {
    add_entry(text, path, NewEntry::Member(key), value)
}

/// Appends `value` to the array at `path` (e.g. `["hooks", "Stop"]` in Claude Code's
/// settings.json), creating the array and missing objects along the path.
pub fn append_element(
    text: &str,
    path: &[&str],
    value: &Value,
) -> Result<(String, Inserted), JsonTextError> {
    add_entry(text, path, NewEntry::Element, value)
}

/// Takes out what [`insert_member`] or [`append_element`] added. Works on a file changed
/// elsewhere since (the other changes are kept). Returns the text unchanged when our entry is no
/// longer there or no longer holds the value we wrote.
pub fn remove_inserted(text: &str, inserted: &Inserted) -> Result<String, JsonTextError> {
    inserted.check_consistency()?;
    let tree = SyntaxTree::parse(text)?;
    let Some(root) = &tree.root else {
        return Ok(text.to_owned());
    };

    // `chain[depth]` is the container at `container_path[..depth]`.
    let mut chain: Vec<&Node> = vec![root];
    for segment in &inserted.container_path {
        let Some(object) = chain.last().and_then(|node| node.as_object()) else {
            return Ok(text.to_owned());
        };
        let Some(index) = object.last_member(segment) else {
            return Ok(text.to_owned());
        };
        chain.push(&object.entries[index].value);
    }
    let mut depth = inserted.container_path.len();
    let holder = chain[depth];
    let Some(index) = find_our_entry(text, holder, &inserted.entry, &inserted.value) else {
        return Ok(text.to_owned());
    };

    if let Some(previous) = &inserted.replaced_value_text {
        let Some(container) = holder.container() else {
            return Ok(text.to_owned());
        };
        let value_node = &container.entries[index].value;
        let edits = vec![Edit::replace(
            value_node.start..value_node.end,
            previous.clone(),
        )];
        return checked_removal(apply_edits(text, &edits));
    }

    // Climb while the entry to remove is the only content of a container we created: then the
    // container goes too, as the member that holds it in its parent.
    let mut index = index;
    loop {
        let node = chain[depth];
        let created =
            depth > inserted.existing_depth || (depth == 0 && inserted.created_root.is_some());
        if !created || !is_sole_content(text, node, index) {
            break;
        }
        if depth == 0 {
            return checked_removal(remove_created_root(text, root, inserted));
        }
        depth -= 1;
        let Some(index_in_parent) = chain[depth]
            .as_object()
            .and_then(|object| object.last_member(&inserted.container_path[depth]))
        else {
            return Ok(text.to_owned());
        };
        index = index_in_parent;
    }

    let node = chain[depth];
    let Some(container) = node.container() else {
        return Ok(text.to_owned());
    };
    let inner = node.start + 1..node.end - 1;
    let restores_empty_container = depth == inserted.existing_depth
        && container.entries.len() == 1
        && inserted
            .empty_container
            .as_ref()
            .is_some_and(|empty| text[inner.clone()] == empty.inner_after);
    let edits = match (&inserted.empty_container, restores_empty_container) {
        (Some(empty), true) => vec![Edit::replace(inner, empty.inner_before.clone())],
        _ => removal_edits(text, container, index),
    };
    checked_removal(apply_edits(text, &edits))
}

/// The value at `path`, or `None` when some key on the path is missing or names a non-object.
/// Lets the caller ask "is our entry there?" before inserting.
pub fn value_at(text: &str, path: &[&str]) -> Result<Option<Value>, JsonTextError> {
    let tree = SyntaxTree::parse(text)?;
    let Some(mut node) = tree.root.as_ref() else {
        return Ok(None);
    };
    for segment in path {
        let Some(object) = node.as_object() else {
            return Ok(None);
        };
        let Some(index) = object.last_member(segment) else {
            return Ok(None);
        };
        node = &object.entries[index].value;
    }
    node_value(text, node).map(Some)
}

impl Inserted {
    /// A record read back from a manifest may have been edited by hand; refuse one that could
    /// not have come from an edit instead of indexing out of bounds.
    fn check_consistency(&self) -> Result<(), JsonTextError> {
        if self.existing_depth > self.container_path.len() {
            return Err(JsonTextError::InvalidRecord {
                reason: "existing_depth is deeper than container_path".to_owned(),
            });
        }
        if self.created_root.is_some() && self.existing_depth != 0 {
            return Err(JsonTextError::InvalidRecord {
                reason: "a created root cannot have existing containers".to_owned(),
            });
        }
        Ok(())
    }
}
