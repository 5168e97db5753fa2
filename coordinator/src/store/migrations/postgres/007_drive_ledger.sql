-- The drive ledger (`store::ledger`): the same tables as SQLite's 009.

CREATE TABLE drives (
    drive_id TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    identity TEXT COLLATE "C" NOT NULL,
    model TEXT COLLATE "C" NOT NULL,
    serial TEXT COLLATE "C" NOT NULL,
    wwn TEXT COLLATE "C" NOT NULL,
    first_seen_unix_ms BIGINT NOT NULL,
    last_seen_unix_ms BIGINT NOT NULL
);
CREATE INDEX drives_serial ON drives (serial);
CREATE INDEX drives_model ON drives (model);
CREATE TABLE drive_sightings (
    drive_id TEXT COLLATE "C" NOT NULL REFERENCES drives(drive_id),
    host TEXT COLLATE "C" NOT NULL,
    path TEXT COLLATE "C" NOT NULL,
    controller TEXT COLLATE "C" NOT NULL,
    pci_address TEXT COLLATE "C" NOT NULL,
    firmware TEXT COLLATE "C" NOT NULL,
    size_bytes BIGINT NOT NULL,
    transport TEXT COLLATE "C" NOT NULL,
    write_cache TEXT COLLATE "C" NOT NULL,
    first_seen_unix_ms BIGINT NOT NULL,
    last_seen_unix_ms BIGINT NOT NULL,
    PRIMARY KEY (drive_id, host, path, controller, pci_address, firmware, size_bytes, transport, write_cache)
);
CREATE INDEX drive_sightings_host ON drive_sightings (host);
