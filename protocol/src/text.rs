//! What the strings of client frames may hold.
//!
//! Every string a client sends is one of three shapes ([`Shape`]), and each shape refuses
//! the characters that make no sense in it, with `bad_frame` naming the field:
//!
//! - **Identifiers** (ids, keys, kinds, devices, handles, codes, stream names, file paths,
//!   timestamps) are made and compared by programs: a control character in one is a bug or
//!   an attack, and a NUL cannot even be stored by PostgreSQL, which answered such a write
//!   with `internal` (retryable: a well-behaved client retried it forever).
//! - **Lines** (names, choices, model names) are read by people on one line.
//! - **Prose** (messages, titles and topics, questions, reasons, notes, descriptions) may
//!   break lines and hold tabs, but no other control character: not NUL, not a terminal's
//!   escape sequences.
//!
//! Unicode format characters (general category Cf) render as nothing or reorder what
//! follows: a right-to-left override (U+202E) shows the rest of a name reversed, so it reads
//! as something it is not, and a zero-width space makes two names that look the same compare
//! different. Identifiers never hold them; names, titles, topics and descriptions are refused
//! them too (the hub checks these: [`find_format_character`]), never silently cleaned, so
//! what a person typed is what everyone else sees. Prose is not subject to this: these
//! characters have legitimate uses in it.

use std::fmt;

/// The code points of general category Cf (Unicode 15.1), as inclusive ranges.
const FORMAT_CHARACTERS: [(u32, u32); 21] = [
    (0x00AD, 0x00AD),   // soft hyphen
    (0x0600, 0x0605),   // Arabic number signs
    (0x061C, 0x061C),   // Arabic letter mark
    (0x06DD, 0x06DD),   // Arabic end of ayah
    (0x070F, 0x070F),   // Syriac abbreviation mark
    (0x0890, 0x0891),   // Arabic pound and piastre marks above
    (0x08E2, 0x08E2),   // Arabic disputed end of ayah
    (0x180E, 0x180E),   // Mongolian vowel separator
    (0x200B, 0x200F),   // zero-width space, joiners, LRM, RLM
    (0x202A, 0x202E),   // bidi embeddings and overrides
    (0x2060, 0x2064),   // word joiner, invisible operators
    (0x2066, 0x206F),   // bidi isolates, deprecated format characters
    (0xFEFF, 0xFEFF),   // zero-width no-break space (BOM)
    (0xFFF9, 0xFFFB),   // interlinear annotation
    (0x110BD, 0x110BD), // Kaithi number sign
    (0x110CD, 0x110CD), // Kaithi number sign above
    (0x13430, 0x1343F), // Egyptian hieroglyph format controls
    (0x1BCA0, 0x1BCA3), // shorthand format controls
    (0x1D173, 0x1D17A), // musical symbol beams and ties
    (0xE0001, 0xE0001), // language tag
    (0xE0020, 0xE007F), // tag characters
];

/// Whether `c` is a Unicode format character (general category Cf).
pub fn is_format_character(c: char) -> bool {
    let code = c as u32;
    FORMAT_CHARACTERS
        .iter()
        .any(|&(first, last)| (first..=last).contains(&code))
}

/// The first format character in `text`, if any (to name it in an error message).
pub fn find_format_character(text: &str) -> Option<char> {
    text.chars().find(|&c| is_format_character(c))
}

/// What a client string is, which decides the characters it may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// An id, key, kind, device, handle, code, stream name, file path or timestamp: no
    /// control characters, no line or paragraph separators, no format characters.
    Identifier,
    /// One line that people read (a name, a choice, a model): no control characters, so
    /// no line breaks or tabs either, and no line or paragraph separators.
    Line,
    /// Prose (a message, a question, a reason, a note, a description): line breaks (`\n`,
    /// `\r`) and tabs, and no other control character.
    Prose,
}

impl Shape {
    /// What the shape allows, as the end of an error message.
    fn rule(self) -> &'static str {
        match self {
            Shape::Identifier => {
                "ids, keys, kinds, devices, handles and paths hold printable characters only \
                 (no control characters, line breaks or invisible format characters)"
            }
            Shape::Line => {
                "a one-line text holds no control characters or line separators (no line \
                 breaks, tabs or NUL)"
            }
            Shape::Prose => {
                "text may hold line breaks and tabs, but no other control character (NUL, \
                 escape sequences, …): remove it"
            }
        }
    }
}

