-- A file server's warmer reads the data files committed since its last look, newest
-- first (objects.Recent), every second or so: an index scan of the newest rows, not a
-- scan of every file.
CREATE INDEX IF NOT EXISTS mink_data_files_recent ON mink_data_files (created_at)
    WHERE NOT live;
