-- The drive ledger (issue 31, `store::ledger`): each physical drive once, keyed by its world
-- wide name, else model and serial, else (no serial: a loop device) host and name; and
-- every distinct way it was seen (host, path, controller chain, PCI address, firmware,
-- capacity, transport, write cache) with when first and last. Filled from the agents'
-- inventories as the writers store them, so two coordinators on one store fill one ledger.

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