/// The first character of `text` that `shape` does not allow, if any.
pub fn refused_character(text: &str, shape: Shape) -> Option<char> {
    match shape {
        Shape::Prose => {
            // Messages are the bulk of what clients send: look at bytes, and decode only at a
            // hit. Below U+00A0 a control character is one byte (C0, DEL) or 0xC2 then 0x80 to
            // 0x9F (C1).
            let bytes = text.as_bytes();
            let at = bytes.iter().enumerate().position(|(index, &byte)| {
                (byte < 0x20 && !matches!(byte, b'\t' | b'\n' | b'\r'))
                    || byte == 0x7F
                    || (byte == 0xC2
                        && bytes
                            .get(index + 1)
                            .is_some_and(|next| (0x80..0xA0).contains(next)))
            })?;
            text[at..].chars().next()
        }
        // Printable ASCII, the common case, is passed over a byte at a time.
        Shape::Line => {
            let at = text
                .bytes()
                .position(|byte| !(0x20..0x7F).contains(&byte))?;
            text[at..]
                .chars()
                .find(|&c| c.is_control() || c == '\u{2028}' || c == '\u{2029}')
        }
        Shape::Identifier => {
            let at = text
                .bytes()
                .position(|byte| !(0x20..0x7F).contains(&byte))?;
            text[at..].chars().find(|&c| {
                c.is_control() || c == '\u{2028}' || c == '\u{2029}' || is_format_character(c)
            })
        }
    }
}

/// `text` without the characters `shape` refuses: for what a client forwards from sources
/// it does not control (an agent's logs, say), which must not stop the rest from being sent.
pub fn cleaned(text: &str, shape: Shape) -> std::borrow::Cow<'_, str> {
    if refused_character(text, shape).is_none() {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut buffer = [0; 4];
    std::borrow::Cow::Owned(
        text.chars()
            .filter(|&c| refused_character(c.encode_utf8(&mut buffer), shape).is_none())
            .collect(),
    )
}

/// JSON text with `<` and `>` escaped, for a model to read others' words in: they occur
/// only inside JSON's strings, where `\u003c` reads the same to a parser and spells no tag
/// (a block's closing marker, `<system-reminder>`). Pure.
pub fn tagless_json(json: &str) -> String {
    json.replace('<', "\\u003c").replace('>', "\\u003e")
}

/// A client string refused for a character its shape does not allow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefusedString {
    /// The field, as a path in the frame (`client_key`, `body.tasks[2].title`).
    pub field: String,
    pub character: char,
    pub shape: Shape,
}

impl fmt::Display for RefusedString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let code = self.character as u32;
        let what = match self.character {
            '\0' => " (NUL)",
            '\u{1B}' => " (escape)",
            '\u{7F}' => " (delete)",
            '\n' | '\r' => " (a line break)",
            '\t' => " (a tab)",
            '\u{2028}' | '\u{2029}' => " (a line or paragraph separator)",
            c if c.is_control() => " (a control character)",
            _ => " (an invisible format character)",
        };
        write!(
            f,
            "{} holds U+{code:04X}{what}; {}",
            self.field,
            self.shape.rule()
        )
    }
}

impl std::error::Error for RefusedString {}

/// Checks one client string of shape `shape`, naming it `field` when refused.
pub fn check(
    field: impl FnOnce() -> String,
    text: &str,
    shape: Shape,
) -> Result<(), RefusedString> {
    match refused_character(text, shape) {
        None => Ok(()),
        Some(character) => Err(RefusedString {
            field: field(),
            character,
            shape,
        }),
    }
}

/// Checks that no string of a JSON value (keys included) holds NUL, which no client means
/// and some stores cannot keep; `field` names the value. Allocates only for a refusal.
pub fn check_no_nul(field: &str, value: &serde_json::Value) -> Result<(), RefusedString> {
    match nul_at(value) {
        None => Ok(()),
        Some(mut path) => {
            path.reverse();
            Err(RefusedString {
                field: format!("{field}{}", path.concat()),
                character: '\0',
                shape: Shape::Prose,
            })
        }
    }
}

