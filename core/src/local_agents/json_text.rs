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
//! Layout: the public API and undo record; the parser (a tree of byte spans); style detection and
//! rendering; edit planning and application; tests.
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

// ---------------------------------------------------------------------------------------------
// Adding entries
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy)]
enum NewEntry<'k> {
    Member(&'k str),
    Element,
}

impl NewEntry<'_> {
    fn record(self) -> AddedEntry {
        match self {
            NewEntry::Member(key) => AddedEntry::Member {
                key: key.to_owned(),
            },
            NewEntry::Element => AddedEntry::Element,
        }
    }
}

fn add_entry(
    text: &str,
    path: &[&str],
    new_entry: NewEntry<'_>,
    value: &Value,
) -> Result<(String, Inserted), JsonTextError> {
    let tree = SyntaxTree::parse(text)?;
    let style = DocumentStyle::detect(text, tree.root.as_ref());
    let Some(root) = &tree.root else {
        return add_to_empty_document(text, path, new_entry, value, &style);
    };

    // Walk down the objects that exist; `site` is the deepest one on the path.
    let mut site = root;
    let mut existing_depth = 0;
    for segment in path {
        let object = site
            .as_object()
            .ok_or_else(|| not_an_object(&path[..existing_depth], site))?;
        match object.last_member(segment) {
            Some(index) => {
                site = &object.entries[index].value;
                existing_depth += 1;
            }
            None => break,
        }
    }

    let mut replaced_value_text = None;
    let plan = if existing_depth < path.len() {
        // `site` is an object (the walk stopped inside it); create the rest of the path.
        let object = site
            .as_object()
            .ok_or_else(|| not_an_object(&path[..existing_depth], site))?;
        let created = wrap_in_path(&path[existing_depth + 1..], new_entry, value);
        plan_append(
            text,
            &style,
            site,
            object,
            Some(path[existing_depth]),
            &created,
        )
    } else {
        match new_entry {
            NewEntry::Member(key) => {
                let object = site.as_object().ok_or_else(|| not_an_object(path, site))?;
                match object.last_member(key) {
                    Some(index) => {
                        let old = &object.entries[index].value;
                        replaced_value_text = Some(text[old.start..old.end].to_owned());
                        plan_replace(text, &style, site, object, index, value)
                    }
                    None => plan_append(text, &style, site, object, Some(key), value),
                }
            }
            NewEntry::Element => {
                let array = site.as_array().ok_or_else(|| not_an_array(path, site))?;
                plan_append(text, &style, site, array, None, value)
            }
        }
    };

    let new_text = apply_edits(text, &plan.edits);
    let inserted = Inserted {
        container_path: path.iter().map(|segment| (*segment).to_owned()).collect(),
        existing_depth,
        entry: new_entry.record(),
        value: value.clone(),
        replaced_value_text,
        empty_container: plan.empty_container,
        created_root: None,
    };
    check_added(&new_text, &inserted)?;
    Ok((new_text, inserted))
}

/// An empty file (or one holding only whitespace and comments) gets a new top-level value after
/// its comments; undo gives the file back as it was.
fn add_to_empty_document(
    text: &str,
    path: &[&str],
    new_entry: NewEntry<'_>,
    value: &Value,
    style: &DocumentStyle,
) -> Result<(String, Inserted), JsonTextError> {
    let root_value = wrap_in_path(path, new_entry, value);
    let kept = text.trim_end_matches(is_json_whitespace_char);
    let text_before_root = if kept.is_empty() || kept == "\u{feff}" {
        kept.to_owned()
    } else {
        format!("{kept}{}", style.newline)
    };
    let mut rendered = String::new();
    render_value(
        &mut rendered,
        &root_value,
        style,
        &style.colon,
        Placement::Lines { indent: "" },
    );
    let text_after_root = style.newline.to_owned();
    let new_text = format!("{text_before_root}{rendered}{text_after_root}");
    let inserted = Inserted {
        container_path: path.iter().map(|segment| (*segment).to_owned()).collect(),
        existing_depth: 0,
        entry: new_entry.record(),
        value: value.clone(),
        replaced_value_text: None,
        empty_container: None,
        created_root: Some(CreatedRoot {
            document_before: text.to_owned(),
            text_before_root,
            text_after_root,
        }),
    };
    check_added(&new_text, &inserted)?;
    Ok((new_text, inserted))
}

