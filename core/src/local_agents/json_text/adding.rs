//! Adding entries: where a new member or element goes, what an empty or missing document
//! becomes, and finding our entry again to take it out.

use super::*;

#[derive(Clone, Copy)]
pub(super) enum NewEntry<'k> {
    Member(&'k str),
    Element,
}

impl NewEntry<'_> {
    pub(super) fn record(self) -> AddedEntry {
        match self {
            NewEntry::Member(key) => AddedEntry::Member {
                key: key.to_owned(),
            },
            NewEntry::Element => AddedEntry::Element,
        }
    }
}

pub(super) fn add_entry(
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
pub(super) fn add_to_empty_document(
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
pub(super) fn wrap_in_path(remaining: &[&str], new_entry: NewEntry<'_>, value: &Value) -> Value {
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
pub(super) fn check_added(new_text: &str, inserted: &Inserted) -> Result<(), JsonTextError> {
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

pub(super) fn checked_removal(new_text: String) -> Result<String, JsonTextError> {
    SyntaxTree::parse(&new_text).map_err(|error| JsonTextError::EditCheckFailed {
        reason: error.to_string(),
    })?;
    Ok(new_text)
}

/// Index of our entry in `holder`: the member with our key, or the last element equal to our
/// value; `None` when it is gone or no longer holds our value.
pub(super) fn find_our_entry(
    text: &str,
    holder: &Node,
    entry: &AddedEntry,
    value: &Value,
) -> Option<usize> {
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
pub(super) fn is_sole_content(text: &str, node: &Node, index: usize) -> bool {
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

pub(super) fn remove_created_root(text: &str, root: &Node, inserted: &Inserted) -> String {
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
