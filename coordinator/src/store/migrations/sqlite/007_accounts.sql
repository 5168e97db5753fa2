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
