//! Reading agents' JSON without trusting it. An agent's log is written by another program,
//! in a format that changes under us: a value of an unexpected type reads as absent instead
//! of failing the line, so one odd field never hides the rest of a record. Also here: ISO-8601
//! timestamps and UUIDv7 times, which every log parser needs.
//!
//! Strings are borrowed from the line when they have no escapes ([`Cow::Borrowed`]); values
//! a parser does not name are skipped by serde (`IgnoredAny`), which costs a scan and no
//! allocation.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// The `visit_*` methods of a lenient visitor for scalars other than strings: each makes
/// `$absent`.
macro_rules! other_scalars_are_absent {
    ($absent:expr) => {
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok($absent)
        }

        fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok($absent)
        }

        fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok($absent)
        }

        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok($absent)
        }

        fn visit_bytes<E: de::Error>(self, _: &[u8]) -> Result<Self::Value, E> {
            Ok($absent)
        }

        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok($absent)
        }

        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok($absent)
        }
    };
}
pub(crate) use other_scalars_are_absent;

/// A JSON string, or `None` when the value is of another type (or null).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LenientStr<'a>(pub Option<Cow<'a, str>>);

impl<'a> LenientStr<'a> {
    /// The string, if it is one and not empty.
    pub fn non_empty(&self) -> Option<&str> {
        self.0.as_deref().filter(|text| !text.is_empty())
    }

    pub fn is(&self, expected: &str) -> bool {
        self.0.as_deref() == Some(expected)
    }

    pub fn into_owned(self) -> Option<String> {
        self.0.filter(|text| !text.is_empty()).map(Cow::into_owned)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for LenientStr<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(LenientStrVisitor)
    }
}

struct LenientStrVisitor;

impl<'de> Visitor<'de> for LenientStrVisitor {
    type Value = LenientStr<'de>;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_borrowed_str<E: de::Error>(self, value: &'de str) -> Result<Self::Value, E> {
        Ok(LenientStr(Some(Cow::Borrowed(value))))
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<Self::Value, E> {
        Ok(LenientStr(Some(Cow::Owned(value.to_owned()))))
    }

    fn visit_string<E: de::Error>(self, value: String) -> Result<Self::Value, E> {
        Ok(LenientStr(Some(Cow::Owned(value))))
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        LenientStr::deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        drain_seq(seq)?;
        Ok(LenientStr(None))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        drain_map(map)?;
        Ok(LenientStr(None))
    }

    other_scalars_are_absent!(LenientStr(None));
}

/// A JSON number as a count (negative counts as 0, a fraction is cut), or `None` when the
/// value is not a number.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LenientCount(pub Option<u64>);

impl LenientCount {
    pub fn get(self) -> u64 {
        self.0.unwrap_or(0)
    }
}

impl<'de> Deserialize<'de> for LenientCount {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(LenientCountVisitor)
    }
}

struct LenientCountVisitor;

impl<'de> Visitor<'de> for LenientCountVisitor {
    type Value = LenientCount;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<Self::Value, E> {
        Ok(LenientCount(Some(value)))
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<Self::Value, E> {
        Ok(LenientCount(Some(u64::try_from(value).unwrap_or(0))))
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Self::Value, E> {
        // `as` saturates: a huge float reads as u64::MAX, NaN as 0.
        Ok(LenientCount(
            value.is_finite().then(|| value.max(0.0) as u64),
        ))
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        LenientCount::deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        drain_seq(seq)?;
        Ok(LenientCount(None))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        drain_map(map)?;
        Ok(LenientCount(None))
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(LenientCount(None))
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Ok(LenientCount(None))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(LenientCount(None))
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(LenientCount(None))
    }
}

/// A JSON integer that may be negative (an exit code), or `None`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LenientInt(pub Option<i64>);

impl<'de> Deserialize<'de> for LenientInt {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(LenientIntVisitor)
    }
}

struct LenientIntVisitor;

impl<'de> Visitor<'de> for LenientIntVisitor {
    type Value = LenientInt;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<Self::Value, E> {
        Ok(LenientInt(Some(i64::try_from(value).unwrap_or(i64::MAX))))
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<Self::Value, E> {
        Ok(LenientInt(Some(value)))
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Self::Value, E> {
        Ok(LenientInt(value.is_finite().then_some(value as i64)))
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        LenientInt::deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        drain_seq(seq)?;
        Ok(LenientInt(None))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        drain_map(map)?;
        Ok(LenientInt(None))
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(LenientInt(None))
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Ok(LenientInt(None))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(LenientInt(None))
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(LenientInt(None))
    }
}

/// A JSON boolean, or `None`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LenientBool(pub Option<bool>);

impl<'de> Deserialize<'de> for LenientBool {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(LenientBoolVisitor)
    }
}

struct LenientBoolVisitor;

impl<'de> Visitor<'de> for LenientBoolVisitor {
    type Value = LenientBool;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, value: bool) -> Result<Self::Value, E> {
        Ok(LenientBool(Some(value)))
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        LenientBool::deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        drain_seq(seq)?;
        Ok(LenientBool(None))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        drain_map(map)?;
        Ok(LenientBool(None))
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Ok(LenientBool(None))
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(LenientBool(None))
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(LenientBool(None))
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(LenientBool(None))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(LenientBool(None))
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(LenientBool(None))
    }
}

/// A JSON object read as `T`, or `None` when the value is not an object. `T`'s own fields
/// should be lenient too: a field of `T` that fails still fails the line.
#[derive(Debug, Clone, PartialEq)]
pub struct Lenient<T>(pub Option<T>);

impl<T> Default for Lenient<T> {
    fn default() -> Self {
        Lenient(None)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Lenient<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(LenientVisitor(PhantomData))
    }
}

struct LenientVisitor<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for LenientVisitor<T> {
    type Value = Lenient<T>;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        T::deserialize(de::value::MapAccessDeserializer::new(map)).map(|value| Lenient(Some(value)))
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        Lenient::deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        drain_seq(seq)?;
        Ok(Lenient(None))
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Ok(Lenient(None))
    }

