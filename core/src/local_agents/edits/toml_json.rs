//! TOML values made from JSON ones and back: Codex keeps its settings in TOML, and the
//! entries Roundtable writes are planned as JSON like every other CLI's.

use super::*;

/// A JSON value as a TOML value (objects as inline tables; `null` is dropped by callers).
pub(super) fn toml_value(value: &Value) -> toml_edit::Value {
    match value {
        Value::String(text) => text.as_str().into(),
        Value::Bool(flag) => (*flag).into(),
        Value::Number(number) => match number.as_i64() {
            Some(integer) => integer.into(),
            None => number.as_f64().unwrap_or_default().into(),
        },
        Value::Array(items) => {
            let mut array = toml_edit::Array::new();
            for item in items {
                array.push(toml_value(item));
            }
            toml_edit::Value::Array(array)
        }
        Value::Object(_) => toml_edit::Value::InlineTable(inline_table(value)),
        Value::Null => "".into(),
    }
}

pub(super) fn inline_table(value: &Value) -> toml_edit::InlineTable {
    let mut table = toml_edit::InlineTable::new();
    if let Value::Object(members) = value {
        for (key, member) in members {
            if !member.is_null() {
                table.insert(key, toml_value(member));
            }
        }
    }
    table
}

/// A TOML value as JSON, to compare with what we write.
pub(super) fn json_of_toml(value: &toml_edit::Value) -> Value {
    match value {
        toml_edit::Value::String(text) => json!(text.value()),
        toml_edit::Value::Integer(integer) => json!(integer.value()),
        toml_edit::Value::Float(float) => json!(float.value()),
        toml_edit::Value::Boolean(flag) => json!(flag.value()),
        toml_edit::Value::Datetime(datetime) => json!(datetime.value().to_string()),
        toml_edit::Value::Array(array) => Value::Array(array.iter().map(json_of_toml).collect()),
        toml_edit::Value::InlineTable(table) => Value::Object(
            table
                .iter()
                .map(|(key, value)| (key.to_owned(), json_of_toml(value)))
                .collect(),
        ),
    }
}

pub(super) fn json_of_toml_table(table: &toml_edit::Table) -> Value {
    Value::Object(
        table
            .iter()
            .filter_map(|(key, item)| {
                let value = match item {
                    toml_edit::Item::Value(value) => json_of_toml(value),
                    toml_edit::Item::Table(table) => json_of_toml_table(table),
                    _ => return None,
                };
                Some((key.to_owned(), value))
            })
            .collect(),
    )
}
