-- Live table loads: a file server adds the records Kafka holds beyond the committed
-- snapshot as tail data files of a load snapshot, whose metadata files (metadata JSON,
-- manifest list, manifest, under <ns>/<table>/metadata/live/) are stored here like the
-- writer's so that every file server can serve them. They are readable until
-- expires_at; the table's writer collects them after it. The writer's own metadata
-- files never expire (NULL).
ALTER TABLE mink_meta_files ADD COLUMN IF NOT EXISTS expires_at timestamptz;
CREATE INDEX IF NOT EXISTS mink_meta_files_expiring ON mink_meta_files (table_id, expires_at)
    WHERE expires_at IS NOT NULL;

-- Tail files a load can reuse: the unexpired ones of a partition from an offset on.
CREATE INDEX IF NOT EXISTS mink_data_files_expiring ON mink_data_files (table_id, partition, start_offset)
    WHERE expires_at IS NOT NULL;
