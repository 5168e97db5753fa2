-- The browser console's accounts, sessions and API tokens (`store::accounts`); the
-- same tables as SQLite's 007. Text compares bytes, as 004 made every other column do.

CREATE TABLE accounts (
    name TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    role TEXT COLLATE "C" NOT NULL,
    password_hash TEXT COLLATE "C" NOT NULL,
    created_unix_ms BIGINT NOT NULL
);
CREATE TABLE sessions (
    token_hash TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    account TEXT COLLATE "C" NOT NULL REFERENCES accounts(name),
    csrf TEXT COLLATE "C" NOT NULL,
    created_unix_ms BIGINT NOT NULL,
    expires_unix_ms BIGINT NOT NULL
);
CREATE INDEX sessions_account ON sessions (account);
CREATE TABLE api_tokens (
    id TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    secret_hash TEXT COLLATE "C" NOT NULL UNIQUE,
    account TEXT COLLATE "C" NOT NULL REFERENCES accounts(name),
    role TEXT COLLATE "C" NOT NULL,
    label TEXT COLLATE "C" NOT NULL,
    created_unix_ms BIGINT NOT NULL,
    last_used_unix_ms BIGINT
);
CREATE INDEX api_tokens_account ON api_tokens (account);