    other_scalars_are_absent!(Lenient(None));
}

/// A JSON array of objects read as `T`, its other elements left out; empty when the value is
/// not an array.
#[derive(Debug, Clone, PartialEq)]
pub struct LenientList<T>(pub Vec<T>);

impl<T> Default for LenientList<T> {
    fn default() -> Self {
        LenientList(Vec::new())
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for LenientList<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(LenientListVisitor(PhantomData))
    }
}

struct LenientListVisitor<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for LenientListVisitor<T> {
    type Value = LenientList<T>;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Lenient<T>>()? {
            items.extend(item.0);
        }
        Ok(LenientList(items))
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        LenientList::deserialize(deserializer)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        drain_map(map)?;
        Ok(LenientList(Vec::new()))
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Ok(LenientList(Vec::new()))
    }

    other_scalars_are_absent!(LenientList(Vec::new()));
}

pub fn drain_seq<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<(), A::Error> {
    while seq.next_element::<IgnoredAny>()?.is_some() {}
    Ok(())
}

pub fn drain_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<(), A::Error> {
    while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
    Ok(())
}

/// Whether `bytes`, after leading whitespace, open a JSON object. A line must be an object
/// to be a record: serde would also read a struct from an array.
pub fn opens_object(bytes: &[u8]) -> bool {
    bytes
        .iter()
        .find(|byte| !matches!(byte, b' ' | b'\t' | b'\r' | b'\n'))
        .is_some_and(|&byte| byte == b'{')
}

/// Whether `text` is one JSON object (any content): what a line must be to count as read
/// when the typed reading failed. Nesting of any depth is skipped without recursion.
pub fn is_json_object(text: &str) -> bool {
    opens_object(text.as_bytes()) && serde_json::from_str::<IgnoredAny>(text).is_ok()
}

/// Milliseconds since the Unix epoch of an ISO-8601 / RFC 3339 timestamp:
/// `2026-02-23T12:19:42.561Z`, with any number of fraction digits, `Z`, `±hh:mm`, `±hhmm`
/// or no offset (read as UTC), `T` or a space between date and time (the one parser of
/// `roundtable_protocol::ts`, in its lenient form).
pub fn timestamp_ms(text: &str) -> Option<i64> {
    roundtable_protocol::ts::parse_millis_lenient(text)
}

/// Whether `text` is a UUID in its usual form (`8-4-4-4-12` hex digits).
pub fn is_uuid(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() == 36
        && bytes.iter().enumerate().all(|(index, byte)| match index {
            8 | 13 | 18 | 23 => *byte == b'-',
            _ => byte.is_ascii_hexdigit(),
        })
}

/// The creation time (ms since the epoch) of a UUIDv7, or `None` for another id. Codex
/// mints thread and turn ids as UUIDv7, so an id tells when it was made.
pub fn uuid_v7_ms(text: &str) -> Option<u64> {
    if !is_uuid(text) || text.as_bytes()[14] != b'7' {
        return None;
    }
    let hex: String = text[0..8].chars().chain(text[9..13].chars()).collect();
    u64::from_str_radix(&hex, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_uuid_v7_tells_when_it_was_made() {
        assert_eq!(
            uuid_v7_ms("019c8a4d-8f45-7010-8b5d-7fad920aa6f9"),
            Some(0x019c_8a4d_8f45)
        );
        assert_eq!(uuid_v7_ms("5c0375b4-1234-4abc-8def-0123456789ab"), None);
        assert_eq!(uuid_v7_ms("019c8a4d-8f45-7010-8b5d"), None);
        assert_eq!(uuid_v7_ms("019c8a4d-8f45-7010-8b5d-7fad920aa6fz"), None);
    }

    #[test]
    fn values_of_another_type_read_as_absent() {
        #[derive(serde::Deserialize, Default)]
        #[serde(default)]
        struct Probe<'a> {
            #[serde(borrow)]
            text: LenientStr<'a>,
            count: LenientCount,
            flag: LenientBool,
            code: LenientInt,
            nested: Lenient<Inner>,
            list: LenientList<Inner>,
        }
        #[derive(serde::Deserialize, Default)]
        #[serde(default)]
        struct Inner {
            count: LenientCount,
        }
        let probe: Probe<'_> = serde_json::from_str(
            r#"{"text":{"a":[1,2]},"count":"12","flag":1,"code":[],"nested":"x","list":{"a":1}}"#,
        )
        .unwrap();
        assert_eq!(probe.text.0, None);
        assert_eq!(probe.count.0, None);
        assert_eq!(probe.flag.0, None);
        assert_eq!(probe.code.0, None);
        assert!(probe.nested.0.is_none());
        assert!(probe.list.0.is_empty());
        let probe: Probe<'_> = serde_json::from_str(
            r#"{"text":"plain","count":-3,"flag":true,"code":-1,"nested":{"count":2.9},"list":[{"count":1},7,{"count":null}]}"#,
        )
        .unwrap();
        assert!(matches!(probe.text.0, Some(Cow::Borrowed("plain"))));
        assert_eq!(probe.count.0, Some(0));
        assert_eq!(probe.flag.0, Some(true));
        assert_eq!(probe.code.0, Some(-1));
        assert_eq!(probe.nested.0.map(|inner| inner.count.0), Some(Some(2)));
        assert_eq!(
            probe
                .list
                .0
                .iter()
                .map(|inner| inner.count.0)
                .collect::<Vec<_>>(),
            [Some(1), None]
        );
    }
}
