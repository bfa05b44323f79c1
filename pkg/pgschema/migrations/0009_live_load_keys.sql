-- Live loads that read, not write: a load snapshot's metadata JSON row names what it was
-- made of, so that loads of the same tail share it across file servers, and loads of a
-- moving tail reuse the newest one for a short while (mink.live.reuse-ms).
--   load_key:     hash of (table, committed metadata, settings, tail spans): a content key
--   load_stream:  hash of (table, committed metadata, settings): the loads it may stand for
--   load_read_at: database time taken before Kafka's offsets were read for it
-- The other metadata files of a load, and the writer's, leave them NULL.
ALTER TABLE mink_meta_files ADD COLUMN IF NOT EXISTS load_key text;
ALTER TABLE mink_meta_files ADD COLUMN IF NOT EXISTS load_stream text;
ALTER TABLE mink_meta_files ADD COLUMN IF NOT EXISTS load_read_at timestamptz;
CREATE UNIQUE INDEX IF NOT EXISTS mink_meta_files_load_key ON mink_meta_files (table_id, load_key)
    WHERE load_key IS NOT NULL;
CREATE INDEX IF NOT EXISTS mink_meta_files_load_stream ON mink_meta_files (table_id, load_stream, load_read_at)
    WHERE load_stream IS NOT NULL;