/// Builds the value to insert at the first missing key: `{"b": {"c": <innermost>}}` for the
/// remaining keys `["b", "c"]`, where the innermost is `{key: value}` or `[value]`.
fn wrap_in_path(remaining: &[&str], new_entry: NewEntry<'_>, value: &Value) -> Value {
    let mut wrapped = match new_entry {
        NewEntry::Member(key) => {
            let mut object = Map::new();
            object.insert(key.to_owned(), value.clone());
            Value::Object(object)
        }
        NewEntry::Element => Value::Array(vec![value.clone()]),
    };
    for segment in remaining.iter().rev() {
        let mut object = Map::new();
        object.insert((*segment).to_owned(), wrapped);
        wrapped = Value::Object(object);
    }
    wrapped
}

/// Re-reads the edited text and checks that the entry is where the record says, so a bug here
/// can never hand the caller a broken file.
fn check_added(new_text: &str, inserted: &Inserted) -> Result<(), JsonTextError> {
    let failed = |reason: &str| JsonTextError::EditCheckFailed {
        reason: reason.to_owned(),
    };
    let tree = SyntaxTree::parse(new_text).map_err(|error| failed(&error.to_string()))?;
    let mut node = tree
        .root
        .as_ref()
        .ok_or_else(|| failed("no value after the edit"))?;
    for segment in &inserted.container_path {
        let object = node
            .as_object()
            .ok_or_else(|| failed("path is not an object"))?;
        let index = object
            .last_member(segment)
            .ok_or_else(|| failed("path is missing after the edit"))?;
        node = &object.entries[index].value;
    }
    let container = node
        .container()
        .ok_or_else(|| failed("no container after the edit"))?;
    let found = match &inserted.entry {
        AddedEntry::Member { key } => container
            .last_member(key)
            .map(|index| &container.entries[index].value),
        AddedEntry::Element => container.entries.last().map(|entry| &entry.value),
    }
    .ok_or_else(|| failed("the new entry is missing"))?;
    if !node_value(new_text, found).is_ok_and(|read| same_json(&read, &inserted.value)) {
        return Err(failed("the new entry reads back differently"));
    }
    Ok(())
}

fn checked_removal(new_text: String) -> Result<String, JsonTextError> {
    SyntaxTree::parse(&new_text).map_err(|error| JsonTextError::EditCheckFailed {
        reason: error.to_string(),
    })?;
    Ok(new_text)
}

/// Index of our entry in `holder`: the member with our key, or the last element equal to our
/// value; `None` when it is gone or no longer holds our value.
fn find_our_entry(text: &str, holder: &Node, entry: &AddedEntry, value: &Value) -> Option<usize> {
    let holds_our_value =
        |node: &Node| node_value(text, node).is_ok_and(|found| same_json(&found, value));
    match entry {
        AddedEntry::Member { key } => {
            let object = holder.as_object()?;
            let index = object.last_member(key)?;
            holds_our_value(&object.entries[index].value).then_some(index)
        }
        AddedEntry::Element => holder
            .as_array()?
            .entries
            .iter()
            .rposition(|element| holds_our_value(&element.value)),
    }
}

/// True when the entry at `index` is all the container holds: no other entry, no comment.
fn is_sole_content(text: &str, node: &Node, index: usize) -> bool {
    let Some(container) = node.container() else {
        return false;
    };
    if container.entries.len() != 1 {
        return false;
    }
    let entry = &container.entries[index];
    is_all_whitespace(&text[node.start + 1..entry.start()])
        && is_all_whitespace(&text[entry.end()..node.end - 1])
}

fn remove_created_root(text: &str, root: &Node, inserted: &Inserted) -> String {
    let before = &text[..root.start];
    let after = &text[root.end..];
    if let Some(created) = &inserted.created_root
        && before == created.text_before_root
        && after == created.text_after_root
    {
        return created.document_before.clone();
    }
    let after = after
        .strip_prefix("\r\n")
        .or_else(|| after.strip_prefix('\n'))
        .unwrap_or(after);
    format!("{before}{after}")
}

// ---------------------------------------------------------------------------------------------
// Edit planning
// ---------------------------------------------------------------------------------------------

struct Plan {
    edits: Vec<Edit>,
    empty_container: Option<EmptyContainer>,
}

/// Appends an entry after the last one of a container, or as the first of an empty one.
fn plan_append(
    text: &str,
    style: &DocumentStyle,
    node: &Node,
    container: &Container,
    key: Option<&str>,
    value: &Value,
) -> Plan {
    let open = node.start;
    let Some(last) = container.entries.last() else {
        return plan_first_entry(text, style, node, container, key, value);
    };
    let colon = entry_colon(text, last).unwrap_or(&style.colon);
    let edits = match entry_placement(text, container, container.entries.len() - 1, open) {
        SiteLayout::Lines { indent } => {
            let entry = render_entry(key, value, style, colon, Placement::Lines { indent });
            let line = format!("{}{indent}{entry}", style.newline);
            // Keep a comment that ends the last entry's line on that line.
            let anchor = end_of_same_line_comments(text, last.value.end);
            if anchor == last.value.end {
                vec![Edit::insert(anchor, format!(",{line}"))]
            } else {
                vec![
                    Edit::insert(last.value.end, ",".to_owned()),
                    Edit::insert(anchor, line),
                ]
            }
        }
        SiteLayout::Inline { separator } => {
            let entry = render_entry(key, value, style, colon, Placement::Inline { separator });
            vec![Edit::insert(last.value.end, format!(",{separator}{entry}"))]
        }
    };
    Plan {
        edits,
        empty_container: None,
    }
}

