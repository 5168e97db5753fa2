-- Plans stored once per template (`store::plans`): the same tables as SQLite's 010.

CREATE TABLE plan_templates (
    hash TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    body TEXT COLLATE "C" NOT NULL
);
ALTER TABLE plans ADD COLUMN template TEXT COLLATE "C";
ALTER TABLE plans ADD COLUMN cells TEXT COLLATE "C";
