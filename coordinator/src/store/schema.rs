//! The SQLite schema, as migrations (rusqlite_migration), and the presence tables both
//! engines share. PostgreSQL's schema is `db::pg_schema`.

use rusqlite_migration::{Migrations, M};

pub(super) fn migrations() -> Migrations<'static> {
    Migrations::new(vec![
        M::up(
            r#"
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
        "#,
        ),
        M::up(
            r#"
        -- Operator-given labels of the last hello, JSON object (`--label rack=b12`).
        ALTER TABLE agents ADD COLUMN labels TEXT NOT NULL DEFAULT '{}';
        "#,
        ),
        M::up(
            r#"
        -- A measure cut off by a stop of the agent runs again after its repetition's
        -- preparation ran again: those steps end once per attempt. A resend of an end is
        -- still ignored, and a measure step still ends once, so samples stay unique per
        -- (cell, repetition, metric).
        DROP INDEX steps_one_end;
        CREATE UNIQUE INDEX steps_one_end ON steps (plan_id, step_index, attempt) WHERE state != 'started';
        CREATE UNIQUE INDEX steps_one_measure ON steps (plan_id, step_index) WHERE state != 'started' AND kind = 'measure';
        "#,
        ),
        M::up(
            r#"
        -- The store's identity, random, made with the database. Campaign ids (and so plan
        -- and cell ids) include it: a new store never plans an id an agent already holds.
        CREATE TABLE store_identity (id TEXT NOT NULL);
        INSERT INTO store_identity (id) VALUES (lower(hex(randomblob(4))));
        -- Records this store refused (they belong to a plan it never made: another or a
        -- lost store's). Acked so the agent stops resending them, but never silently.
        CREATE TABLE refused_records (
            host TEXT NOT NULL,
            seq INTEGER NOT NULL,
            plan_id TEXT NOT NULL,
            kind TEXT NOT NULL,
            reason TEXT NOT NULL,
            at_unix_ms INTEGER NOT NULL,
            PRIMARY KEY (host, seq, plan_id)
        ) WITHOUT ROWID;
        -- What a plan ran on (the agent's provenance snapshots), JSON facts per snapshot.
        -- Keyed by the record's sequence number, so a resend is stored once.
        CREATE TABLE provenance (
            plan_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            host TEXT NOT NULL,
            step_index INTEGER NOT NULL,
            trigger TEXT NOT NULL,
            facts TEXT NOT NULL,
            PRIMARY KEY (plan_id, seq)
        ) WITHOUT ROWID;
        "#,
        ),
        M::up(
            r#"
        -- Warm-up runs (`warmup:`) are stored like the others and kept out of every
        -- statistic: `sample_rows` leaves them out, `warmup_rows` has only them.
        ALTER TABLE steps ADD COLUMN warmup INTEGER NOT NULL DEFAULT 0;
        -- The plan's warm-up step indexes (JSON list), so the writer marks their steps.
        ALTER TABLE plans ADD COLUMN warmup_steps TEXT NOT NULL DEFAULT '[]';
        -- What planning a later round of adaptive repetition needs: the matrix point and
        -- the target device's path of each cell.
        ALTER TABLE cells ADD COLUMN point INTEGER;
        ALTER TABLE cells ADD COLUMN device TEXT;
        DROP VIEW sample_rows;
        CREATE VIEW sample_rows AS
            SELECT st.cell AS cell, st.repetition AS repetition, st.attempt AS attempt, st.plan_id AS plan_id,
                   st.host AS host, sa.metric AS metric, sa.value AS value, sa.unit AS unit, sa.histogram AS histogram,
                   sa.missing AS missing
            FROM samples sa JOIN steps st ON st.n = sa.step WHERE st.warmup = 0;
        CREATE VIEW warmup_rows AS
            SELECT st.cell AS cell, st.repetition AS repetition, st.attempt AS attempt, st.plan_id AS plan_id,
                   st.host AS host, sa.metric AS metric, sa.value AS value, sa.unit AS unit, sa.histogram AS histogram,
                   sa.missing AS missing
            FROM samples sa JOIN steps st ON st.n = sa.step WHERE st.warmup = 1;
        "#,
        ),
        M::up(PRESENCE_SCHEMA),
        M::up(
            r#"
        -- The browser console's accounts (issue 29): who may sign in, with which role; the
        -- password only as its Argon2id PHC string.
        CREATE TABLE accounts (
            name TEXT NOT NULL PRIMARY KEY,
            role TEXT NOT NULL,            -- viewer | operator | admin
            password_hash TEXT NOT NULL,
            created_unix_ms INTEGER NOT NULL
        );
        -- Signed-in browsers, kept here so any coordinator on a shared store serves them;
        -- the cookie's token only as its SHA-256 (hex). Expired rows are deleted as they
        -- are met and whenever a session opens.
        CREATE TABLE sessions (
            token_hash TEXT NOT NULL PRIMARY KEY,
            account TEXT NOT NULL REFERENCES accounts(name),
            csrf TEXT NOT NULL,
            created_unix_ms INTEGER NOT NULL,
            expires_unix_ms INTEGER NOT NULL
        );
        CREATE INDEX sessions_account ON sessions (account);
        -- Scripts' API tokens: the secret only as its SHA-256 (hex); `role` is what the
        -- token was made with, capped by its account's current role when used.
        CREATE TABLE api_tokens (
            id TEXT NOT NULL PRIMARY KEY,
            secret_hash TEXT NOT NULL UNIQUE,
            account TEXT NOT NULL REFERENCES accounts(name),
            role TEXT NOT NULL,            -- viewer | operator | admin
            label TEXT NOT NULL,
            created_unix_ms INTEGER NOT NULL,
            last_used_unix_ms INTEGER      -- NULL until first used; written at most once a minute
        );
        CREATE INDEX api_tokens_account ON api_tokens (account);
        "#,
        ),
        M::up(SCHEDULES_SCHEMA),
        M::up(LEDGER_SCHEMA),
        M::up(PLAN_TEMPLATES_SCHEMA),
        M::up(UNUSUAL_STEPS_SCHEMA),
    ])
}

