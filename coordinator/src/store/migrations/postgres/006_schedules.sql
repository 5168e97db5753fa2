-- Series and schedules (`store::schedules`): the same text as SQLite's 008, with text
-- that compares bytes as 004 made every other column do.

ALTER TABLE campaigns ADD COLUMN series TEXT COLLATE "C" NOT NULL DEFAULT '';
UPDATE campaigns SET series = name;
CREATE INDEX campaigns_series ON campaigns (series, state);
CREATE TABLE schedules (
    name TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    series TEXT COLLATE "C" NOT NULL,
    file_name TEXT COLLATE "C" NOT NULL,
    yaml TEXT COLLATE "C" NOT NULL,
    every_ms BIGINT,
    cron TEXT COLLATE "C",
    on_trigger TEXT COLLATE "C",
    policy TEXT COLLATE "C" NOT NULL,
    paused BIGINT NOT NULL,
    anchor_unix_ms BIGINT NOT NULL,
    next_due_unix_ms BIGINT,
    created_unix_ms BIGINT NOT NULL
);
CREATE TABLE schedule_firings (
    schedule TEXT COLLATE "C" NOT NULL,
    slot_unix_ms BIGINT NOT NULL,
    fired_unix_ms BIGINT NOT NULL,
    coordinator TEXT COLLATE "C" NOT NULL,
    outcome TEXT COLLATE "C" NOT NULL,
    campaign_id TEXT COLLATE "C",
    labels TEXT COLLATE "C" NOT NULL,
    note TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (schedule, slot_unix_ms)
);
CREATE INDEX schedule_firings_campaign ON schedule_firings (campaign_id);
