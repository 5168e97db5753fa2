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