fn plan_first_entry(
    text: &str,
    style: &DocumentStyle,
    node: &Node,
    container: &Container,
    key: Option<&str>,
    value: &Value,
) -> Plan {
    let open = node.start;
    let close = node.end - 1;
    let inner_before = &text[open + 1..close];
    let (at, insertion) = if style.multiline {
        let site_indent = line_indent(text, open);
        let entry_indent = format!("{site_indent}{}", style.indent_unit);
        let entry = render_entry(
            key,
            value,
            style,
            &style.colon,
            Placement::Lines {
                indent: &entry_indent,
            },
        );
        let newline = style.newline;
        if text[container.close_ws_start..close].contains('\n') {
            // `{\n}` or `{ // note\n}`: the closing line is already there.
            (
                container.close_ws_start,
                format!("{newline}{entry_indent}{entry}"),
            )
        } else {
            (
                close,
                format!("{newline}{entry_indent}{entry}{newline}{site_indent}"),
            )
        }
    } else {
        let separator = if style.colon.ends_with(' ') { " " } else { "" };
        let entry = render_entry(
            key,
            value,
            style,
            &style.colon,
            Placement::Inline { separator },
        );
        (close, entry)
    };
    let relative = at - (open + 1);
    let inner_after = format!(
        "{}{insertion}{}",
        &inner_before[..relative],
        &inner_before[relative..]
    );
    Plan {
        edits: vec![Edit::insert(at, insertion)],
        empty_container: Some(EmptyContainer {
            inner_before: inner_before.to_owned(),
            inner_after,
        }),
    }
}

fn plan_replace(
    text: &str,
    style: &DocumentStyle,
    node: &Node,
    object: &Container,
    index: usize,
    value: &Value,
) -> Plan {
    let entry = &object.entries[index];
    let colon = entry_colon(text, entry).unwrap_or(&style.colon);
    let mut rendered = String::new();
    match entry_placement(text, object, index, node.start) {
        SiteLayout::Lines { indent } => {
            render_value(
                &mut rendered,
                value,
                style,
                colon,
                Placement::Lines { indent },
            );
        }
        SiteLayout::Inline { .. } => {
            let separator = if colon.ends_with(' ') { " " } else { "" };
            render_value(
                &mut rendered,
                value,
                style,
                colon,
                Placement::Inline { separator },
            );
        }
    }
    Plan {
        edits: vec![Edit::replace(entry.value.start..entry.value.end, rendered)],
        empty_container: None,
    }
}

/// How the entries of a container are laid out, judged by the entry at `index`: on lines of
/// their own (then at which indentation) or one after another on a line (then with which
/// whitespace after each comma).
enum SiteLayout<'t> {
    Lines { indent: &'t str },
    Inline { separator: &'t str },
}

fn entry_placement<'t>(
    text: &'t str,
    container: &Container,
    index: usize,
    open: usize,
) -> SiteLayout<'t> {
    let entry = &container.entries[index];
    let previous_end = match index.checked_sub(1) {
        Some(previous) => container.entries[previous]
            .comma
            .map_or(open + 1, |comma| comma + 1),
        None => open + 1,
    };
    if text[previous_end..entry.start()].contains('\n') {
        SiteLayout::Lines {
            indent: line_indent(text, entry.start()),
        }
    } else {
        SiteLayout::Inline {
            separator: &text[entry.ws_start..entry.start()],
        }
    }
}

/// The edits that take entry `index` out of a container and leave valid JSON: with its own
/// comma when another entry follows, else with the comma before it.
fn removal_edits(text: &str, container: &Container, index: usize) -> Vec<Edit> {
    let entry = &container.entries[index];
    if let Some(comma) = entry.comma {
        let bytes = text.as_bytes();
        let mut end = comma + 1;
        while end < bytes.len() && is_json_whitespace(bytes[end]) {
            end += 1;
        }
        return vec![Edit::delete(entry.start()..end)];
    }
    let previous_comma = index
        .checked_sub(1)
        .and_then(|previous| container.entries[previous].comma);
    match previous_comma {
        Some(comma) => vec![
            Edit::delete(comma..comma + 1),
            Edit::delete(entry.ws_start..entry.end()),
        ],
        None => vec![Edit::delete(entry.ws_start..entry.end())],
    }
}

