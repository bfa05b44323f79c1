-- A file server serves a cached file without asking Postgres, so it must be told when the
-- file stops existing. Two ways a file goes:

-- A table is dropped (its file rows go with it, ON DELETE CASCADE) or created: each file
-- server keeps the ids of the live tables (tables.Live) and refreshes them when told here,
-- so a cached file of a dropped table is never served again and leaves the cache.
CREATE OR REPLACE FUNCTION mink_notify_tables() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('mink_tables', '');
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS mink_tables_notify ON mink_tables;
CREATE TRIGGER mink_tables_notify AFTER INSERT OR DELETE ON mink_tables
    FOR EACH STATEMENT EXECUTE FUNCTION mink_notify_tables();

-- A file row is deleted while its table lives on (the writer's collection): the key is
-- recorded here for an hour, long enough for every file server to read it (objects.Removed)
-- and evict the file, and the file servers are told at once. Rows of a dropped table are
-- left out: the table's id already says they are gone.
CREATE TABLE IF NOT EXISTS mink_removed_files (
    key        text        NOT NULL,
    table_id   bigint      NOT NULL,
    removed_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX IF NOT EXISTS mink_removed_files_at ON mink_removed_files (removed_at);

CREATE OR REPLACE FUNCTION mink_record_removed_files() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO mink_removed_files (key, table_id)
        SELECT o.key, o.table_id FROM removed o
         WHERE EXISTS (SELECT 1 FROM mink_tables t WHERE t.id = o.table_id);
    IF FOUND THEN
        DELETE FROM mink_removed_files WHERE removed_at < clock_timestamp() - interval '1 hour';
        PERFORM pg_notify('mink_removed_files', '');
    END IF;
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS mink_data_files_removed ON mink_data_files;
CREATE TRIGGER mink_data_files_removed AFTER DELETE ON mink_data_files
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION mink_record_removed_files();
DROP TRIGGER IF EXISTS mink_meta_files_removed ON mink_meta_files;
CREATE TRIGGER mink_meta_files_removed AFTER DELETE ON mink_meta_files
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION mink_record_removed_files();
