-- The first schema: campaigns, their cells and plans, the steps the agents ran and the
-- samples they measured, the agents.

CREATE TABLE campaigns (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    generation INTEGER NOT NULL,
    file_name TEXT NOT NULL,
    yaml TEXT NOT NULL,
    params TEXT NOT NULL,          -- JSON list of parameter names, matrix order
    repeat INTEGER NOT NULL,
    state TEXT NOT NULL,           -- running | done | cancelled
    submitted_unix_ms INTEGER NOT NULL,
    UNIQUE (content_hash, generation)
);
-- `n` is the compact key steps and samples refer to: integers in submission order
-- keep their indexes append-mostly, which doubles the writer's throughput over
-- the random 16-hex-digit cell ids.
CREATE TABLE cells (
    n INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    campaign_id TEXT NOT NULL REFERENCES campaigns(id),
    host TEXT NOT NULL,
    idx INTEGER NOT NULL,
    params TEXT NOT NULL           -- JSON object, parameter -> value
);
CREATE INDEX cells_campaign ON cells (campaign_id);
CREATE TABLE plans (
    id TEXT PRIMARY KEY,
    campaign_id TEXT NOT NULL REFERENCES campaigns(id),
    host TEXT NOT NULL,
    body TEXT NOT NULL,            -- JSON of the plan
    steps_total INTEGER NOT NULL,
    state TEXT NOT NULL,           -- queued | sent | accepted | done | cancelled | refused
    queued_seq INTEGER NOT NULL,
    error TEXT                     -- why the agent refused it
);
CREATE INDEX plans_host_state ON plans (host, state, queued_seq);
CREATE INDEX plans_campaign ON plans (campaign_id);
-- Rows are appended in arrival order; every index below grows at a handful of
-- points (one per running plan), which keeps the writer fast.
CREATE TABLE steps (
    n INTEGER PRIMARY KEY,
    plan_id TEXT NOT NULL,
    step_index INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    state TEXT NOT NULL,           -- started | succeeded | failed | skipped
    kind TEXT NOT NULL,
    cell INTEGER NOT NULL,         -- cells.n
    repetition INTEGER NOT NULL,
    host TEXT NOT NULL,
    started_unix_ns INTEGER NOT NULL,
    finished_unix_ns INTEGER NOT NULL,
    exit_status INTEGER NOT NULL,
    stderr_tail TEXT NOT NULL,
    error TEXT NOT NULL,
    UNIQUE (plan_id, step_index, attempt, state)
);
-- A step ends once: a second end record (a resend) is ignored, and so are its
-- samples. Samples are therefore unique per (cell, repetition, metric).
CREATE UNIQUE INDEX steps_one_end ON steps (plan_id, step_index) WHERE state != 'started';
CREATE TABLE samples (
    step INTEGER NOT NULL REFERENCES steps(n),   -- the measure step's end record
    metric TEXT NOT NULL,
    value REAL,                    -- NULL when missing
    unit TEXT NOT NULL,
    histogram BLOB,
    missing TEXT,                  -- why the tool could not measure it (bonnie++ `+++++`)
    PRIMARY KEY (step, metric)
) WITHOUT ROWID;
-- Samples with the step they came from, for reports and ad-hoc queries.
CREATE VIEW sample_rows AS
    SELECT st.cell AS cell, st.repetition AS repetition, st.attempt AS attempt, st.plan_id AS plan_id,
           st.host AS host, sa.metric AS metric, sa.value AS value, sa.unit AS unit, sa.histogram AS histogram,
           sa.missing AS missing
    FROM samples sa JOIN steps st ON st.n = sa.step;
CREATE TABLE agents (
    host TEXT PRIMARY KEY,
    boot_id TEXT NOT NULL,
    agent_version TEXT NOT NULL,
    last_seen_unix_ms INTEGER NOT NULL,
    last_seq INTEGER NOT NULL DEFAULT 0,
    devices TEXT NOT NULL DEFAULT '[]'   -- JSON: the inventory of the last hello
);
