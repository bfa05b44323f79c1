-- Tables: the scopes leases are cut from. Later migrations add the record format,
-- schema and properties. Ids are never reused, so a lease of a dropped table can never
-- fence a write into a new table of the same name.
CREATE TABLE mink_tables (
    id          bigserial PRIMARY KEY,
    namespace   text NOT NULL,
    name        text NOT NULL,
    topic       text NOT NULL,
    partitions  int  NOT NULL CHECK (partitions >= 0),
    created_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (namespace, name)
);

-- Members: one row per node. Live while expires_at > now() by the database clock.
-- incarnation tells two processes with the same node id apart: a restarted node takes
-- the row over, and the older process can then renew nothing.
CREATE TABLE mink_members (
    node_id      text PRIMARY KEY,
    incarnation  uuid NOT NULL,
    roles        text[] NOT NULL,
    grpc_addr    text NOT NULL,
    addrs        jsonb NOT NULL DEFAULT '{}',
    version      text NOT NULL DEFAULT '',
    draining     boolean NOT NULL DEFAULT false,
    started_at   timestamptz NOT NULL,
    renewed_at   timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL
);

-- Leases: one row per scope, created with the table. holder is NULL when free; a lease
-- whose expires_at has passed is free whatever holder says. epoch grows at every
-- acquisition, and every fenced write checks (holder, epoch, expires_at) in its own
-- transaction.
CREATE TABLE mink_leases (
    kind        text   NOT NULL CHECK (kind IN ('partition', 'writer')),
    table_id    bigint NOT NULL REFERENCES mink_tables (id) ON DELETE CASCADE,
    partition   int    NOT NULL,
    holder      text,
    epoch       bigint NOT NULL DEFAULT 0,
    expires_at  timestamptz,
    acquired_at timestamptz,
    PRIMARY KEY (kind, table_id, partition),
    CHECK ((kind = 'writer') = (partition = -1))
);
CREATE INDEX mink_leases_holder ON mink_leases (holder) WHERE holder IS NOT NULL;