/// The few steps a report looks for apart from the rest: those that failed or were skipped
/// or ran again (`steps_unusual`), and warm-up runs (`steps_warmup`). Without them each of
/// a report's seven queries for such steps read every step of the campaign: on PostgreSQL
/// 12–59 ms each, 257 ms of a 1M-sample report's 1.4 s, for none found. Both engines run
/// the same text; SQLite uses an index only where the query names one of its terms as it
/// is written (`s.state = 'failed'`).
pub(crate) const UNUSUAL_STEPS_SCHEMA: &str = r#"
CREATE INDEX steps_unusual ON steps (plan_id) WHERE state = 'failed' OR state = 'skipped' OR attempt > 1;
CREATE INDEX steps_warmup ON steps (plan_id) WHERE warmup = 1;
"#;

/// Plans stored once per distinct template (issue 32, `store::plans`); PostgreSQL's is
/// the same in its types (`db::pg_schema`). A plan row names its template and lists its cells; `body` stays '' for
/// such a row and holds the whole plan for one stored before templates.
pub(crate) const PLAN_TEMPLATES_SCHEMA: &str = r#"
CREATE TABLE plan_templates (
    hash TEXT NOT NULL PRIMARY KEY,  -- hex SHA-256 of body
    body TEXT NOT NULL               -- JSON of the plan: no id or host, cells by position
);
ALTER TABLE plans ADD COLUMN template TEXT;   -- plan_templates.hash; NULL: `body` is the plan
ALTER TABLE plans ADD COLUMN cells TEXT;      -- JSON list of the plan's cell ids
"#;

