-- Schema versions: how a table's records decode and the Iceberg schema of its rows, one
-- row per version, never changed once written. Every file records the version it was
-- built with (in its settings), so it is rebuilt with exactly that version. Versions
-- whose Iceberg schemas are equal share one schema_id, as in the Iceberg metadata.
-- A table without rows here (created before versions existed) is version 0 of its spec.
CREATE TABLE IF NOT EXISTS mink_table_versions (
    table_id   bigint NOT NULL REFERENCES mink_tables (id) ON DELETE CASCADE,
    version    int    NOT NULL CHECK (version >= 0),
    schema_id  int    NOT NULL CHECK (schema_id >= 0),
    spec       jsonb  NOT NULL, -- tableschema.Spec at this version
    schema     jsonb  NOT NULL, -- the Iceberg schema, with field ids
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (table_id, version)
);
-- The current version: new ranges are built with it; the writer makes its schema current.
ALTER TABLE mink_tables ADD COLUMN IF NOT EXISTS version int NOT NULL DEFAULT 0;

-- Schema Registry schemas a table's records were decoded with, stored the first time one
-- is used so that a rebuild never needs the registry (and survives a schema deleted from
-- it). found is false when the registry answered that the id does not exist: records
-- naming it are error rows, and stay so on every rebuild.
CREATE TABLE IF NOT EXISTS mink_registry_schemas (
    table_id   bigint NOT NULL REFERENCES mink_tables (id) ON DELETE CASCADE,
    schema_id  int    NOT NULL,
    found      boolean NOT NULL,
    subject    text   NOT NULL DEFAULT '',
    version    int    NOT NULL DEFAULT 0,
    type       text   NOT NULL DEFAULT '',   -- AVRO, PROTOBUF or JSON
    source     jsonb,                        -- schemafmt.Source: text and resolved references
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (table_id, schema_id)
);

-- Why a partition's indexing is paused (the schema registry is unreachable, say), set by
-- the partition's indexer and cleared when it stores a range again.
ALTER TABLE mink_partitions
    ADD COLUMN IF NOT EXISTS index_error    text,
    ADD COLUMN IF NOT EXISTS index_error_at timestamptz;