/// Where in `value` a NUL is, as path segments from the innermost out.
fn nul_at(value: &serde_json::Value) -> Option<Vec<String>> {
    use serde_json::Value;
    match value {
        Value::String(text) => text.contains('\0').then(Vec::new),
        Value::Array(items) => items.iter().enumerate().find_map(|(index, item)| {
            let mut path = nul_at(item)?;
            path.push(format!("[{index}]"));
            Some(path)
        }),
        Value::Object(fields) => fields.iter().find_map(|(key, item)| {
            if key.contains('\0') {
                return Some(vec![format!(" (a key: {key:?})")]);
            }
            let mut path = nul_at(item)?;
            path.push(format!(".{key}"));
            Some(path)
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bidi_controls_and_zero_width_characters_are_format_characters() {
        for c in [
            '\u{202E}',
            '\u{202A}',
            '\u{2066}',
            '\u{2069}',
            '\u{200B}',
            '\u{200D}',
            '\u{200E}',
            '\u{FEFF}',
            '\u{00AD}',
            '\u{2060}',
            '\u{E0041}',
            '\u{061C}',
        ] {
            assert!(is_format_character(c), "U+{:04X}", c as u32);
        }
    }

    #[test]
    fn letters_spaces_marks_and_emoji_are_not() {
        for c in [
            'a', 'é', ' ', '\u{00A0}', '\u{0301}', 'ß', '中', '🦀', '\u{2028}', '\u{200A}',
            '\u{2070}', '\u{FFFC}',
        ] {
            assert!(!is_format_character(c), "U+{:04X}", c as u32);
        }
    }

    #[test]
    fn ranges_are_sorted_and_disjoint() {
        for pair in FORMAT_CHARACTERS.windows(2) {
            assert!(pair[0].0 <= pair[0].1 && pair[0].1 < pair[1].0, "{pair:?}");
        }
    }

    #[test]
    fn finds_the_first_one() {
        assert_eq!(
            find_format_character("dana\u{202E}txt.exe"),
            Some('\u{202E}')
        );
        assert_eq!(find_format_character("Dana Scully"), None);
    }

    #[test]
    fn each_shape_refuses_what_makes_no_sense_in_it() {
        use Shape::{Identifier, Line, Prose};
        for (text, shape, refused) in [
            ("aaaaaaa\u{0}", Identifier, Some('\0')),
            ("x-a\u{0}", Identifier, Some('\0')),
            ("laptop\n", Identifier, Some('\n')),
            ("r_1\u{2028}", Identifier, Some('\u{2028}')),
            ("dana\u{202E}", Identifier, Some('\u{202E}')),
            ("src/Lexer Mod.rs", Identifier, None),
            ("Dana\tScully", Line, Some('\t')),
            ("Dana\u{85}", Line, Some('\u{85}')),
            ("Dana \u{202E}x", Line, None),
            ("one\u{2028}two", Line, Some('\u{2028}')),
            ("one\ntwo\r\n\tthree", Prose, None),
            ("bell\u{7}", Prose, Some('\u{7}')),
            ("\u{1b}[31mred", Prose, Some('\u{1b}')),
            ("del\u{7f}", Prose, Some('\u{7f}')),
            ("c1 \u{9b}", Prose, Some('\u{9b}')),
            ("nul\u{0}", Prose, Some('\0')),
            ("é ß 中 🦀 \u{a0} \u{202E}", Prose, None),
        ] {
            assert_eq!(
                refused_character(text, shape),
                refused,
                "{text:?} as {shape:?}"
            );
        }
    }

    #[test]
    fn a_refusal_names_the_field_and_the_character_without_echoing_the_text() {
        let refused = check(|| "client_key".into(), "secret\u{0}", Shape::Identifier).unwrap_err();
        let said = refused.to_string();
        assert!(
            said.starts_with("client_key holds U+0000 (NUL); "),
            "{said}"
        );
        assert!(!said.contains("secret"), "{said}");
        let refused = check(|| "body.text".into(), "\u{1b}[2J", Shape::Prose).unwrap_err();
        assert!(refused.to_string().contains("U+001B (escape)"), "{refused}");
    }

    #[test]
    fn nul_is_found_anywhere_in_a_value_and_named_by_its_path() {
        let value = serde_json::json!({"a": [1, {"b": "ok"}, {"c": "x\u{0}"}], "d": "fine"});
        assert_eq!(
            check_no_nul("body", &value).unwrap_err().field,
            "body.a[2].c"
        );
        let key = serde_json::json!({"k\u{0}": 1});
        assert!(
            check_no_nul("card", &key)
                .unwrap_err()
                .field
                .starts_with("card (a key")
        );
        check_no_nul(
            "body",
            &serde_json::json!({"text": "\\u0000 is how JSON spells it"}),
        )
        .unwrap();
    }

    #[test]
    fn cleaning_keeps_everything_a_shape_allows() {
        assert_eq!(
            cleaned("lex\u{1b}[31m\ttokens\n", Shape::Prose),
            "lex[31m\ttokens\n"
        );
        assert_eq!(cleaned("s1\u{7}\u{202E}", Shape::Identifier), "s1");
        assert!(matches!(
            cleaned("already fine", Shape::Line),
            std::borrow::Cow::Borrowed(_)
        ));
    }
}
