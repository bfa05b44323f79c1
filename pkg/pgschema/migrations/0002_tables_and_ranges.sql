-- A table's record format and declared columns (tableschema.Spec as JSON) and its
-- properties (string to string, Iceberg style).
ALTER TABLE mink_tables
    ADD COLUMN spec       jsonb NOT NULL DEFAULT '{"format":"raw"}',
    ADD COLUMN properties jsonb NOT NULL DEFAULT '{}';

-- The index: per partition, where its ranges begin and end. Ranges tile
-- [first_offset, indexed_end) with no gap and no overlap: a range is stored only by the
-- holder of the partition lease, and only if it starts where indexed_end is.
CREATE TABLE mink_partitions (
    table_id      bigint NOT NULL REFERENCES mink_tables (id) ON DELETE CASCADE,
    partition     int    NOT NULL CHECK (partition >= 0),
    first_offset  bigint,
    indexed_end   bigint,
    last_range_at timestamptz,
    PRIMARY KEY (table_id, partition),
    CHECK ((first_offset IS NULL) = (indexed_end IS NULL) AND first_offset <= indexed_end)
);

-- One contiguous offset range of one partition, with what is needed to rebuild its Parquet
-- file byte for byte (settings) and to describe it in an Iceberg manifest (size, checksum,
-- record count, column statistics).
CREATE TABLE mink_ranges (
    table_id      bigint NOT NULL,
    partition     int    NOT NULL,
    start_offset  bigint NOT NULL,
    end_offset    bigint NOT NULL,
    epoch         bigint NOT NULL,
    record_count  bigint NOT NULL,
    decode_errors bigint NOT NULL,
    file_size     bigint NOT NULL,
    sha256        text   NOT NULL,
    settings      jsonb  NOT NULL,
    stats         jsonb  NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (table_id, partition, start_offset),
    UNIQUE (table_id, partition, end_offset),
    FOREIGN KEY (table_id, partition) REFERENCES mink_partitions (table_id, partition) ON DELETE CASCADE,
    CHECK (end_offset > start_offset)
);
