-- Live loads of upsert tables (README, "Upsert tables"). A tail file measured by a file
-- server records the keys it touches as mink_ranges.keys does (pkg/upsert.Keys), so
-- that delete files can be computed from Postgres alone. NULL for other files.
ALTER TABLE mink_data_files ADD COLUMN IF NOT EXISTS keys bytea;

-- A live load's position delete file names the tail files (their keys, in offset
-- order) whose key hashes stand, with mink_ranges', for [end_offset, cover_end) of its
-- partition: any file server rebuilds it from those. NULL for the writer's.
ALTER TABLE mink_data_files ADD COLUMN IF NOT EXISTS deletes_tail text[];
