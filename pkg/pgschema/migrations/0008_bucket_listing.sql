-- Listing the bucket (S3 ListObjectsV2): the committed files of each table in key order
-- as S3 sorts keys, bytewise (UTF-8 binary), whatever the database's collation, one page
-- at a time (keyset on key). Live-load rows (expires_at set) are not listed.
CREATE INDEX IF NOT EXISTS mink_data_files_listing ON mink_data_files (table_id, key COLLATE "C")
    WHERE expires_at IS NULL;
CREATE INDEX IF NOT EXISTS mink_meta_files_listing ON mink_meta_files (table_id, key COLLATE "C")
    WHERE expires_at IS NULL;

-- A metadata file's checksum, from which its ETag is made: a listing names the ETag of
-- each file without reading the contents of a page of them.
ALTER TABLE mink_meta_files ADD COLUMN IF NOT EXISTS sha256 text
    GENERATED ALWAYS AS (encode(sha256(content), 'hex')) STORED;
