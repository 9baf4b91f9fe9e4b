//! Timestamps on the wire: RFC 3339 in UTC with milliseconds, `2026-11-30T09:00:00.123Z`.
//!
//! The hub writes only that form; it reads any RFC 3339 date-time (other offsets, any number
//! of fraction digits), because clients send `expires_at` and `since`. Pure arithmetic on
//! Unix milliseconds, so the crate needs no time library.

/// Formats Unix milliseconds as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn format_millis(unix_ms: i64) -> String {
    let mut out = Vec::with_capacity(24);
    write_millis(&mut out, unix_ms);
    String::from_utf8(out).expect("a timestamp is ASCII")
}

/// Appends `unix_ms` as `YYYY-MM-DDTHH:MM:SS.mmmZ` to `out`, without the formatting
/// machinery: the hub writes one into every event frame it encodes.
pub fn write_millis(out: &mut Vec<u8>, unix_ms: i64) {
    let (year, month, day, hour, minute, second, millis) = fields(unix_ms);
    if !(0..=9999).contains(&year) {
        out.extend_from_slice(
            format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}.{millis:03}Z")
                .as_bytes(),
        );
        return;
    }
    let mut text = *b"0000-00-00T00:00:00.000Z";
    for (range, value) in [
        (0..4, year),
        (5..7, month),
        (8..10, day),
        (11..13, hour),
        (14..16, minute),
        (17..19, second),
        (20..23, millis),
    ] {
        let mut value = value;
        for digit in text[range].iter_mut().rev() {
            *digit = b'0' + (value % 10) as u8;
            value /= 10;
        }
    }
    out.extend_from_slice(&text);
}

/// Year, month, day, hour, minute, second and millisecond of Unix milliseconds, in UTC.
fn fields(unix_ms: i64) -> (i64, i64, i64, i64, i64, i64, i64) {
    let days = unix_ms.div_euclid(86_400_000);
    let ms_of_day = unix_ms.rem_euclid(86_400_000);
    let (year, month, day) = civil_from_days(days);
    (
        year,
        month,
        day,
        ms_of_day / 3_600_000,
        ms_of_day / 60_000 % 60,
        ms_of_day / 1000 % 60,
        ms_of_day % 1000,
    )
}

/// Parses an RFC 3339 date-time into Unix milliseconds (fractions beyond milliseconds are
/// truncated). Returns `None` for anything else.
pub fn parse_millis(text: &str) -> Option<i64> {
    parse(text.as_bytes(), Form::Rfc3339)
}

/// As [`parse_millis`], also reading the ISO 8601 forms other programs write (agents' logs):
/// no offset (read as UTC), `±hhmm` or `±hh`, and surrounding whitespace.
pub fn parse_millis_lenient(text: &str) -> Option<i64> {
    parse(text.trim().as_bytes(), Form::Iso8601)
}

/// Which date-times a parse accepts.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    Rfc3339,
    Iso8601,
}

