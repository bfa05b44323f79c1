-- What the writer commits and the file servers serve. Every key is a path inside the one
-- bucket ("<namespace>/<table>/..."), immutable once named.

-- Data files a snapshot can name: an indexed range, an assembled (merged) run of ranges,
-- or a live-load tail. Enough to rebuild the file byte for byte from Kafka and check it.
CREATE TABLE mink_data_files (
    table_id      bigint NOT NULL REFERENCES mink_tables (id) ON DELETE CASCADE,
    key           text   NOT NULL,
    partition     int    NOT NULL,
    start_offset  bigint NOT NULL,
    end_offset    bigint NOT NULL,
    record_count  bigint NOT NULL,
    file_size     bigint NOT NULL,
    sha256        text   NOT NULL,
    settings      jsonb  NOT NULL,
    stats         jsonb  NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz, -- live-load tail files only: collectable after this
    PRIMARY KEY (key),
    CHECK (end_offset > start_offset)
);
CREATE INDEX mink_data_files_table ON mink_data_files (table_id, partition, start_offset);

-- Iceberg metadata files (metadata JSON, manifest lists, manifests), stored whole: they
-- are small, and Postgres is the only place metadata lives.
CREATE TABLE mink_meta_files (
    table_id    bigint NOT NULL REFERENCES mink_tables (id) ON DELETE CASCADE,
    key         text   NOT NULL,
    content     bytea  NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (key)
);
CREATE INDEX mink_meta_files_table ON mink_meta_files (table_id);

-- The commit pointer: each table's current metadata file. A commit swaps it with a
-- compare-and-set on version, under the writer lease, in one transaction with the files
-- it adds, so a snapshot becomes current whole or not at all.
CREATE TABLE mink_table_meta (
    table_id      bigint PRIMARY KEY REFERENCES mink_tables (id) ON DELETE CASCADE,
    metadata_key  text   NOT NULL,
    version       bigint NOT NULL,
    snapshot_id   bigint,
    committed_at  timestamptz NOT NULL DEFAULT now()
);
