//! PostgreSQL's rows as [`Columns`]: the decoders and column lists are every backend's
//! (`store::rows`). PostgreSQL keeps mentions and recipients as `text[]`.

use super::*;
pub(super) use crate::store::rows::*;

impl Columns for Row {
    fn text(&self, at: usize) -> Result<String, StoreError> {
        Ok(self.try_get(at)?)
    }

    fn optional_text(&self, at: usize) -> Result<Option<String>, StoreError> {
        Ok(self.try_get(at)?)
    }

    fn integer(&self, at: usize) -> Result<i64, StoreError> {
        Ok(self.try_get(at)?)
    }

    fn optional_integer(&self, at: usize) -> Result<Option<i64>, StoreError> {
        Ok(self.try_get(at)?)
    }

    fn bytes(&self, at: usize) -> Result<Vec<u8>, StoreError> {
        Ok(self.try_get(at)?)
    }

    fn flag(&self, at: usize) -> Result<bool, StoreError> {
        Ok(self.try_get(at)?)
    }

    fn mentions(&self, at: usize) -> Result<Vec<String>, StoreError> {
        Ok(self.try_get(at)?)
    }

    fn recipients(&self, at: usize) -> Result<Vec<String>, StoreError> {
        Ok(self.try_get(at)?)
    }
}
