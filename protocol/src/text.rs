//! Rules for the short texts people read to tell who or what they are dealing with: display
//! names, room titles and topics, agent descriptions.
//!
//! Unicode format characters (general category Cf) render as nothing or reorder what
//! follows: a right-to-left override (U+202E) shows the rest of a name reversed, so it reads
//! as something it is not, and a zero-width space makes two names that look the same compare
//! different. Such texts
//! are refused (`bad_frame`), never silently cleaned, so what a person typed is what
//! everyone else sees. Message text is not subject to this: it is prose, where these
//! characters have legitimate uses.

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
}
