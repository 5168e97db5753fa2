-- Series and schedules (issue 30, `store::schedules`); the same tables as PostgreSQL's 006.
-- A campaign's `series` is its `series:` key, else its name: the runs `platter history`
-- lines up. A schedule fires its campaign as a new run of that series; each firing is
-- one row, keyed by the slot it fired for, so two coordinators on one store that both
-- find a slot due insert it once (the second's insert conflicts, and its transaction,
-- which would also have stored the campaign, does nothing).

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
