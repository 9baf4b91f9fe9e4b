//! Lenient values: each reads any JSON value, keeps it when it has the expected kind and
//! reads anything else as absent. Unwanted arrays and objects are skipped with `IgnoredAny`,
//! which does not recurse.

use super::*;

/// A string (borrowed from the line when it has no escapes); a number is kept as its text
/// (ids are sometimes numbers).
#[derive(Default)]
pub(super) struct Text<'a>(pub(super) Option<Cow<'a, str>>);

impl Text<'_> {
    pub(super) fn as_str(&self) -> Option<&str> {
        self.0.as_deref()
    }
}

/// A boolean.
#[derive(Default)]
pub(super) struct Flag(pub(super) Option<bool>);

/// A token count: a non-negative integer (a negative or fractional one is clamped).
#[derive(Default, Clone, Copy)]
pub(super) struct Count(pub(super) u64);

/// An object read as `T`, or `None` when the value is not an object.
pub(super) struct Object<T>(pub(super) Option<T>);

impl<T> Default for Object<T> {
    fn default() -> Self {
        Object(None)
    }
}

/// A value kind read leniently: each method turns one JSON kind into the value, the
/// default ones read it as absent.
pub(super) trait Lenient<'de>: Default {
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

    fn from_seq<A: SeqAccess<'de>>(mut seq: A) -> Result<Self, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Self::default())
    }

    fn from_map<A: MapAccess<'de>>(mut map: A) -> Result<Self, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Self::default())
    }
}

pub(super) struct LenientVisitor<T>(pub(super) PhantomData<T>);

impl<'de, T: Lenient<'de>> Visitor<'de> for LenientVisitor<T> {
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

/// Implements `Deserialize` for a lenient type through its `Lenient` methods.
macro_rules! deserialize_leniently {
    ($type:ident<$lifetime:lifetime>) => {
        impl<'de: $lifetime, $lifetime> Deserialize<'de> for $type<$lifetime> {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                deserializer.deserialize_any(LenientVisitor(PhantomData))
            }
        }
    };
    ($type:ty) => {
        impl<'de> Deserialize<'de> for $type {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                deserializer.deserialize_any(LenientVisitor(PhantomData))
            }
        }
    };
}

impl<'de: 'a, 'a> Lenient<'de> for Text<'a> {
    fn from_u64(value: u64) -> Self {
        Text(Some(Cow::Owned(value.to_string())))
    }

    fn from_i64(value: i64) -> Self {
        Text(Some(Cow::Owned(value.to_string())))
    }

    fn from_str(value: &str) -> Self {
        Text(Some(Cow::Owned(value.to_owned())))
    }

    fn from_borrowed_str(value: &'de str) -> Self {
        Text(Some(Cow::Borrowed(value)))
    }
}
deserialize_leniently!(Text<'a>);

impl Lenient<'_> for Flag {
    fn from_bool(value: bool) -> Self {
        Flag(Some(value))
    }
}
deserialize_leniently!(Flag);

impl Lenient<'_> for Count {
    fn from_u64(value: u64) -> Self {
        Count(value)
    }

    fn from_f64(value: f64) -> Self {
        // `as` saturates, and reads NaN as 0.
        Count(value as u64)
    }
}
deserialize_leniently!(Count);

impl Lenient<'_> for BlockKind {
    fn from_str(value: &str) -> Self {
        match value {
            "tool_use" => BlockKind::ToolUse,
            "tool_result" => BlockKind::ToolResult,
            _ => BlockKind::Other,
        }
    }
}
deserialize_leniently!(BlockKind);

impl<'de, T: Deserialize<'de>> Lenient<'de> for Object<T> {
    fn from_map<A: MapAccess<'de>>(map: A) -> Result<Self, A::Error> {
        T::deserialize(MapAccessDeserializer::new(map)).map(|value| Object(Some(value)))
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Object<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(LenientVisitor(PhantomData))
    }
}

impl<'de: 'a, 'a> Lenient<'de> for Blocks<'a> {
    fn from_seq<A: SeqAccess<'de>>(mut seq: A) -> Result<Self, A::Error> {
        let mut blocks = Vec::new();
        while let Some(block) = seq.next_element::<Object<Block<'a>>>()? {
            if let Some(block) = block.0.filter(|block| block.kind != BlockKind::Other) {
                blocks.push(block);
            }
        }
        Ok(Blocks(blocks))
    }
}
deserialize_leniently!(Blocks<'a>);

impl<'de: 'a, 'a> Lenient<'de> for Iterations<'a> {
    fn from_seq<A: SeqAccess<'de>>(mut seq: A) -> Result<Self, A::Error> {
        let mut iterations = Vec::new();
        while let Some(iteration) = seq.next_element::<Object<Iteration<'a>>>()? {
            iterations.extend(iteration.0);
        }
        Ok(Iterations(iterations))
    }
}
deserialize_leniently!(Iterations<'a>);

impl<'de> Deserialize<'de> for CreatedTask {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // A result's content is mostly long text (a file, a command's output): it is
        // skipped as raw JSON, never unescaped, unless it may say `Task #N created`.
        let raw = <&'de serde_json::value::RawValue>::deserialize(deserializer)?;
        if memchr::memmem::find(raw.get().as_bytes(), b"Task #").is_none() {
            return Ok(CreatedTask(None));
        }
        Ok(serde_json::from_str::<CreatedTaskText>(raw.get())
            .map(|text| text.0)
            .unwrap_or_default())
    }
}

/// A result's content that may hold a created task's id, read leniently.
#[derive(Default)]
pub(super) struct CreatedTaskText(pub(super) CreatedTask);

impl<'de> Lenient<'de> for CreatedTaskText {
    fn from_str(value: &str) -> Self {
        CreatedTaskText(CreatedTask(created_task_id(value)))
    }

    fn from_seq<A: SeqAccess<'de>>(mut seq: A) -> Result<Self, A::Error> {
        let mut found = None;
        while let Some(block) = seq.next_element::<Object<ResultText>>()? {
            if found.is_none() {
                found = block.0.and_then(|block| block.text.0.0);
            }
        }
        Ok(CreatedTaskText(CreatedTask(found)))
    }
}
deserialize_leniently!(CreatedTaskText);

impl<'de: 'a, 'a> Lenient<'de> for Todos<'a> {
    fn from_seq<A: SeqAccess<'de>>(mut seq: A) -> Result<Self, A::Error> {
        let mut todos = Vec::new();
        while let Some(todo) = seq.next_element::<Object<Todo<'a>>>()? {
            todos.extend(todo.0);
        }
        Ok(Todos(Some(todos)))
    }
}
deserialize_leniently!(Todos<'a>);

impl<'de: 'a, 'a> Lenient<'de> for ToolUseResult<'a> {
    fn from_str(value: &str) -> Self {
        ToolUseResult {
            error_text: is_error_text(value),
            ..ToolUseResult::default()
        }
    }

    fn from_map<A: MapAccess<'de>>(map: A) -> Result<Self, A::Error> {
        let object = ToolUseResultObject::deserialize(MapAccessDeserializer::new(map))?;
        Ok(ToolUseResult {
            error_text: false,
            success: object.success.0,
            task_id: object.task.0.map(|task| task.id).unwrap_or_default(),
        })
    }
}
deserialize_leniently!(ToolUseResult<'a>);