/// Where an entry appended after the value ending at `from` should start so that comments on
/// the rest of that line stay on it: after a `//` comment or after one-line `/* */` comments.
fn end_of_same_line_comments(text: &str, from: usize) -> usize {
    let bytes = text.as_bytes();
    let mut position = from;
    let mut anchor = from;
    loop {
        while position < bytes.len() && matches!(bytes[position], b' ' | b'\t') {
            position += 1;
        }
        let rest = &text[position..];
        if rest.starts_with("//") {
            return position + rest.find(['\n', '\r']).unwrap_or(rest.len());
        }
        if !rest.starts_with("/*") {
            return anchor;
        }
        let Some(length) = rest[2..].find("*/") else {
            return anchor;
        };
        let end = position + 2 + length + 2;
        if text[position..end].contains('\n') {
            return anchor;
        }
        anchor = end;
        position = end;
    }
}

/// One replacement of a byte range; an insertion has an empty range.
struct Edit {
    range: std::ops::Range<usize>,
    replacement: String,
}

impl Edit {
    fn insert(at: usize, text: String) -> Self {
        Edit {
            range: at..at,
            replacement: text,
        }
    }
    fn delete(range: std::ops::Range<usize>) -> Self {
        Edit {
            range,
            replacement: String::new(),
        }
    }
    fn replace(range: std::ops::Range<usize>, replacement: String) -> Self {
        Edit { range, replacement }
    }
}

/// Applies non-overlapping edits given in any order.
fn apply_edits(text: &str, edits: &[Edit]) -> String {
    let mut ordered: Vec<&Edit> = edits.iter().collect();
    ordered.sort_by_key(|edit| (edit.range.start, edit.range.end));
    let mut out = String::with_capacity(text.len() + 64);
    let mut copied_to = 0;
    for edit in ordered {
        out.push_str(&text[copied_to..edit.range.start]);
        out.push_str(&edit.replacement);
        copied_to = edit.range.end;
    }
    out.push_str(&text[copied_to..]);
    out
}

// ---------------------------------------------------------------------------------------------
// Style detection and rendering
// ---------------------------------------------------------------------------------------------

/// How the file writes JSON, so that what we add looks like the rest.
struct DocumentStyle {
    newline: &'static str,
    /// One level of indentation: two or four spaces, a tab, ...
    indent_unit: String,
    /// What stands between a member name and its value: `": "` or `":"`.
    colon: String,
    /// Whether the document spreads over lines (then new containers do too) or sits on one.
    multiline: bool,
}

impl DocumentStyle {
    fn detect(text: &str, root: Option<&Node>) -> Self {
        let newline = match text.find('\n') {
            Some(index) if index > 0 && text.as_bytes()[index - 1] == b'\r' => "\r\n",
            _ => "\n",
        };
        let Some(root) = root else {
            return DocumentStyle {
                newline,
                indent_unit: "  ".to_owned(),
                colon: ": ".to_owned(),
                multiline: true,
            };
        };
        DocumentStyle {
            newline,
            indent_unit: detect_indent_unit(text, root).unwrap_or_else(|| "  ".to_owned()),
            colon: detect_colon(text, root).unwrap_or_else(|| ": ".to_owned()),
            multiline: text[root.start..root.end].contains('\n') || !has_any_entry(root),
        }
    }
}

/// The first container whose first entry sits on its own line tells the indentation step.
fn detect_indent_unit(text: &str, node: &Node) -> Option<String> {
    let container = node.container()?;
    if let Some(first) = container.entries.first()
        && text[node.start + 1..first.start()].contains('\n')
    {
        let outer = line_indent(text, node.start);
        let inner = line_indent(text, first.start());
        if let Some(step) = inner.strip_prefix(outer)
            && !step.is_empty()
        {
            return Some(step.to_owned());
        }
    }
    container
        .entries
        .iter()
        .find_map(|entry| detect_indent_unit(text, &entry.value))
}

fn detect_colon(text: &str, node: &Node) -> Option<String> {
    let container = node.container()?;
    container.entries.iter().find_map(|entry| {
        entry_colon(text, entry)
            .map(str::to_owned)
            .or_else(|| detect_colon(text, &entry.value))
    })
}

fn has_any_entry(node: &Node) -> bool {
    node.container()
        .is_some_and(|container| !container.entries.is_empty())
}

