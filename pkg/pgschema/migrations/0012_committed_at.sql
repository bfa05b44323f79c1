-- Warming reads the data files committed since its last look. A live load's tail file is
-- recorded (live) when a load measures it, and may be committed much later under the same
-- key (same offsets, same bytes): its created_at is then too old for the warmer to see it,
-- so the newest committed data went unwarmed. committed_at is when a row became part of
-- the table: at its insert for a file committed as it is recorded (the default), at its
-- commit for a tail file (the writer sets it when it turns live off).
ALTER TABLE mink_data_files ADD COLUMN IF NOT EXISTS committed_at timestamptz;
UPDATE mink_data_files SET committed_at = created_at WHERE committed_at IS NULL;
ALTER TABLE mink_data_files ALTER COLUMN committed_at SET DEFAULT now();
ALTER TABLE mink_data_files ALTER COLUMN committed_at SET NOT NULL;

DROP INDEX IF EXISTS mink_data_files_recent;
CREATE INDEX IF NOT EXISTS mink_data_files_committed ON mink_data_files (committed_at)
    WHERE NOT live;

-- A commit of a tail file updates its row rather than inserting one: tell the owners too.
DROP TRIGGER IF EXISTS mink_data_files_notify_commit ON mink_data_files;
CREATE TRIGGER mink_data_files_notify_commit AFTER UPDATE OF live ON mink_data_files
    FOR EACH ROW WHEN (OLD.live AND NOT NEW.live) EXECUTE FUNCTION mink_notify_data_files();
