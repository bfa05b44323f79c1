-- Warming reads the manifest lists and manifests committed since its last look too: every
-- scan of a new snapshot reads them before any data file. Committed metadata files are
-- the ones without an expiry (a load snapshot's expire).
CREATE INDEX IF NOT EXISTS mink_meta_files_committed ON mink_meta_files (created_at)
    WHERE expires_at IS NULL;