/// The text between a member's name and its value when it is a plain colon with spaces or tabs
/// around it (so it can be copied); `None` for elements and for colons with comments or lines.
fn entry_colon<'t>(text: &'t str, entry: &Entry) -> Option<&'t str> {
    let key = entry.key.as_ref()?;
    let between = &text[key.end..entry.value.start];
    let valid = between.matches(':').count() == 1
        && between
            .bytes()
            .all(|byte| matches!(byte, b':' | b' ' | b'\t'));
    valid.then_some(between)
}

/// Leading spaces and tabs of the line that holds `position`.
fn line_indent(text: &str, position: usize) -> &str {
    let line_start = text[..position].rfind('\n').map_or(0, |index| index + 1);
    let line = &text[line_start..position];
    let indent_length = line
        .bytes()
        .take_while(|byte| matches!(byte, b' ' | b'\t'))
        .count();
    &line[..indent_length]
}

#[derive(Clone, Copy)]
enum Placement<'a> {
    /// Pretty: each entry on its own line; `indent` is that of the line the value starts on.
    Lines { indent: &'a str },
    /// On one line, with `separator` after each comma.
    Inline { separator: &'a str },
}

fn render_entry(
    key: Option<&str>,
    value: &Value,
    style: &DocumentStyle,
    colon: &str,
    placement: Placement<'_>,
) -> String {
    let mut out = String::new();
    if let Some(key) = key {
        push_json_string(&mut out, key);
        out.push_str(colon);
    }
    render_value(&mut out, value, style, colon, placement);
    out
}

fn render_value(
    out: &mut String,
    value: &Value,
    style: &DocumentStyle,
    colon: &str,
    placement: Placement<'_>,
) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(flag) => out.push_str(if *flag { "true" } else { "false" }),
        Value::Number(number) => out.push_str(&number.to_string()),
        Value::String(string) => push_json_string(out, string),
        Value::Array(elements) if elements.is_empty() => out.push_str("[]"),
        Value::Object(members) if members.is_empty() => out.push_str("{}"),
        Value::Array(elements) => {
            render_entries(
                out,
                ('[', ']'),
                elements.iter().map(|v| (None, v)),
                style,
                colon,
                placement,
            );
        }
        Value::Object(members) => {
            let entries = members.iter().map(|(key, v)| (Some(key.as_str()), v));
            render_entries(out, ('{', '}'), entries, style, colon, placement);
        }
    }
}

fn render_entries<'v>(
    out: &mut String,
    (open, close): (char, char),
    entries: impl Iterator<Item = (Option<&'v str>, &'v Value)>,
    style: &DocumentStyle,
    colon: &str,
    placement: Placement<'_>,
) {
    out.push(open);
    match placement {
        Placement::Lines { indent } => {
            let inner_indent = format!("{indent}{}", style.indent_unit);
            for (position, (key, value)) in entries.enumerate() {
                if position > 0 {
                    out.push(',');
                }
                out.push_str(style.newline);
                out.push_str(&inner_indent);
                let inner = Placement::Lines {
                    indent: &inner_indent,
                };
                out.push_str(&render_entry(key, value, style, colon, inner));
            }
            out.push_str(style.newline);
            out.push_str(indent);
        }
        Placement::Inline { separator } => {
            for (position, (key, value)) in entries.enumerate() {
                if position > 0 {
                    out.push(',');
                    out.push_str(separator);
                }
                out.push_str(&render_entry(key, value, style, colon, placement));
            }
        }
    }
    out.push(close);
}

/// Writes `text` as a JSON string literal, escaping what JSON requires (as serde_json does).
fn push_json_string(out: &mut String, text: &str) {
    out.push('"');
    for character in text.chars() {
        match character {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            control if u32::from(control) < 0x20 => {
                out.push_str(&format!("\\u{:04x}", u32::from(control)));
            }
            other => out.push(other),
        }
    }
    out.push('"');
}

// ---------------------------------------------------------------------------------------------
// Parsing: a tree of byte spans
// ---------------------------------------------------------------------------------------------

struct SyntaxTree {
    /// `None` for a file holding only whitespace and comments.
    root: Option<Node>,
}

/// A value and the bytes it spans (`end` exclusive; for containers `start` is the opening
/// bracket and `end - 1` the closing one).
struct Node {
    start: usize,
    end: usize,
    kind: NodeKind,
}

enum NodeKind {
    Object(Container),
    Array(Container),
    String,
    Number,
    Bool,
    Null,
}

struct Container {
    entries: Vec<Entry>,
    /// Start of the whitespace run just before the closing bracket (after any comment).
    close_ws_start: usize,
}

/// An object member or an array element.
struct Entry {
    key: Option<EntryKey>,
    /// Start of the whitespace run just before the entry (after any comment): what an appended
    /// entry brought along and its removal takes away again.
    ws_start: usize,
    value: Node,
    /// Offset of the comma that follows the entry, if one does.
    comma: Option<usize>,
}

