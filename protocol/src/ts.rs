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
    let bytes = text.as_bytes();
    if bytes.len() < 20 {
        return None;
    }
    let number = |range: std::ops::Range<usize>| -> Option<i64> {
        let part = text.get(range)?;
        if part.bytes().all(|b| b.is_ascii_digit()) {
            part.parse().ok()
        } else {
            None
        }
    };
    let year = number(0..4)?;
    let month = number(5..7)?;
    let day = number(8..10)?;
    let hour = number(11..13)?;
    let minute = number(14..16)?;
    let second = number(17..19)?;
    if bytes[4] != b'-'
        || bytes[7] != b'-'
        || !matches!(bytes[10], b'T' | b't' | b' ')
        || bytes[13] != b':'
        || bytes[16] != b':'
    {
        return None;
    }
    if !(1..=12).contains(&month)
        || day < 1
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let mut rest = &text[19..];
    let mut millis = 0i64;
    if let Some(fraction) = rest.strip_prefix('.') {
        let digits = fraction.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        for (index, digit) in fraction.bytes().take(3).enumerate() {
            if !digit.is_ascii_digit() {
                break;
            }
            millis += i64::from(digit - b'0') * [100, 10, 1][index];
        }
        rest = &fraction[digits..];
    }
    let offset_minutes = match rest {
        "Z" | "z" => 0,
        _ => {
            let rb = rest.as_bytes();
            if rb.len() != 6 || !matches!(rb[0], b'+' | b'-') || rb[3] != b':' {
                return None;
            }
            let hours: i64 = rest[1..3].parse().ok()?;
            let minutes: i64 = rest[4..6].parse().ok()?;
            if hours > 23 || minutes > 59 {
                return None;
            }
            let sign = if rb[0] == b'-' { -1 } else { 1 };
            sign * (hours * 60 + minutes)
        }
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
}
