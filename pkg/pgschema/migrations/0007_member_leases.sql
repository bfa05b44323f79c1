-- Leases valid through their holder's member row: a lease is live while its holder's
-- member row, of the incarnation that took it, is live. Renewing the member row renews
-- every lease the node holds (one row written per node per round), and a fenced write
-- locks only its lease row, so it never blocks a renewal. A node's expired row is
-- deleted by whichever node's round sees it first, which frees its leases in the same
-- statement: free is "holder IS NULL", found through a partial index.
UPDATE mink_leases SET holder = NULL; -- held under the old rules: taken again under the new
ALTER TABLE mink_leases DROP COLUMN IF EXISTS expires_at;
ALTER TABLE mink_leases ADD COLUMN IF NOT EXISTS incarnation uuid;
CREATE INDEX IF NOT EXISTS mink_leases_free ON mink_leases (table_id, kind) WHERE holder IS NULL;
DROP INDEX IF EXISTS mink_leases_holder;
CREATE INDEX IF NOT EXISTS mink_leases_held ON mink_leases (holder, incarnation) WHERE holder IS NOT NULL;

CREATE TABLE IF NOT EXISTS mink_retired (
    node_id     text NOT NULL,
    incarnation uuid NOT NULL,
    PRIMARY KEY (node_id, incarnation)
);

-- The seed's preference of a node for a lease scope, as pkg/lease.Preference computes
-- it (the first 8 bytes of sha256(node, 0, scope); bytea compares as the big-endian
-- uint64 does): for operators' queries ("which node prefers this partition?"); nodes
-- hash their preferences themselves and send them with the query.
CREATE OR REPLACE FUNCTION mink_preference(node text, scope text) RETURNS bytea
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT substring(sha256(convert_to(node, 'UTF8') || '\x00'::bytea || convert_to(scope, 'UTF8')) FROM 1 FOR 8)
$$;

-- Every round looks for expired members: an index keeps that from reading them all.
CREATE INDEX IF NOT EXISTS mink_members_expiry ON mink_members (expires_at);

-- A node's cap on partition leases, so that every node computes capacity-aware shares.
ALTER TABLE mink_members ADD COLUMN IF NOT EXISTS max_partitions int NOT NULL DEFAULT 0;

-- Who holds what, as anyone may read it: a lease whose holder is not live is free.
CREATE OR REPLACE VIEW mink_lease_holders AS
SELECT l.kind, l.table_id, l.partition, l.epoch, l.acquired_at,
       CASE WHEN m.node_id IS NOT NULL THEN l.holder END AS holder,
       m.expires_at
FROM mink_leases l
LEFT JOIN mink_members m ON m.node_id = l.holder AND m.incarnation = l.incarnation AND m.expires_at > now();

-- Generations: a round reads the members and the tables again only when they changed
-- (a join, a leave, a drain, a cap, a new table or partition), not every lease_ttl/3.
CREATE TABLE IF NOT EXISTS mink_generations (
    name text PRIMARY KEY,
    gen  bigint NOT NULL
);
INSERT INTO mink_generations (name, gen) VALUES ('members', 1), ('tables', 1) ON CONFLICT DO NOTHING;

CREATE OR REPLACE FUNCTION mink_bump_generation() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE mink_generations SET gen = gen + 1 WHERE name = TG_ARGV[0];
    RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS mink_members_changed ON mink_members;
-- Row triggers: a renewal's INSERT ... ON CONFLICT DO UPDATE fires statement-level
-- INSERT triggers every round, row-level ones only for a row really inserted.
CREATE TRIGGER mink_members_changed AFTER INSERT OR DELETE ON mink_members
    FOR EACH ROW EXECUTE FUNCTION mink_bump_generation('members');
DROP TRIGGER IF EXISTS mink_members_updated ON mink_members;
CREATE TRIGGER mink_members_updated AFTER UPDATE ON mink_members FOR EACH ROW
    WHEN (OLD.incarnation IS DISTINCT FROM NEW.incarnation OR OLD.roles IS DISTINCT FROM NEW.roles
       OR OLD.draining IS DISTINCT FROM NEW.draining OR OLD.max_partitions IS DISTINCT FROM NEW.max_partitions)
    EXECUTE FUNCTION mink_bump_generation('members');
DROP TRIGGER IF EXISTS mink_tables_changed ON mink_tables;
CREATE TRIGGER mink_tables_changed AFTER INSERT OR DELETE ON mink_tables
    FOR EACH ROW EXECUTE FUNCTION mink_bump_generation('tables');
DROP TRIGGER IF EXISTS mink_tables_updated ON mink_tables;
CREATE TRIGGER mink_tables_updated AFTER UPDATE ON mink_tables FOR EACH ROW
    WHEN (OLD.partitions IS DISTINCT FROM NEW.partitions)
    EXECUTE FUNCTION mink_bump_generation('tables');
