-- Which coordinator holds which agent's stream (`crate::service::presence`); the same
-- text as SQLite's 006.

-- Coordinators on this store, each process once (`instance` is its notification mark),
-- with the time of its last heartbeat: one silent for long is gone.
CREATE TABLE coordinators (
    instance TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    started_unix_ms BIGINT NOT NULL,
    seen_unix_ms BIGINT NOT NULL
);
-- The hosts with plans waiting to be sent, or sent but maybe not received (another
-- coordinator marked them sent on a stream that was already dead): what a coordinator
-- told of plans by another dispatches to, without a read per connected host.
CREATE INDEX plans_waiting ON plans (host) WHERE state IN ('queued', 'sent');
-- Each coordinator's own view of the agents it holds or lost: rows are written only by
-- their coordinator, so two never overwrite each other when an agent moves.
CREATE TABLE agent_links (
    coordinator TEXT NOT NULL,
    host TEXT NOT NULL,
    link TEXT NOT NULL,              -- connected | lost
    tools TEXT NOT NULL,             -- JSON: the tools the agent reported
    since_unix_ms BIGINT NOT NULL,
    PRIMARY KEY (coordinator, host)
);
