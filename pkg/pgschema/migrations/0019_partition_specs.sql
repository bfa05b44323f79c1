-- The partition spec a version's ranges are indexed with (pkg/partition.Spec's JSON: its
-- spec-id and fields with source field ids), kept with the version like the schema, so
-- every spec a table has had stays known with its id. NULL: the default,
-- identity(_kafka_partition), spec 0 (what every table had before specs).
ALTER TABLE mink_table_versions ADD COLUMN IF NOT EXISTS partition_spec jsonb;
