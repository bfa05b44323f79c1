-- A table's mode: 'append' (every record a row) or 'upsert' (the latest record per key
-- of each partition; README, "Upsert tables"). Fixed at creation.
ALTER TABLE mink_tables ADD COLUMN IF NOT EXISTS mode text NOT NULL DEFAULT 'append'
    CHECK (mode IN ('append', 'upsert'));

-- Upsert tables: the keys each range touches, as 16-byte hashes (pkg/upsert.Keys):
-- its file's rows in position order, then the keys whose last record in the range is a
-- tombstone. NULL for append tables. Delete files are computed from these alone.
ALTER TABLE mink_ranges ADD COLUMN IF NOT EXISTS keys bytea;
