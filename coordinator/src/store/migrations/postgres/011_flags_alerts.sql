-- Flags with a life and alerts sent once (issue 50, `store::flags`, `store::alerts`).
-- The same text as SQLite's 013 but for its collation.
--
-- A flag is one finding worth a person's attention (a regression or a drift in a series, a
-- qualification FAIL, a health flag, a peer outlier, a host offline holding a plan, a
-- failed firing), keyed by its evidence: `flag_id` is the first 12 hex digits of the
-- SHA-256 of `evidence_key` (kind, subject, the run the evidence starts at), so two
-- coordinators that raise the same flag raise one, and a flag marked false positive is not
-- raised again for the same evidence.
CREATE TABLE flags (
    flag_id TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    evidence_key TEXT COLLATE "C" NOT NULL UNIQUE,
    kind TEXT COLLATE "C" NOT NULL,              -- regression | drift | qualification | health | peer | host | firing
    severity TEXT COLLATE "C" NOT NULL,          -- critical | warning | info
    series TEXT COLLATE "C" NOT NULL,            -- '' when the flag is of no series
    host TEXT COLLATE "C" NOT NULL,
    model TEXT COLLATE "C" NOT NULL,
    drive TEXT COLLATE "C" NOT NULL,             -- the ledger's drive id, '' for none
    metric TEXT COLLATE "C" NOT NULL,
    cell TEXT COLLATE "C" NOT NULL,              -- the cell's parameters, k=v joined by spaces
    campaign_id TEXT COLLATE "C" NOT NULL,       -- the run whose evidence raised (or last refreshed) it
    summary TEXT COLLATE "C" NOT NULL,           -- one line: what was found
    evidence TEXT COLLATE "C" NOT NULL,          -- JSON: the runs, the shift and interval, what changed
    link TEXT COLLATE "C" NOT NULL,              -- the console's path to the evidence (/campaigns/ID)
    state TEXT COLLATE "C" NOT NULL,             -- open | acknowledged | false-positive | fixed
    note TEXT COLLATE "C" NOT NULL,              -- why it is in its state (a person's note, or "fixed: …")
    state_by TEXT COLLATE "C" NOT NULL,          -- who set the state ('' for platter itself)
    raised_unix_ms BIGINT NOT NULL,
    updated_unix_ms BIGINT NOT NULL,
    state_unix_ms BIGINT NOT NULL
);
CREATE INDEX flags_state ON flags (state, raised_unix_ms);
CREATE INDEX flags_series ON flags (series, host);

-- Each done campaign's flags are raised once (`service::flagger`), in the transaction that
-- marks it here.
CREATE TABLE flags_raised (
    campaign_id TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    raised_unix_ms BIGINT NOT NULL
);
-- The campaigns done before flags existed are history, not news: nobody is alerted about
-- them when a coordinator of this version first starts.
INSERT INTO flags_raised (campaign_id, raised_unix_ms)
    SELECT id, 0 FROM campaigns WHERE state = 'done';

-- What happened to a flag that alert rules route: raised, fixed, reopened; and a rule's
-- test message. `seq` orders them (and each rule's deliveries; ties by event_id).
CREATE TABLE alert_events (
    event_id TEXT COLLATE "C" NOT NULL PRIMARY KEY,  -- flag_id:what:n, or test:RULE:unix_ms
    seq BIGINT NOT NULL,
    flag_id TEXT COLLATE "C" NOT NULL,
    what TEXT COLLATE "C" NOT NULL,                  -- raised | fixed | reopened | test
    kind TEXT COLLATE "C" NOT NULL,
    severity TEXT COLLATE "C" NOT NULL,
    series TEXT COLLATE "C" NOT NULL,
    host TEXT COLLATE "C" NOT NULL,
    model TEXT COLLATE "C" NOT NULL,
    summary TEXT COLLATE "C" NOT NULL,
    link TEXT COLLATE "C" NOT NULL,
    created_unix_ms BIGINT NOT NULL
);
CREATE INDEX alert_events_seq ON alert_events (seq);

-- Rules route events to a channel. Secrets are never kept here: `secret` names where the
-- coordinator reads one at each send (env:NAME or file:PATH), so a backup of the store does
-- not hand them out and rotating one is changing the file.
CREATE TABLE alert_rules (
    rule_id TEXT COLLATE "C" NOT NULL PRIMARY KEY,   -- the rule's name
    channel TEXT COLLATE "C" NOT NULL,               -- webhook | slack | email
    target TEXT COLLATE "C" NOT NULL,                -- URL (or env:/file: naming one), or smtp://host:port
    secret TEXT COLLATE "C" NOT NULL,                -- env:NAME | file:PATH | ''
    recipients TEXT COLLATE "C" NOT NULL,            -- email: to addresses, comma-separated
    sender TEXT COLLATE "C" NOT NULL,                -- email: from
    kinds TEXT COLLATE "C" NOT NULL,                 -- comma-separated; '' for every kind
    min_severity TEXT COLLATE "C" NOT NULL,          -- info | warning | critical
    series TEXT COLLATE "C" NOT NULL,                -- glob, '' for any
    host TEXT COLLATE "C" NOT NULL,
    model TEXT COLLATE "C" NOT NULL,
    digest_after BIGINT NOT NULL,        -- more waiting than this go as one digest
    created_unix_ms BIGINT NOT NULL,
    lease_holder TEXT COLLATE "C" NOT NULL,          -- the coordinator delivering this rule's events now
    lease_until_unix_ms BIGINT NOT NULL
);

-- One row per event and rule that matched it: at least once per rule across coordinators,
-- with one idempotency key per event and rule.
CREATE TABLE alert_deliveries (
    event_id TEXT COLLATE "C" NOT NULL,
    rule_id TEXT COLLATE "C" NOT NULL,
    seq BIGINT NOT NULL,
    idempotency_key TEXT COLLATE "C" NOT NULL,
    state TEXT COLLATE "C" NOT NULL,                 -- pending | delivered | silenced | failed (a test, tried once)
    attempts BIGINT NOT NULL,
    next_unix_ms BIGINT NOT NULL,
    delivered_unix_ms BIGINT NOT NULL,
    last_error TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (event_id, rule_id)
);
CREATE INDEX alert_deliveries_due ON alert_deliveries (state, rule_id, seq);

-- Each try of a delivery, for `platter alerts log`.
CREATE TABLE alert_attempts (
    event_id TEXT COLLATE "C" NOT NULL,
    rule_id TEXT COLLATE "C" NOT NULL,
    attempt BIGINT NOT NULL,
    at_unix_ms BIGINT NOT NULL,
    coordinator TEXT COLLATE "C" NOT NULL,
    outcome TEXT COLLATE "C" NOT NULL,               -- delivered | failed | digest
    detail TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (event_id, rule_id, attempt)
);

-- Silences and maintenance windows: events matching one are recorded as silenced, not sent.
CREATE TABLE alert_silences (
    silence_id TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    kind TEXT COLLATE "C" NOT NULL,
    series TEXT COLLATE "C" NOT NULL,
    host TEXT COLLATE "C" NOT NULL,
    model TEXT COLLATE "C" NOT NULL,
    ends_unix_ms BIGINT NOT NULL,
    note TEXT COLLATE "C" NOT NULL,
    created_unix_ms BIGINT NOT NULL
);
