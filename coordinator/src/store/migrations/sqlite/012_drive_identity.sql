-- Identity the ledger can trust (issue 49, `store::ledger::drive_key`): why a drive is
-- tracked per host (a virtual disk, a serial without a model, a placeholder serial), and
-- when a host first listed its drives without a sighting since, which tells a drive that
-- moved (gone from one host before another saw it) from one identity live on two hosts at
-- once (dual-ported, multipath, or not unique). The same text as PostgreSQL's 010.

ALTER TABLE drives ADD COLUMN note TEXT NOT NULL DEFAULT '';
ALTER TABLE drive_sightings ADD COLUMN gone_unix_ms BIGINT NOT NULL DEFAULT 0;

-- Each drive's results, one row per run (a campaign's cell on the drive) and metric: the
-- run's median, with what makes drives peers (`report::peers`): model, firmware, controller,
-- the measured workload and configuration without host and device, and the state the drive
-- was measured in. Written from the campaign's report once it is done (each campaign once:
-- `drive_results_indexed`), so a model's peers are one indexed read, not a scan of every
-- run's provenance.
CREATE TABLE drive_results (
    campaign_id TEXT NOT NULL,
    host TEXT NOT NULL,
    cell INTEGER NOT NULL,           -- cells.n
    drive_id TEXT NOT NULL,          -- drives.drive_id
    metric TEXT NOT NULL,
    model TEXT NOT NULL,
    firmware TEXT NOT NULL,
    controller TEXT NOT NULL,        -- drivers, disk first: sd>ahci
    series TEXT NOT NULL,
    workload TEXT NOT NULL,          -- the measure step (JSON), the device's name as ${device}
    configuration TEXT NOT NULL,     -- the cell's parameters but the device: bs=4k rw=randwrite
    state TEXT NOT NULL,             -- '' | steady | not steady
    key_metric BIGINT NOT NULL,      -- 1: the metric the campaign's report judges by
    unit TEXT NOT NULL,
    median REAL NOT NULL,
    n BIGINT NOT NULL,
    finished_unix_ms BIGINT NOT NULL,
    PRIMARY KEY (campaign_id, host, cell, drive_id, metric)
);
CREATE INDEX drive_results_model ON drive_results (model, metric);
CREATE INDEX drive_results_drive ON drive_results (drive_id);
CREATE TABLE drive_results_indexed (
    campaign_id TEXT NOT NULL PRIMARY KEY,
    indexed_unix_ms BIGINT NOT NULL
);
