-- A table's mode: 'append' (every record a row) or 'upsert' (the latest record per key
-- of each partition; README, "Upsert tables"). Fixed at creation.
ALTER TABLE mink_tables ADD COLUMN IF NOT EXISTS mode text NOT NULL DEFAULT 'append'
    CHECK (mode IN ('append', 'upsert'));

-- Upsert tables: the keys each range touches, as 16-byte hashes (pkg/upsert.Keys):
-- its file's rows in position order, then the keys whose last record in the range is a
-- tombstone. NULL for append tables. Delete files are computed from these alone.
ALTER TABLE mink_ranges ADD COLUMN IF NOT EXISTS keys bytea;

-- Position delete files of upsert tables are rows here too, built on demand like data
-- files (from the index alone, no Kafka read): deletes_of names the data file whose rows
-- they delete (partition, start_offset and end_offset are that file's), cover_end the
-- partition's coverage end they were computed at. NULL for data files.
ALTER TABLE mink_data_files
    ADD COLUMN IF NOT EXISTS deletes_of text,
    ADD COLUMN IF NOT EXISTS cover_end  bigint;