struct EntryKey {
    name: String,
    start: usize,
    end: usize,
}

impl Entry {
    fn start(&self) -> usize {
        self.key.as_ref().map_or(self.value.start, |key| key.start)
    }
    fn end(&self) -> usize {
        self.value.end
    }
}

impl Node {
    fn container(&self) -> Option<&Container> {
        match &self.kind {
            NodeKind::Object(container) | NodeKind::Array(container) => Some(container),
            _ => None,
        }
    }
    fn as_object(&self) -> Option<&Container> {
        match &self.kind {
            NodeKind::Object(container) => Some(container),
            _ => None,
        }
    }
    fn as_array(&self) -> Option<&Container> {
        match &self.kind {
            NodeKind::Array(container) => Some(container),
            _ => None,
        }
    }
    /// How an error names this value to the user.
    fn description(&self) -> &'static str {
        match self.kind {
            NodeKind::Object(_) => "an object",
            NodeKind::Array(_) => "an array",
            NodeKind::String => "a string",
            NodeKind::Number => "a number",
            NodeKind::Bool => "a boolean",
            NodeKind::Null => "null",
        }
    }
}

impl Container {
    /// The member named `key`; the last one if the name repeats, as `JSON.parse` keeps the last.
    fn last_member(&self, key: &str) -> Option<usize> {
        self.entries
            .iter()
            .rposition(|entry| entry.key.as_ref().is_some_and(|k| k.name == key))
    }
}

fn describe_path(path: &[&str]) -> String {
    if path.is_empty() {
        "the top level".to_owned()
    } else {
        format!("`{}`", path.join("."))
    }
}

fn not_an_object(path: &[&str], node: &Node) -> JsonTextError {
    JsonTextError::NotAnObject {
        path: describe_path(path),
        found: node.description(),
    }
}

fn not_an_array(path: &[&str], node: &Node) -> JsonTextError {
    JsonTextError::NotAnArray {
        path: describe_path(path),
        found: node.description(),
    }
}

impl SyntaxTree {
    fn parse(text: &str) -> Result<Self, JsonTextError> {
        let mut parser = Parser {
            text,
            bytes: text.as_bytes(),
            position: if text.starts_with('\u{feff}') { 3 } else { 0 },
            nesting: 0,
        };
        parser.skip_trivia()?;
        if parser.position == parser.bytes.len() {
            return Ok(SyntaxTree { root: None });
        }
        let root = parser.parse_value()?;
        parser.skip_trivia()?;
        if parser.position != parser.bytes.len() {
            return Err(parser.error_at(
                parser.position,
                "unexpected text after the end of the JSON value",
            ));
        }
        Ok(SyntaxTree { root: Some(root) })
    }
}

struct Parser<'t> {
    text: &'t str,
    bytes: &'t [u8],
    position: usize,
    nesting: usize,
}

