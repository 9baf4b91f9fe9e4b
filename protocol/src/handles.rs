//! Handle syntax and `@mention` scanning.
//!
//! Handles are refused, never normalized: `Dana`, `dana.` or `dаna` (Cyrillic а) are not
//! rewritten into `dana`, they are errors. That keeps a handle's meaning identical on every
//! client, and leaves no room for two spellings of one name.

/// Why a handle or agent name was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandleError(pub String);

impl std::fmt::Display for HandleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for HandleError {}

/// Checks one handle segment (a user handle, or an agent's `<name>`):
/// `^[a-z0-9][a-z0-9_-]{1,31}$`.
pub fn validate_segment(segment: &str, what: &str) -> Result<(), HandleError> {
    let bytes = segment.as_bytes();
    if bytes.len() < 2 || bytes.len() > 32 {
        return Err(HandleError(format!(
            "{what} {segment:?} must be 2 to 32 characters long"
        )));
    }
    if !matches!(bytes[0], b'a'..=b'z' | b'0'..=b'9') {
        return Err(HandleError(format!(
            "{what} {segment:?} must start with a lower-case letter or a digit"
        )));
    }
    if let Some(bad) = segment
        .chars()
        .find(|c| !matches!(c, 'a'..='z' | '0'..='9' | '_' | '-'))
    {
        return Err(HandleError(format!(
            "{what} {segment:?} contains {bad:?}; use only a-z, 0-9, '_' and '-'"
        )));
    }
    Ok(())
}

/// Checks a user handle.
pub fn validate_user_handle(handle: &str) -> Result<(), HandleError> {
    validate_segment(handle, "handle")
}

/// Checks a handle of either kind: `user` or `user/agent`.
pub fn validate_handle(handle: &str) -> Result<(), HandleError> {
    match handle.split_once('/') {
        None => validate_user_handle(handle),
        Some((owner, name)) => {
            validate_user_handle(owner)?;
            validate_segment(name, "agent name")
        }
    }
}

/// The handle of an agent named `name` owned by `owner_handle`.
pub fn agent_handle(owner_handle: &str, name: &str) -> String {
    format!("{owner_handle}/{name}")
}

/// Whether `c` can be part of a handle (`/` joins an agent's owner and name).
pub fn is_handle_char(c: char) -> bool {
    matches!(c, 'a'..='z' | '0'..='9' | '_' | '-' | '/')
}

/// A handle's look-alike skeleton: two handles with the same skeleton are too easy to
/// confuse (`dana` and `dana_`, `rnike` and `mike`, `b0b` and `bob`), so the hub refuses
/// the second. Separators are dropped and characters that read alike in common fonts are
/// folded together.
pub fn skeleton(handle: &str) -> String {
    let mut folded = String::with_capacity(handle.len());
    for c in handle.chars() {
        match c {
            '_' | '-' => {}
            '0' => folded.push('o'),
            '1' | 'i' => folded.push('l'),
            '5' => folded.push('s'),
            other => folded.push(other),
        }
    }
    folded
        .replace("rn", "m")
        .replace("vv", "w")
        .replace("cl", "d")
}

/// The handles written as `@handle` in `text`: after each `@`, the longest run of handle
/// characters (so the match ends at a character that cannot be part of a handle). The
/// caller keeps those that name a room member. Duplicates are returned once, in order.
///
/// Linear in the text: duplicates are found with a set, so a text of thousands of `@`s
/// costs no more than reading it.
pub fn mention_candidates(text: &str) -> Vec<&str> {
    let mut seen = std::collections::HashSet::new();
    let mut found: Vec<&str> = Vec::new();
    for (at, _) in text.match_indices('@') {
        let rest = &text[at + 1..];
        let end = rest
            .char_indices()
            .find(|&(_, c)| !is_handle_char(c))
            .map_or(rest.len(), |(index, _)| index);
        let candidate = &rest[..end];
        if !candidate.is_empty() && seen.insert(candidate) {
            found.push(candidate);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_valid_handles() {
        for ok in ["da", "dana", "d4na_w-1", "0x", &"a".repeat(32)] {
            assert_eq!(validate_user_handle(ok), Ok(()), "{ok}");
        }
        assert_eq!(validate_handle("dana/writer"), Ok(()));
    }

    #[test]
    fn refuses_without_normalizing() {
        for bad in [
            "d",
            "Dana",
            "_dana",
            "-dana",
            "dana.",
            "dаna",
            "dana/../bob",
            "da na",
            "",
            &"a".repeat(33),
        ] {
            assert!(validate_user_handle(bad).is_err(), "{bad}");
        }
        for bad in ["dana/", "/writer", "dana/writer/x", "dana/../bob", "dana/W"] {
            assert!(validate_handle(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn look_alikes_share_a_skeleton() {
        for (a, b) in [
            ("dana", "dana_"),
            ("dana", "da-na"),
            ("mike", "rnike"),
            ("bob", "b0b"),
            ("will", "wi11"),
            ("dana/writer", "dana/wrlter"),
            ("owen", "ovven"),
            ("dana", "clana"),
        ] {
            assert_eq!(skeleton(a), skeleton(b), "{a} / {b}");
        }
        for (a, b) in [
            ("dana", "dane"),
            ("sam", "pam"),
            ("dana/writer", "dana/reader"),
        ] {
            assert_ne!(skeleton(a), skeleton(b), "{a} / {b}");
        }
    }

    #[test]
    fn mentions_take_the_longest_run_of_handle_characters() {
        assert_eq!(
            mention_candidates("ask @dana/reviewer, then @sam. And @dana/reviewer again"),
            vec!["dana/reviewer", "sam"]
        );
        assert_eq!(mention_candidates("@Dana @ @"), Vec::<&str>::new());
        assert_eq!(mention_candidates("(@dana)"), vec!["dana"]);
        assert_eq!(
            mention_candidates("@dana-bot is not @dana"),
            vec!["dana-bot", "dana"]
        );
        assert_eq!(mention_candidates("mail @sam's agent"), vec!["sam"]);
    }
}
