//! SQLite's rows as [`Columns`]: the decoders and column lists are every backend's
//! (`store::rows`). SQLite keeps an event's mentions as space-separated text and a ping's
//! recipients as a JSON array.

use super::*;
pub(super) use crate::store::rows::*;

/// Every row of `rows`, decoded.
pub(super) fn decode_all<'s, T>(
    mut rows: rusqlite::Rows<'s>,
    decode: impl Fn(&rusqlite::Row<'s>) -> Result<T, StoreError>,
) -> Result<Vec<T>, StoreError> {
    let mut decoded = Vec::new();
    while let Some(row) = rows.next()? {
        decoded.push(decode(row)?);
    }
    Ok(decoded)
}

impl Columns for rusqlite::Row<'_> {
    fn text(&self, at: usize) -> Result<String, StoreError> {
        Ok(self.get(at)?)
    }

    fn optional_text(&self, at: usize) -> Result<Option<String>, StoreError> {
        Ok(self.get(at)?)
    }

    fn integer(&self, at: usize) -> Result<i64, StoreError> {
        Ok(self.get(at)?)
    }

    fn optional_integer(&self, at: usize) -> Result<Option<i64>, StoreError> {
        Ok(self.get(at)?)
    }

    fn bytes(&self, at: usize) -> Result<Vec<u8>, StoreError> {
        Ok(self.get(at)?)
    }

    fn flag(&self, at: usize) -> Result<bool, StoreError> {
        Ok(self.get(at)?)
    }

    fn mentions(&self, at: usize) -> Result<Vec<String>, StoreError> {
        let text: Option<String> = self.get(at)?;
        Ok(text
            .map(|text| text.split(' ').map(str::to_owned).collect())
            .unwrap_or_default())
    }

    fn recipients(&self, at: usize) -> Result<Vec<String>, StoreError> {
        let text: String = self.get(at)?;
        serde_json::from_str(&text).map_err(|error| StoreError::Corrupt {
            table: "pings",
            detail: error.to_string(),
        })
    }
}