impl Parser<'_> {
    fn error_at(&self, position: usize, message: impl Into<String>) -> JsonTextError {
        let (line, column) = line_and_column(self.text, position);
        JsonTextError::Unparsable {
            line,
            column,
            message: message.into(),
        }
    }

    fn unexpected(&self, expected: &str) -> JsonTextError {
        let found = self
            .text
            .get(self.position..)
            .and_then(|rest| rest.chars().next());
        let message = match found {
            Some(found) => format!("expected {expected}, found `{}`", found.escape_debug()),
            None => format!("the file ends where {expected} was expected"),
        };
        self.error_at(self.position, message)
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.position).copied()
    }

    /// Skips whitespace and comments; returns where the last run of whitespace began.
    fn skip_trivia(&mut self) -> Result<usize, JsonTextError> {
        let mut ws_start = self.position;
        loop {
            match (self.peek(), self.bytes.get(self.position + 1)) {
                (Some(byte), _) if is_json_whitespace(byte) => self.position += 1,
                (Some(b'/'), Some(b'/')) => {
                    let rest = &self.text[self.position..];
                    self.position += rest.find(['\n', '\r']).unwrap_or(rest.len());
                    ws_start = self.position;
                }
                (Some(b'/'), Some(b'*')) => {
                    let Some(length) = self.text[self.position + 2..].find("*/") else {
                        return Err(self.error_at(self.position, "a /* comment is never closed"));
                    };
                    self.position += 2 + length + 2;
                    ws_start = self.position;
                }
                _ => return Ok(ws_start),
            }
        }
    }

    fn parse_value(&mut self) -> Result<Node, JsonTextError> {
        let start = self.position;
        let kind = match self.peek() {
            Some(b'{') => NodeKind::Object(self.parse_container(b'}')?),
            Some(b'[') => NodeKind::Array(self.parse_container(b']')?),
            Some(b'"') => {
                self.scan_string()?;
                NodeKind::String
            }
            Some(b'-' | b'0'..=b'9') => {
                self.scan_number()?;
                NodeKind::Number
            }
            Some(b't') => self.scan_literal("true", NodeKind::Bool)?,
            Some(b'f') => self.scan_literal("false", NodeKind::Bool)?,
            Some(b'n') => self.scan_literal("null", NodeKind::Null)?,
            _ => return Err(self.unexpected("a value")),
        };
        Ok(Node {
            start,
            end: self.position,
            kind,
        })
    }

    fn parse_container(&mut self, close: u8) -> Result<Container, JsonTextError> {
        let keyed = close == b'}';
        let closing = if keyed { "`}`" } else { "`]`" };
        self.nesting += 1;
        if self.nesting > MAX_NESTING {
            return Err(self.error_at(
                self.position,
                format!("values are nested more than {MAX_NESTING} levels deep"),
            ));
        }
        self.position += 1;
        let mut entries = Vec::new();
        let mut ws_start = self.skip_trivia()?;
        if self.peek() == Some(close) {
            self.position += 1;
            self.nesting -= 1;
            return Ok(Container {
                entries,
                close_ws_start: ws_start,
            });
        }
        loop {
            let key = if keyed { Some(self.parse_key()?) } else { None };
            let value = self.parse_value()?;
            let after_value = self.skip_trivia()?;
            match self.peek() {
                Some(b',') => {
                    entries.push(Entry {
                        key,
                        ws_start,
                        value,
                        comma: Some(self.position),
                    });
                    self.position += 1;
                    ws_start = self.skip_trivia()?;
                    if self.peek() == Some(close) {
                        return Err(self.error_at(
                            self.position,
                            format!("a comma before {closing} (trailing commas are not JSON)"),
                        ));
                    }
                }
                Some(byte) if byte == close => {
                    entries.push(Entry {
                        key,
                        ws_start,
                        value,
                        comma: None,
                    });
                    self.position += 1;
                    self.nesting -= 1;
                    return Ok(Container {
                        entries,
                        close_ws_start: after_value,
                    });
                }
                _ => return Err(self.unexpected(&format!("`,` or {closing}"))),
            }
        }
    }

    fn parse_key(&mut self) -> Result<EntryKey, JsonTextError> {
        if self.peek() != Some(b'"') {
            return Err(self.unexpected("a member name in double quotes"));
        }
        let start = self.position;
        self.scan_string()?;
        let end = self.position;
        let name: String = serde_json::from_str(&self.text[start..end])
            .map_err(|error| self.error_at(start, format!("unreadable member name: {error}")))?;
        self.skip_trivia()?;
        if self.peek() != Some(b':') {
            return Err(self.unexpected("`:` after the member name"));
        }
        self.position += 1;
        self.skip_trivia()?;
        Ok(EntryKey { name, start, end })
    }

    /// Moves past a string literal, checking escapes and refusing raw control characters.
    fn scan_string(&mut self) -> Result<(), JsonTextError> {
        let start = self.position;
        self.position += 1;
        loop {
            match self.peek() {
                None => return Err(self.error_at(start, "a string is never closed")),
                Some(b'"') => {
                    self.position += 1;
                    return Ok(());
                }
                Some(b'\\') => {
                    let escape_at = self.position;
                    match self.bytes.get(self.position + 1) {
                        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => {
                            self.position += 2;
                        }
                        Some(b'u') => {
                            let digits = self.bytes.get(self.position + 2..self.position + 6);
                            if !digits.is_some_and(|d| d.iter().all(u8::is_ascii_hexdigit)) {
                                return Err(
                                    self.error_at(escape_at, "a \\u escape needs four hex digits")
                                );
                            }
                            self.position += 6;
                        }
                        _ => return Err(self.error_at(escape_at, "an invalid escape in a string")),
                    }
                }
                Some(byte) if byte < 0x20 => {
                    return Err(self.error_at(
                        self.position,
                        "a control character (such as a line break) inside a string; escape it",
                    ));
                }
                Some(_) => self.position += 1,
            }
        }
    }

    fn scan_number(&mut self) -> Result<(), JsonTextError> {
        let start = self.position;
        let invalid = |parser: &Self| parser.error_at(start, "an invalid number");
        if self.peek() == Some(b'-') {
            self.position += 1;
        }
        match self.peek() {
            Some(b'0') => self.position += 1,
            Some(b'1'..=b'9') => self.skip_digits(),
            _ => return Err(invalid(self)),
        }
        if self.peek() == Some(b'.') {
            self.position += 1;
            if !self.peek().is_some_and(|byte| byte.is_ascii_digit()) {
                return Err(invalid(self));
            }
            self.skip_digits();
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.position += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.position += 1;
            }
            if !self.peek().is_some_and(|byte| byte.is_ascii_digit()) {
                return Err(invalid(self));
            }
            self.skip_digits();
        }
        Ok(())
    }

    fn skip_digits(&mut self) {
        while self.peek().is_some_and(|byte| byte.is_ascii_digit()) {
            self.position += 1;
        }
    }

    fn scan_literal(&mut self, literal: &str, kind: NodeKind) -> Result<NodeKind, JsonTextError> {
        if !self.text[self.position..].starts_with(literal) {
            return Err(self.unexpected("a value"));
        }
        self.position += literal.len();
        Ok(kind)
    }
}

