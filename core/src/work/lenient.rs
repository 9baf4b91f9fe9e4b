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

/// A kind of value read leniently: each `from_*` turns one JSON kind into the value; those a
/// kind does not override read as absent (its `Default`). One visitor ([`LenientVisitor`])
/// serves every kind, so a parser's own lenient types (Claude's content blocks, a tool's
/// result) are a few `from_*` methods and [`deserialize_leniently!`].
pub trait LenientValue<'de>: Default {
    fn from_bool(_value: bool) -> Self {
        Self::default()
    }

    fn from_u64(_value: u64) -> Self {
        Self::default()
    }

    fn from_i64(value: i64) -> Self {
        u64::try_from(value).map_or_else(|_| Self::default(), Self::from_u64)
    }

    fn from_f64(_value: f64) -> Self {
        Self::default()
    }

    /// A string that lives only for the call (it had escapes).
    fn from_str(_value: &str) -> Self {
        Self::default()
    }

    /// A string borrowed from the line.
    fn from_borrowed_str(value: &'de str) -> Self {
        Self::from_str(value)
    }

    fn from_seq<A: SeqAccess<'de>>(seq: A) -> Result<Self, A::Error> {
        drain_seq(seq)?;
        Ok(Self::default())
    }

    fn from_map<A: MapAccess<'de>>(map: A) -> Result<Self, A::Error> {
        drain_map(map)?;
        Ok(Self::default())
    }
}

/// The visitor of every [`LenientValue`]: any JSON value is accepted and handed to the
/// kind's `from_*` method.
pub struct LenientVisitor<T>(pub PhantomData<T>);

impl<'de, T: LenientValue<'de>> Visitor<'de> for LenientVisitor<T> {
    type Value = T;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_bool<E>(self, value: bool) -> Result<T, E> {
        Ok(T::from_bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<T, E> {
        Ok(T::from_i64(value))
    }

    fn visit_u64<E>(self, value: u64) -> Result<T, E> {
        Ok(T::from_u64(value))
    }

    fn visit_f64<E>(self, value: f64) -> Result<T, E> {
        Ok(T::from_f64(value))
    }

    fn visit_str<E>(self, value: &str) -> Result<T, E> {
        Ok(T::from_str(value))
    }

    fn visit_borrowed_str<E>(self, value: &'de str) -> Result<T, E> {
        Ok(T::from_borrowed_str(value))
    }

    fn visit_bytes<E>(self, _value: &[u8]) -> Result<T, E> {
        Ok(T::default())
    }

    fn visit_unit<E>(self) -> Result<T, E> {
        Ok(T::default())
    }

    fn visit_none<E>(self) -> Result<T, E> {
        Ok(T::default())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<T, A::Error> {
        T::from_seq(seq)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
        T::from_map(map)
    }
}

/// Implements `Deserialize` for a [`LenientValue`] through [`LenientVisitor`]:
/// `deserialize_leniently!(Kind)`, or `deserialize_leniently!(Kind<'a>)` for a kind that
/// borrows from the line.
macro_rules! deserialize_leniently {
    ($type:ident<$lifetime:lifetime>) => {
        impl<'de: $lifetime, $lifetime> serde::Deserialize<'de> for $type<$lifetime> {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                deserializer.deserialize_any($crate::work::lenient::LenientVisitor(
                    std::marker::PhantomData,
                ))
            }
        }
    };
    ($type:ty) => {
        impl<'de> serde::Deserialize<'de> for $type {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                deserializer.deserialize_any($crate::work::lenient::LenientVisitor(
                    std::marker::PhantomData,
                ))
            }
        }
    };
}
pub(crate) use deserialize_leniently;

/// A JSON string, or `None` when the value is of another kind (or null). A number is kept as
/// its text: ids are sometimes written as numbers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LenientStr<'a>(pub Option<Cow<'a, str>>);

impl<'a> LenientStr<'a> {
    /// The string, empty or not.
    pub fn as_str(&self) -> Option<&str> {
        self.0.as_deref()
    }

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

impl<'de: 'a, 'a> LenientValue<'de> for LenientStr<'a> {
    fn from_u64(value: u64) -> Self {
        LenientStr(Some(Cow::Owned(value.to_string())))
    }

    fn from_i64(value: i64) -> Self {
        LenientStr(Some(Cow::Owned(value.to_string())))
    }

    fn from_str(value: &str) -> Self {
        LenientStr(Some(Cow::Owned(value.to_owned())))
    }

    fn from_borrowed_str(value: &'de str) -> Self {
        LenientStr(Some(Cow::Borrowed(value)))
    }
}
deserialize_leniently!(LenientStr<'a>);

/// A JSON number as a count (negative counts as 0, a fraction is cut), or `None` when the
/// value is not a number.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LenientCount(pub Option<u64>);

impl LenientCount {
    pub fn get(self) -> u64 {
        self.0.unwrap_or(0)
    }
}

impl LenientValue<'_> for LenientCount {
    fn from_u64(value: u64) -> Self {
        LenientCount(Some(value))
    }

    fn from_i64(value: i64) -> Self {
        LenientCount(Some(u64::try_from(value).unwrap_or(0)))
    }

    fn from_f64(value: f64) -> Self {
        // `as` saturates: a huge float reads as u64::MAX.
        LenientCount(value.is_finite().then(|| value.max(0.0) as u64))
    }
}
deserialize_leniently!(LenientCount);

/// A JSON integer that may be negative (an exit code), or `None`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LenientInt(pub Option<i64>);

impl LenientValue<'_> for LenientInt {
    fn from_u64(value: u64) -> Self {
        LenientInt(Some(i64::try_from(value).unwrap_or(i64::MAX)))
    }

    fn from_i64(value: i64) -> Self {
        LenientInt(Some(value))
    }

    fn from_f64(value: f64) -> Self {
        LenientInt(value.is_finite().then_some(value as i64))
    }
}
deserialize_leniently!(LenientInt);

/// A JSON boolean, or `None`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LenientBool(pub Option<bool>);

impl LenientValue<'_> for LenientBool {
    fn from_bool(value: bool) -> Self {
        LenientBool(Some(value))
    }
}
deserialize_leniently!(LenientBool);

/// A JSON object read as `T`, or `None` when the value is not an object. `T`'s own fields
/// should be lenient too: a field of `T` that fails still fails the line.
#[derive(Debug, Clone, PartialEq)]
pub struct Lenient<T>(pub Option<T>);

impl<T> Default for Lenient<T> {
    fn default() -> Self {
        Lenient(None)
    }
}

impl<'de, T: Deserialize<'de>> LenientValue<'de> for Lenient<T> {
    fn from_map<A: MapAccess<'de>>(map: A) -> Result<Self, A::Error> {
        T::deserialize(de::value::MapAccessDeserializer::new(map)).map(|value| Lenient(Some(value)))
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Lenient<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(LenientVisitor(PhantomData))
    }
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

impl<'de, T: Deserialize<'de>> LenientValue<'de> for LenientList<T> {
    fn from_seq<A: SeqAccess<'de>>(mut seq: A) -> Result<Self, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Lenient<T>>()? {
            items.extend(item.0);
        }
        Ok(LenientList(items))
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for LenientList<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(LenientVisitor(PhantomData))
    }
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
    fn values_of_another_kind_read_as_absent_and_numbers_as_text() {
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
        // An id written as a number is kept as its text.
        let probe: Probe<'_> = serde_json::from_str(r#"{"text":42}"#).unwrap();
        assert_eq!(probe.text.as_str(), Some("42"));
    }
}
