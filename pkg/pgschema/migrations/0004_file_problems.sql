-- Files a file server could not serve with their recorded bytes (the topic was compacted
-- after indexing, or Kafka deleted the offsets): reported for the writer to replace.
CREATE TABLE IF NOT EXISTS mink_file_problems (
    key         text PRIMARY KEY,
    table_id    bigint NOT NULL REFERENCES mink_tables (id) ON DELETE CASCADE,
    reason      text NOT NULL,   -- 'mismatch' | 'offsets_gone'
    detail      text NOT NULL,
    reported_by text NOT NULL,
    first_seen  timestamptz NOT NULL DEFAULT now(),
    last_seen   timestamptz NOT NULL DEFAULT now(),
    reports     bigint NOT NULL DEFAULT 1
);
CREATE INDEX IF NOT EXISTS mink_file_problems_table ON mink_file_problems (table_id);
