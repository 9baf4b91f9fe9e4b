//! Parsing: a tree of byte spans — every value, entry, key, comma and the whitespace
//! around them — with comments read as whitespace and the nesting limit enforced.

use super::*;

pub(super) struct SyntaxTree {
    /// `None` for a file holding only whitespace and comments.
    pub(super) root: Option<Node>,
}

/// A value and the bytes it spans (`end` exclusive; for containers `start` is the opening
/// bracket and `end - 1` the closing one).
pub(super) struct Node {
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) kind: NodeKind,
}

pub(super) enum NodeKind {
    Object(Container),
    Array(Container),
    String,
    Number,
    Bool,
    Null,
}

pub(super) struct Container {
    pub(super) entries: Vec<Entry>,
    /// Start of the whitespace run just before the closing bracket (after any comment).
    pub(super) close_ws_start: usize,
}

/// An object member or an array element.
pub(super) struct Entry {
    pub(super) key: Option<EntryKey>,
    /// Start of the whitespace run just before the entry (after any comment): what an appended
    /// entry brought along and its removal takes away again.
    pub(super) ws_start: usize,
    pub(super) value: Node,
    /// Offset of the comma that follows the entry, if one does.
    pub(super) comma: Option<usize>,
}

pub(super) struct EntryKey {
    pub(super) name: String,
    pub(super) start: usize,
    pub(super) end: usize,
}

impl Entry {
    pub(super) fn start(&self) -> usize {
        self.key.as_ref().map_or(self.value.start, |key| key.start)
    }
    pub(super) fn end(&self) -> usize {
        self.value.end
    }
}

impl Node {
    pub(super) fn container(&self) -> Option<&Container> {
        match &self.kind {
            NodeKind::Object(container) | NodeKind::Array(container) => Some(container),
            _ => None,
        }
    }
    pub(super) fn as_object(&self) -> Option<&Container> {
        match &self.kind {
            NodeKind::Object(container) => Some(container),
            _ => None,
        }
    }
    pub(super) fn as_array(&self) -> Option<&Container> {
        match &self.kind {
            NodeKind::Array(container) => Some(container),
            _ => None,
        }
    }
    /// How an error names this value to the user.
    pub(super) fn description(&self) -> &'static str {
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
    pub(super) fn last_member(&self, key: &str) -> Option<usize> {
        self.entries
            .iter()
            .rposition(|entry| entry.key.as_ref().is_some_and(|k| k.name == key))
    }
}

pub(super) fn describe_path(path: &[&str]) -> String {
    if path.is_empty() {
        "the top level".to_owned()
    } else {
        format!("`{}`", path.join("."))
    }
}

pub(super) fn not_an_object(path: &[&str], node: &Node) -> JsonTextError {
    JsonTextError::NotAnObject {
        path: describe_path(path),
        found: node.description(),
    }
}

pub(super) fn not_an_array(path: &[&str], node: &Node) -> JsonTextError {
    JsonTextError::NotAnArray {
        path: describe_path(path),
        found: node.description(),
    }
}

impl SyntaxTree {
    pub(super) fn parse(text: &str) -> Result<Self, JsonTextError> {
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

pub(super) struct Parser<'t> {
    pub(super) text: &'t str,
    pub(super) bytes: &'t [u8],
    pub(super) position: usize,
    pub(super) nesting: usize,
}

impl Parser<'_> {
    pub(super) fn error_at(&self, position: usize, message: impl Into<String>) -> JsonTextError {
        let (line, column) = line_and_column(self.text, position);
        JsonTextError::Unparsable {
            line,
            column,
            message: message.into(),
        }
    }

    pub(super) fn unexpected(&self, expected: &str) -> JsonTextError {
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

    pub(super) fn peek(&self) -> Option<u8> {
        self.bytes.get(self.position).copied()
    }

    /// Skips whitespace and comments; returns where the last run of whitespace began.
    pub(super) fn skip_trivia(&mut self) -> Result<usize, JsonTextError> {
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

    pub(super) fn parse_value(&mut self) -> Result<Node, JsonTextError> {
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

    pub(super) fn parse_container(&mut self, close: u8) -> Result<Container, JsonTextError> {
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

    pub(super) fn parse_key(&mut self) -> Result<EntryKey, JsonTextError> {
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
    pub(super) fn scan_string(&mut self) -> Result<(), JsonTextError> {
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

    pub(super) fn scan_number(&mut self) -> Result<(), JsonTextError> {
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

    pub(super) fn skip_digits(&mut self) {
        while self.peek().is_some_and(|byte| byte.is_ascii_digit()) {
            self.position += 1;
        }
    }

    pub(super) fn scan_literal(
        &mut self,
        literal: &str,
        kind: NodeKind,
    ) -> Result<NodeKind, JsonTextError> {
        if !self.text[self.position..].starts_with(literal) {
            return Err(self.unexpected("a value"));
        }
        self.position += literal.len();
        Ok(kind)
    }
}

/// The `serde_json::Value` a node stands for (duplicate names: the last wins, as in `JSON.parse`).
pub(super) fn node_value(text: &str, node: &Node) -> Result<Value, JsonTextError> {
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
pub(super) fn number_value(literal: &str) -> Option<Value> {
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
pub(super) fn same_json(left: &Value, right: &Value) -> bool {
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

pub(super) fn is_json_whitespace(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\n' | b'\r')
}

pub(super) fn is_json_whitespace_char(character: char) -> bool {
    matches!(character, ' ' | '\t' | '\n' | '\r')
}

pub(super) fn is_all_whitespace(text: &str) -> bool {
    text.bytes().all(is_json_whitespace)
}