/// The drive ledger (issue 31, `store::ledger`): each physical drive once, keyed by its world
/// wide name, else model and serial, else (no serial: a loop device) host and name; and
/// every distinct way it was seen (host, path, controller chain, PCI address, firmware,
/// capacity, transport, write cache) with when first and last. Filled from the agents'
/// inventories as the writers store them, so two coordinators on one store fill one ledger.
pub(crate) const LEDGER_SCHEMA: &str = r#"
CREATE TABLE drives (
    drive_id TEXT NOT NULL PRIMARY KEY,
    identity TEXT NOT NULL,          -- wwn | serial | host
    model TEXT NOT NULL,
    serial TEXT NOT NULL,
    wwn TEXT NOT NULL,
    first_seen_unix_ms INTEGER NOT NULL,
    last_seen_unix_ms INTEGER NOT NULL
);
CREATE INDEX drives_serial ON drives (serial);
CREATE INDEX drives_model ON drives (model);
CREATE TABLE drive_sightings (
    drive_id TEXT NOT NULL REFERENCES drives(drive_id),
    host TEXT NOT NULL,
    path TEXT NOT NULL,
    controller TEXT NOT NULL,        -- drivers, disk first: sd>ahci
    pci_address TEXT NOT NULL,
    firmware TEXT NOT NULL,
    size_bytes INTEGER NOT NULL,
    transport TEXT NOT NULL,
    write_cache TEXT NOT NULL,
    first_seen_unix_ms INTEGER NOT NULL,
    last_seen_unix_ms INTEGER NOT NULL,
    PRIMARY KEY (drive_id, host, path, controller, pci_address, firmware, size_bytes, transport, write_cache)
);
CREATE INDEX drive_sightings_host ON drive_sightings (host);
"#;

/// Series and schedules (issue 30, `store::schedules`); the same text on both engines.
/// A campaign's `series` is its `series:` key, else its name: the runs `platter history`
/// lines up. A schedule fires its campaign as a new run of that series; each firing is
/// one row, keyed by the slot it fired for, so two coordinators on one store that both
/// find a slot due insert it once (the second's insert conflicts, and its transaction,
/// which would also have stored the campaign, does nothing).
pub(crate) const SCHEDULES_SCHEMA: &str = r#"
ALTER TABLE campaigns ADD COLUMN series TEXT NOT NULL DEFAULT '';
UPDATE campaigns SET series = name;
CREATE INDEX campaigns_series ON campaigns (series, state);
CREATE TABLE schedules (
    name TEXT NOT NULL PRIMARY KEY,
    series TEXT NOT NULL,
    file_name TEXT NOT NULL,
    yaml TEXT NOT NULL,
    every_ms BIGINT,                 -- one of every_ms, cron, on_trigger is set
    cron TEXT,                       -- five fields, UTC
    on_trigger TEXT,
    policy TEXT NOT NULL,            -- skip | queue: a firing while the series runs
    paused BIGINT NOT NULL,          -- 0 | 1
    anchor_unix_ms BIGINT NOT NULL,  -- `every`'s slots are anchor + k * every_ms
    next_due_unix_ms BIGINT,         -- NULL: fired by a trigger only
    created_unix_ms BIGINT NOT NULL
);
CREATE TABLE schedule_firings (
    schedule TEXT NOT NULL,
    slot_unix_ms BIGINT NOT NULL,    -- the slot fired; a trigger's: when it was pulled
    fired_unix_ms BIGINT NOT NULL,
    coordinator TEXT NOT NULL,
    outcome TEXT NOT NULL,           -- submitted | skipped | failed
    campaign_id TEXT,                -- the run it submitted
    labels TEXT NOT NULL,            -- JSON object: the trigger's labels, `fired_by`
    note TEXT NOT NULL,              -- why it was skipped or failed, which slots it caught up
    PRIMARY KEY (schedule, slot_unix_ms)
);
CREATE INDEX schedule_firings_campaign ON schedule_firings (campaign_id);
"#;

/// Which coordinator holds which agent's stream, for coordinators sharing a store
/// (`crate::service::presence`); the same text on both engines.
pub(crate) const PRESENCE_SCHEMA: &str = r#"
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
"#;
