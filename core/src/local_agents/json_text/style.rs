//! Style detection and rendering: the file's own indentation, colon spacing and line
//! endings, and new entries written in them.

use super::*;

/// How the file writes JSON, so that what we add looks like the rest.
pub(super) struct DocumentStyle {
    pub(super) newline: &'static str,
    /// One level of indentation: two or four spaces, a tab, ...
    pub(super) indent_unit: String,
    /// What stands between a member name and its value: `": "` or `":"`.
    pub(super) colon: String,
    /// Whether the document spreads over lines (then new containers do too) or sits on one.
    pub(super) multiline: bool,
}

impl DocumentStyle {
    pub(super) fn detect(text: &str, root: Option<&Node>) -> Self {
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
pub(super) fn detect_indent_unit(text: &str, node: &Node) -> Option<String> {
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

pub(super) fn detect_colon(text: &str, node: &Node) -> Option<String> {
    let container = node.container()?;
    container.entries.iter().find_map(|entry| {
        entry_colon(text, entry)
            .map(str::to_owned)
            .or_else(|| detect_colon(text, &entry.value))
    })
}

pub(super) fn has_any_entry(node: &Node) -> bool {
    node.container()
        .is_some_and(|container| !container.entries.is_empty())
}

/// The text between a member's name and its value when it is a plain colon with spaces or tabs
/// around it (so it can be copied); `None` for elements and for colons with comments or lines.
pub(super) fn entry_colon<'t>(text: &'t str, entry: &Entry) -> Option<&'t str> {
    let key = entry.key.as_ref()?;
    let between = &text[key.end..entry.value.start];
    let valid = between.matches(':').count() == 1
        && between
            .bytes()
            .all(|byte| matches!(byte, b':' | b' ' | b'\t'));
    valid.then_some(between)
}

/// Leading spaces and tabs of the line that holds `position`.
pub(super) fn line_indent(text: &str, position: usize) -> &str {
    let line_start = text[..position].rfind('\n').map_or(0, |index| index + 1);
    let line = &text[line_start..position];
    let indent_length = line
        .bytes()
        .take_while(|byte| matches!(byte, b' ' | b'\t'))
        .count();
    &line[..indent_length]
}

#[derive(Clone, Copy)]
pub(super) enum Placement<'a> {
    /// Pretty: each entry on its own line; `indent` is that of the line the value starts on.
    Lines { indent: &'a str },
    /// On one line, with `separator` after each comma.
    Inline { separator: &'a str },
}

pub(super) fn render_entry(
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

pub(super) fn render_value(
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

pub(super) fn render_entries<'v>(
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
pub(super) fn push_json_string(out: &mut String, text: &str) {
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
