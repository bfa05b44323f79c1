-- A file server's warmer reads the data files committed since its last look, newest
-- first (objects.Recent), every second or so: an index scan of the newest rows, not a
-- scan of every file.
CREATE INDEX IF NOT EXISTS mink_data_files_recent ON mink_data_files (created_at)
    WHERE NOT live;

-- And is told at once: a commit that records data files notifies mink_data_files when it
-- commits (Postgres delivers notifications then, folding repeats), so the owners warm
-- them without waiting for their next look.
CREATE OR REPLACE FUNCTION mink_notify_data_files() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('mink_data_files', '');
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS mink_data_files_notify ON mink_data_files;
CREATE TRIGGER mink_data_files_notify AFTER INSERT ON mink_data_files
    FOR EACH ROW WHEN (NOT NEW.live) EXECUTE FUNCTION mink_notify_data_files();
