-- A clean leave is final for the incarnation that left: a statement of it still on its
-- way to Postgres (sent by a round the stop cancelled; a cancel request is best effort)
-- must not insert its member row again after the leave, where it would stay until it
-- expired, as after a crash. Leave records the incarnation here, and a member row of a
-- recorded incarnation cannot be inserted, nor taken over by one. A registration that
-- takes a node id over records the incarnation it replaced the same way (replaced):
-- paused while replaced, that process must not come back as a member when it wakes after
-- its replacement has left.
--
-- The check is made on this table's key, not on a snapshot: a statement that inserts a
-- member row claims (node_id, incarnation) here and gives the claim back before it
-- commits (left_at NULL, never seen committed), and Leave inserts the same key. Whichever
-- comes second waits for the first to commit and then sees what it did, so a leave and
-- an insertion under the same incarnation can never both succeed.
CREATE TABLE IF NOT EXISTS mink_left (
    node_id     text NOT NULL,
    incarnation uuid NOT NULL,
    left_at     timestamptz,
    replaced    boolean NOT NULL DEFAULT false,
    PRIMARY KEY (node_id, incarnation)
);
-- The rounds delete records a day old (pkg/lease's janitor).
CREATE INDEX IF NOT EXISTS mink_left_at ON mink_left (left_at);

CREATE OR REPLACE FUNCTION mink_refuse_left() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    gone timestamptz;
    was_replaced boolean;
BEGIN
    INSERT INTO mink_left (node_id, incarnation) VALUES (NEW.node_id, NEW.incarnation)
    ON CONFLICT (node_id, incarnation) DO UPDATE SET left_at = mink_left.left_at
    RETURNING left_at, replaced INTO gone, was_replaced;
    IF gone IS NOT NULL AND was_replaced THEN
        RAISE EXCEPTION 'incarnation % of node % was replaced by another process at %', NEW.incarnation, NEW.node_id, gone
            USING ERRCODE = 'MK002';
    END IF;
    IF gone IS NOT NULL THEN
        RAISE EXCEPTION 'incarnation % of node % left the cluster at %', NEW.incarnation, NEW.node_id, gone
            USING ERRCODE = 'MK001';
    END IF;
    DELETE FROM mink_left WHERE node_id = NEW.node_id AND incarnation = NEW.incarnation;
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS mink_members_refuse_left ON mink_members;
CREATE TRIGGER mink_members_refuse_left AFTER INSERT ON mink_members
    FOR EACH ROW EXECUTE FUNCTION mink_refuse_left();
DROP TRIGGER IF EXISTS mink_members_refuse_left_takeover ON mink_members;
CREATE TRIGGER mink_members_refuse_left_takeover AFTER UPDATE ON mink_members
    FOR EACH ROW WHEN (OLD.incarnation IS DISTINCT FROM NEW.incarnation) EXECUTE FUNCTION mink_refuse_left();