/// The `serde_json::Value` a node stands for (duplicate names: the last wins, as in `JSON.parse`).
fn node_value(text: &str, node: &Node) -> Result<Value, JsonTextError> {
    match &node.kind {
        NodeKind::Object(container) => {
            let mut members = Map::new();
            for entry in &container.entries {
                if let Some(key) = &entry.key {
                    members.insert(key.name.clone(), node_value(text, &entry.value)?);
                }
            }
            Ok(Value::Object(members))
        }
        NodeKind::Array(container) => container
            .entries
            .iter()
            .map(|entry| node_value(text, &entry.value))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array),
        NodeKind::Number => number_value(&text[node.start..node.end]).ok_or_else(|| {
            let (line, column) = line_and_column(text, node.start);
            JsonTextError::Unparsable {
                line,
                column,
                message: "a number too large to read".to_owned(),
            }
        }),
        NodeKind::String | NodeKind::Bool | NodeKind::Null => {
            serde_json::from_str(&text[node.start..node.end]).map_err(|error| {
                let (line, column) = line_and_column(text, node.start);
                JsonTextError::Unparsable {
                    line,
                    column,
                    message: format!("unreadable value: {error}"),
                }
            })
        }
    }
}

/// Reads a number as serde_json would, but with the standard library's correctly rounded float
/// parsing (serde_json's default one may be off by an ulp), so a float we wrote reads back equal.
fn number_value(literal: &str) -> Option<Value> {
    if !literal.contains(['.', 'e', 'E']) {
        if let Ok(unsigned) = literal.parse::<u64>() {
            return Some(Value::from(unsigned));
        }
        if let Ok(signed) = literal.parse::<i64>() {
            return Some(Value::from(signed));
        }
    }
    let float = literal.parse::<f64>().ok()?;
    serde_json::Number::from_f64(float).map(Value::Number)
}

/// Equality of meaning, tolerating the last bits of floats: a record kept in a manifest goes
/// through serde_json's float parsing, which is not always exact.
fn same_json(left: &Value, right: &Value) -> bool {
    match (left, right) {
        (Value::Number(a), Value::Number(b)) => {
            match (a.as_i64(), b.as_i64(), a.as_u64(), b.as_u64()) {
                (Some(x), Some(y), _, _) => x == y,
                (_, _, Some(x), Some(y)) => x == y,
                _ => match (a.as_f64(), b.as_f64()) {
                    (Some(x), Some(y)) => {
                        (x - y).abs() <= 4.0 * f64::EPSILON * x.abs().max(y.abs())
                    }
                    _ => false,
                },
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same_json(x, y))
        }
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len()
                && a.iter()
                    .all(|(key, x)| b.get(key).is_some_and(|y| same_json(x, y)))
        }
        _ => left == right,
    }
}

/// 1-based line and column (in characters) of a byte offset.
fn line_and_column(text: &str, position: usize) -> (usize, usize) {
    let mut position = position.min(text.len());
    while !text.is_char_boundary(position) {
        position -= 1;
    }
    let before = &text[..position];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |index| index + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

fn is_json_whitespace(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\n' | b'\r')
}

fn is_json_whitespace_char(character: char) -> bool {
    matches!(character, ' ' | '\t' | '\n' | '\r')
}

fn is_all_whitespace(text: &str) -> bool {
    text.bytes().all(is_json_whitespace)
}

#[cfg(test)]
mod tests {
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
    fn expected_document(
        document: &Value,
        path: &[&str],
        key: Option<&str>,
        value: &Value,
    ) -> Value {
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
            let edited =
                insert_and_undo(golden.original, golden.path, golden.key, &(golden.value)());
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
        let (ours, inserted) =
            append_element(original, &["hooks", "Stop"], &our_stop_hook()).unwrap();
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
                    let entries: Vec<_> =
                        members.iter().map(|(k, v)| (Some(k.as_str()), v)).collect();
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
                    let target =
                        pick_member_target(&document, object, &segments, existing, &new_key);
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
}
