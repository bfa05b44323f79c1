-- Where schema changes take effect: per partition, the offset from which records decode
-- with a decoding (the table's schema version and, in latest mode, the registry ids of
-- the value and the key) until the next point. Every build of a record (the indexer's
-- measuring build, a live tail file, a rebuild from its recorded settings) decodes it with
-- the decoding in force at its offset, so a row reads the same in every file that holds
-- it. A point is added past every record a build has decoded already (pkg/schemapoints);
-- a partition gets its first, at offset 0, when a build first needs one.
CREATE TABLE IF NOT EXISTS mink_version_points (
    table_id        bigint NOT NULL,
    partition       int    NOT NULL,
    from_offset     bigint NOT NULL CHECK (from_offset >= 0),
    version         int    NOT NULL CHECK (version >= 0),
    value_schema_id int    NOT NULL DEFAULT 0,
    key_schema_id   int    NOT NULL DEFAULT 0,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (table_id, partition, from_offset),
    FOREIGN KEY (table_id, partition) REFERENCES mink_partitions (table_id, partition) ON DELETE CASCADE
);
