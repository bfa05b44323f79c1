-- Listing the bucket (S3 ListObjectsV2): the committed files of each table in key order
-- as S3 sorts keys, bytewise (UTF-8 binary), whatever the database's collation, one page
-- at a time (keyset on key).

-- A data file a live load recorded as a tail and no commit has named yet. expires_at does
-- not say it: a committed file that a live load measures again (a load that read the
-- metadata just before the commit) gets an expiry, which keeps it for that load once no
-- snapshot names it; it is still committed. A commit clears live; nothing sets it again.
ALTER TABLE mink_data_files ADD COLUMN IF NOT EXISTS live boolean NOT NULL DEFAULT false;
UPDATE mink_data_files SET live = true WHERE expires_at IS NOT NULL;

CREATE INDEX IF NOT EXISTS mink_data_files_listing ON mink_data_files (table_id, key COLLATE "C")
    WHERE NOT live;
-- A live load's metadata files (metadata/live/) expire; the writer's never do.
CREATE INDEX IF NOT EXISTS mink_meta_files_listing ON mink_meta_files (table_id, key COLLATE "C")
    WHERE expires_at IS NULL;

-- A metadata file's checksum, from which its ETag is made: a listing names the ETag of
-- each file without reading the contents of a page of them.
ALTER TABLE mink_meta_files ADD COLUMN IF NOT EXISTS sha256 text
    GENERATED ALWAYS AS (encode(sha256(content), 'hex')) STORED;