/// The one parser behind both: `YYYY-MM-DD`, `T` (or `t` or a space), `hh:mm:ss`, an
/// optional fraction, then the offset the form allows. A leap second reads as :59.
fn parse(bytes: &[u8], form: Form) -> Option<i64> {
    if bytes.len() < 19 {
        return None;
    }
    let number = |range: std::ops::Range<usize>| -> Option<i64> {
        let mut value = 0i64;
        for &byte in bytes.get(range)? {
            if !byte.is_ascii_digit() {
                return None;
            }
            value = value * 10 + i64::from(byte - b'0');
        }
        Some(value)
    };
    if bytes[4] != b'-'
        || bytes[7] != b'-'
        || !matches!(bytes[10], b'T' | b't' | b' ')
        || bytes[13] != b':'
        || bytes[16] != b':'
    {
        return None;
    }
    let (year, month, day) = (number(0..4)?, number(5..7)?, number(8..10)?);
    let (hour, minute, second) = (number(11..13)?, number(14..16)?, number(17..19)?);
    if !(1..=12).contains(&month)
        || day < 1
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let mut at = 19;
    let mut millis = 0i64;
    if bytes.get(at) == Some(&b'.') {
        at += 1;
        let start = at;
        while bytes.get(at).is_some_and(u8::is_ascii_digit) {
            if at - start < 3 {
                millis = millis * 10 + i64::from(bytes[at] - b'0');
            }
            at += 1;
        }
        if at == start {
            return None;
        }
        for _ in (at - start)..3 {
            millis *= 10;
        }
    }
    let rest = &bytes[at..];
    let offset_minutes = match (rest, form) {
        ([b'Z' | b'z'], _) => 0,
        ([], Form::Iso8601) => 0,
        ([sign @ (b'+' | b'-'), ..], _) => {
            let (hours, minutes) = match (rest.len(), form) {
                (6, _) if rest[3] == b':' => (number(at + 1..at + 3)?, number(at + 4..at + 6)?),
                (5, Form::Iso8601) => (number(at + 1..at + 3)?, number(at + 3..at + 5)?),
                (3, Form::Iso8601) => (number(at + 1..at + 3)?, 0),
                _ => return None,
            };
            if hours > 23 || minutes > 59 {
                return None;
            }
            let offset = hours * 60 + minutes;
            if *sign == b'-' { -offset } else { offset }
        }
        _ => return None,
    };
    let days = days_from_civil(year, month, day);
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second.min(59) - offset_minutes * 60;
    Some(seconds * 1000 + millis)
}

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if is_leap(year) => 29,
        _ => 28,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month_index = (month + 9) % 12;
    let day_of_year = (153 * month_index + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn formats_known_instants() {
        assert_eq!(format_millis(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(format_millis(1_796_115_600_123), "2026-12-01T09:00:00.123Z");
        assert_eq!(format_millis(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(format_millis(-1), "1969-12-31T23:59:59.999Z");
    }

    #[test]
    fn parses_offsets_and_fractions() {
        assert_eq!(
            parse_millis("2026-12-01T09:00:00.123Z"),
            Some(1_796_115_600_123)
        );
        assert_eq!(
            parse_millis("2026-12-01T10:00:00.123+01:00"),
            Some(1_796_115_600_123)
        );
        assert_eq!(
            parse_millis("2026-12-01T09:00:00.123456789Z"),
            Some(1_796_115_600_123)
        );
        assert_eq!(
            parse_millis("2026-12-01T09:00:00Z"),
            Some(1_796_115_600_000)
        );
        assert_eq!(
            parse_millis("2026-12-01T09:00:00.5Z"),
            Some(1_796_115_600_500)
        );
    }

    #[test]
    fn rejects_what_is_not_rfc3339() {
        for bad in [
            "",
            "yesterday",
            "2026-13-01T00:00:00Z",
            "2026-02-30T00:00:00Z",
            "2026-12-01 09:00",
            "2026-12-01T09:00:00",
            "2026-12-01T09:00:00.Z",
            "2026-12-01T09:00:00+1:00",
            "2026-12-01T25:00:00Z",
            "２026-12-01T09:00:00Z",
        ] {
            assert_eq!(parse_millis(bad), None, "{bad:?}");
        }
    }

    proptest! {
        #[test]
        fn format_then_parse_is_identity(ms in -62_135_596_800_000i64..253_402_300_799_999i64) {
            prop_assert_eq!(parse_millis(&format_millis(ms)), Some(ms));
        }

        #[test]
        fn the_digit_writer_agrees_with_the_formatter(ms in any::<i64>().prop_map(|ms| ms / 1000)) {
            let (year, month, day, hour, minute, second, millis) = fields(ms);
            let expected = format!(
                "{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}.{millis:03}Z"
            );
            let mut out = b"prefix ".to_vec();
            write_millis(&mut out, ms);
            prop_assert_eq!(out, format!("prefix {expected}").into_bytes());
        }
    }

    #[test]
    fn the_lenient_form_reads_what_agents_logs_write_and_the_strict_one_does_not() {
        let cases = [
            ("2026-02-23T12:19:42.561Z", Some(1_771_849_182_561), true),
            ("2026-02-23T12:19:42Z", Some(1_771_849_182_000), true),
            ("2026-02-23T12:19:42.5Z", Some(1_771_849_182_500), true),
            ("2026-02-23T12:19:42.561234Z", Some(1_771_849_182_561), true),
            (
                "2026-02-23T13:19:42.561+01:00",
                Some(1_771_849_182_561),
                true,
            ),
            (
                "2026-02-23T11:19:42.561-0100",
                Some(1_771_849_182_561),
                false,
            ),
            ("2026-02-23T13:19:42.561+01", Some(1_771_849_182_561), false),
            ("2026-02-23 12:19:42.561", Some(1_771_849_182_561), false),
            (
                " 2026-02-23T12:19:42.561Z\n",
                Some(1_771_849_182_561),
                false,
            ),
            ("1970-01-01T00:00:00Z", Some(0), true),
            ("1969-12-31T23:59:59Z", Some(-1_000), true),
            ("2000-02-29T00:00:00Z", Some(951_782_400_000), true),
            ("2026-02-29T00:00:00Z", None, true),
            ("2026-13-01T00:00:00Z", None, true),
            ("2026-02-23T12:19", None, true),
            ("2026-02-23T12:19:42.Z", None, true),
            ("2026-02-23T12:19:42Zjunk", None, true),
            ("2026-02-23T12:19:42+24:00", None, true),
            ("not a time at all", None, true),
            ("", None, true),
        ];
        for (text, lenient, strict_too) in cases {
            assert_eq!(parse_millis_lenient(text), lenient, "lenient {text:?}");
            let strict = if strict_too { lenient } else { None };
            assert_eq!(parse_millis(text), strict, "strict {text:?}");
        }
    }
}
