//! Edit planning: the byte edits that insert or remove one entry with its separators and
//! whitespace, in the style of its neighbours.

use super::*;

pub(super) struct Plan {
    pub(super) edits: Vec<Edit>,
    pub(super) empty_container: Option<EmptyContainer>,
}

/// Appends an entry after the last one of a container, or as the first of an empty one.
pub(super) fn plan_append(
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

pub(super) fn plan_first_entry(
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

pub(super) fn plan_replace(
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
pub(super) enum SiteLayout<'t> {
    Lines { indent: &'t str },
    Inline { separator: &'t str },
}

pub(super) fn entry_placement<'t>(
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
pub(super) fn removal_edits(text: &str, container: &Container, index: usize) -> Vec<Edit> {
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
pub(super) fn end_of_same_line_comments(text: &str, from: usize) -> usize {
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
pub(super) struct Edit {
    pub(super) range: std::ops::Range<usize>,
    pub(super) replacement: String,
}

impl Edit {
    pub(super) fn insert(at: usize, text: String) -> Self {
        Edit {
            range: at..at,
            replacement: text,
        }
    }
    pub(super) fn delete(range: std::ops::Range<usize>) -> Self {
        Edit {
            range,
            replacement: String::new(),
        }
    }
    pub(super) fn replace(range: std::ops::Range<usize>, replacement: String) -> Self {
        Edit { range, replacement }
    }
}

/// Applies non-overlapping edits given in any order.
pub(super) fn apply_edits(text: &str, edits: &[Edit]) -> String {
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
