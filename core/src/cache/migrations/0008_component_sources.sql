-- Where a component's definition came from: NULL when a person or an agent wrote it, else
-- what it was inferred from (`Cargo workspace`…). Written components override inferred ones.
ALTER TABLE components ADD COLUMN source TEXT;
