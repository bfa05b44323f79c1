-- A table indexes one incarnation of its topic: Kafka's topic id, recorded when the table
-- is created (or, for a table older than this, by its first indexer). A topic deleted and
-- created again under the same name has another id, and offsets that start over: rows
-- indexed from the old one are no longer in Kafka. topic_lost says why the table's topic
-- is no longer the one it indexed (NULL while it is); such a table is not loaded or
-- indexed until an admin resets it (AdminService.ResetTable).
ALTER TABLE mink_tables
    ADD COLUMN IF NOT EXISTS topic_id      text,
    ADD COLUMN IF NOT EXISTS topic_lost    text,
    ADD COLUMN IF NOT EXISTS topic_lost_at timestamptz;
