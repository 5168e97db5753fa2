//! Console accounts (issue 29): who may sign in to the browser console and with which
//! role, their sessions, and the API tokens scripts use. Passwords are kept only as
//! Argon2id PHC strings, session tokens and token secrets only as their SHA-256; a secret
//! is found by looking its hash up. Hashing and verifying run before or after the store's
//! closures, never inside one: a password hash takes tens of milliseconds and would hold a
//! connection (on SQLite, the write lock) all that time. Nothing here logs a password or
//! a secret.

use std::sync::LazyLock;
use std::time::Duration;

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use sha2::{Digest, Sha256};

use super::db::params;
use super::error::{now_ms, Result, StoreError};
use super::Store;

/// The shortest password an account may be given, in characters.
pub const MIN_PASSWORD_CHARS: usize = 12;

/// The longest account name, in characters.
pub const MAX_NAME_CHARS: usize = 64;

/// The longest token label, in characters.
pub const MAX_LABEL_CHARS: usize = 200;

/// A token's last use is written at most this often: `token` runs on every request a
/// script makes, and a write per request would put the console's reads behind the
/// store's write lock. A listing's "last used" is right to the minute.
const LAST_USE_EVERY_MS: i64 = 60_000;

/// What every API token secret starts with, so one pasted into the wrong place (a log, a
/// repository) can be recognised by scanners.
const SECRET_PREFIX: &str = "plt_";

/// A console account's role; each includes the ones before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AccountRole {
    /// Reads campaigns, reports and the fleet.
    Viewer,
    /// Also submits and cancels campaigns.
    Operator,
    /// Also manages accounts and tokens.
    Admin,
}

impl AccountRole {
    /// The role's word, as stored and shown: "viewer", "operator" or "admin".
    pub fn as_str(self) -> &'static str {
        match self {
            AccountRole::Viewer => "viewer",
            AccountRole::Operator => "operator",
            AccountRole::Admin => "admin",
        }
    }

    /// The role `s` names (its word, exactly), if any.
    pub fn parse(s: &str) -> Option<AccountRole> {
        match s {
            "viewer" => Some(AccountRole::Viewer),
            "operator" => Some(AccountRole::Operator),
            "admin" => Some(AccountRole::Admin),
            _ => None,
        }
    }

    /// Whether this role may do what `needed` may.
    pub fn allows(self, needed: AccountRole) -> bool {
        self >= needed
    }

    /// "a viewer", "an operator", "an admin".
    fn with_article(self) -> &'static str {
        match self {
            AccountRole::Viewer => "a viewer",
            AccountRole::Operator => "an operator",
            AccountRole::Admin => "an admin",
        }
    }

    /// A role read from the store.
    fn stored(s: String) -> Result<AccountRole> {
        AccountRole::parse(&s)
            .ok_or_else(|| StoreError::Decode(format!("{s:?} is not an account role")))
    }
}

impl std::fmt::Display for AccountRole {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A console account as listed: never its password hash.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Account {
    pub name: String,
    pub role: AccountRole,
    pub created_unix_ms: i64,
}

/// A signed-in browser: what the cookie's token stands for.
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    pub account: String,
    /// The account's role now (a session follows `set_role` at once).
    pub role: AccountRole,
    /// The token a form must send back, so another site cannot post in the session's name.
    pub csrf: String,
    pub expires_unix_ms: i64,
}

/// A session just opened: the secret for the cookie (shown once, stored only hashed).
pub struct NewSession {
    pub token: String,
    pub session: Session,
}

/// An API token as listed: never its secret.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ApiToken {
    pub id: String,
    pub account: String,
    /// What the token may do now: the lower of the role it was made with and its
    /// account's current role.
    pub role: AccountRole,
    pub label: String,
    pub created_unix_ms: i64,
    pub last_used_unix_ms: Option<i64>,
}

/// A token just made: `secret` ("plt_" and 43 URL-safe base64 characters) is shown once.
pub struct NewToken {
    pub secret: String,
    pub token: ApiToken,
}

/// Why `name` cannot name an account, if it cannot.
fn check_name(name: &str) -> Result<()> {
    let fits = (1..=MAX_NAME_CHARS).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._@-".contains(&b));
    if fits {
        return Ok(());
    }
    Err(StoreError::Account(format!(
        "{name:?} cannot name an account: a name is 1 to {MAX_NAME_CHARS} letters, digits \
         and . _ @ - (no spaces)"
    )))
}

/// Why `password` cannot be an account's, if it cannot.
pub fn check_new_password(password: &str) -> Result<()> {
    if password.chars().count() < MIN_PASSWORD_CHARS {
        return Err(StoreError::Account(format!(
            "a password needs at least {MIN_PASSWORD_CHARS} characters"
        )));
    }
    Ok(())
}

fn check_label(label: &str) -> Result<()> {
    if label.trim().is_empty() || label.chars().count() > MAX_LABEL_CHARS {
        return Err(StoreError::Account(format!(
            "a token's label says what uses it, in 1 to {MAX_LABEL_CHARS} characters"
        )));
    }
    if label.chars().any(char::is_control) {
        return Err(StoreError::Account(
            "a token's label is one line of text (no control characters)".into(),
        ));
    }
    Ok(())
}

fn no_account(name: &str) -> StoreError {
    StoreError::Account(format!("no account named {name:?}"))
}

/// The Argon2id PHC string of `password` (argon2's default cost: 19 MiB, 2 passes), with
/// a random salt.
fn hash_password(password: &str) -> Result<String> {
    let salt = SaltString::encode_b64(&rand::random::<[u8; 16]>())
        .map_err(|e| StoreError::Account(format!("making a password's salt: {e}")))?;
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| StoreError::Account(format!("hashing the password: {e}")))
}

/// Whether `password` is the one `phc` was made from. A hash that cannot be read matches
/// nothing.
fn verify_password(password: &str, phc: &str) -> bool {
    PasswordHash::new(phc).is_ok_and(|h| {
        Argon2::default()
            .verify_password(password.as_bytes(), &h)
            .is_ok()
    })
}

/// What a sign-in with an unknown name is checked against, so that it costs what a known
/// name's does and timing tells no one which names exist.
static NO_ACCOUNT_HASH: LazyLock<String> = LazyLock::new(|| {
    hash_password(&URL_SAFE_NO_PAD.encode(rand::random::<[u8; 16]>()))
        .expect("hashing a random password with a fresh salt")
});

/// 32 random bytes as URL-safe base64 (43 characters): a session token, a CSRF token, the
/// body of an API token's secret.
fn random_secret() -> String {
    URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>())
}

/// How a secret is stored and looked up: its SHA-256 in hex. Secrets are 256 random bits,
/// so a fast hash is enough (nothing to guess); the store never holds one that works.
fn secret_hash(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

impl Store {
    /// Makes an account; an error when one of that name exists.
    pub fn add_account(&self, name: &str, role: AccountRole, password: &str) -> Result<Account> {
        check_name(name)?;
        check_new_password(password)?;
        let hash = hash_password(password)?;
        let account = Account {
            name: name.to_string(),
            role,
            created_unix_ms: now_ms(),
        };
        // One statement, so two coordinators adding the same name at once get the same
        // answer as one after the other.
        let added = self.write(|c| {
            c.execute(
                "INSERT INTO accounts (name, role, password_hash, created_unix_ms) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT DO NOTHING",
                params![name, role.as_str(), hash, account.created_unix_ms],
            )
        })?;
        if added == 0 {
            return Err(StoreError::Account(format!(
                "an account named {name:?} exists"
            )));
        }
        Ok(account)
    }

    /// Gives an account a new password and ends its sessions (whoever signed in with the
    /// old one is signed out); its API tokens stay.
    pub fn set_password(&self, name: &str, password: &str) -> Result<()> {
        check_new_password(password)?;
        let hash = hash_password(password)?;
        self.write(|c| {
            let tx = c.write_transaction()?;
            let changed = tx.execute(
                "UPDATE accounts SET password_hash = ?2 WHERE name = ?1",
                params![name, hash],
            )?;
            if changed == 0 {
                return Err(no_account(name));
            }
            tx.execute("DELETE FROM sessions WHERE account = ?1", [name])?;
            tx.commit()
        })
    }

    /// Changes an account's role; its sessions and tokens follow at once (a token never
    /// does more than its account may). Refused when it would demote the last admin.
    pub fn set_role(&self, name: &str, role: AccountRole) -> Result<()> {
        self.write(|c| {
            let tx = c.write_transaction()?;
            if role != AccountRole::Admin {
                keep_an_admin(&tx, name, &format!("making it {}", role.with_article()))?;
            }
            let changed = tx.execute(
                "UPDATE accounts SET role = ?2 WHERE name = ?1",
                params![name, role.as_str()],
            )?;
            if changed == 0 {
                return Err(no_account(name));
            }
            tx.commit()
        })
    }

    /// Removes an account with its sessions and API tokens; an error when there is none
    /// of that name, or when it is the last admin.
    pub fn remove_account(&self, name: &str) -> Result<()> {
        self.write(|c| {
            let tx = c.write_transaction()?;
            keep_an_admin(&tx, name, "removing it")?;
            tx.execute("DELETE FROM sessions WHERE account = ?1", [name])?;
            tx.execute("DELETE FROM api_tokens WHERE account = ?1", [name])?;
            if tx.execute("DELETE FROM accounts WHERE name = ?1", [name])? == 0 {
                // Nothing was deleted above either: the transaction ends undone.
                return Err(no_account(name));
            }
            tx.commit()
        })
    }

    /// Every account, by name.
    pub fn accounts(&self) -> Result<Vec<Account>> {
        self.read(|c| {
            c.query_map(
                "SELECT name, role, created_unix_ms FROM accounts ORDER BY name",
                (),
                Account::from_row,
            )
        })
    }

    /// The account named `name`, if there is one.
    pub fn account(&self, name: &str) -> Result<Option<Account>> {
        self.read(|c| {
            c.query_opt(
                "SELECT name, role, created_unix_ms FROM accounts WHERE name = ?1",
                [name],
                Account::from_row,
            )
        })
    }

    /// The account, when `password` is its password. Spends the same KDF time for an
    /// unknown name (no user enumeration by timing).
    pub fn check_password(&self, name: &str, password: &str) -> Result<Option<Account>> {
        let found = self.read(|c| {
            c.query_opt(
                "SELECT name, role, created_unix_ms, password_hash FROM accounts WHERE name = ?1",
                [name],
                |r| Ok((Account::from_row(r)?, r.get::<String>("password_hash")?)),
            )
        })?;
        Ok(match found {
            Some((account, hash)) => verify_password(password, &hash).then_some(account),
            None => {
                verify_password(password, &NO_ACCOUNT_HASH);
                None
            }
        })
    }

    /// Opens a session for `account`, valid for `ttl`. Sessions that have expired are
    /// deleted on the way, so the table holds only live ones and those not yet asked for.
    pub fn open_session(&self, account: &str, ttl: Duration) -> Result<NewSession> {
        let token = random_secret();
        let csrf = random_secret();
        let now = now_ms();
        let expires = now.saturating_add(ms(ttl));
        let role = self.write(|c| {
            let tx = c.write_transaction()?;
            let role = tx
                .query_opt(
                    "SELECT role FROM accounts WHERE name = ?1",
                    [account],
                    |r| AccountRole::stored(r.get("role")?),
                )?
                .ok_or_else(|| no_account(account))?;
            tx.execute("DELETE FROM sessions WHERE expires_unix_ms <= ?1", [now])?;
            tx.execute(
                "INSERT INTO sessions (token_hash, account, csrf, created_unix_ms, expires_unix_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![secret_hash(&token), account, csrf, now, expires],
            )?;
            tx.commit()?;
            Ok(role)
        })?;
        Ok(NewSession {
            token,
            session: Session {
                account: account.to_string(),
                role,
                csrf,
                expires_unix_ms: expires,
            },
        })
    }

    /// The live session `token` stands for; None when unknown or expired (an expired one is deleted).
    pub fn session(&self, token: &str) -> Result<Option<Session>> {
        let hash = secret_hash(token);
        let found = self.read(|c| {
            c.query_opt(
                "SELECT s.account, a.role, s.csrf, s.expires_unix_ms
                   FROM sessions s JOIN accounts a ON a.name = s.account
                  WHERE s.token_hash = ?1",
                [&hash],
                |r| {
                    Ok(Session {
                        account: r.get("account")?,
                        role: AccountRole::stored(r.get("role")?)?,
                        csrf: r.get("csrf")?,
                        expires_unix_ms: r.get("expires_unix_ms")?,
                    })
                },
            )
        })?;
        match found {
            Some(s) if s.expires_unix_ms <= now_ms() => {
                self.write(|c| {
                    c.execute("DELETE FROM sessions WHERE token_hash = ?1", [&hash])
                        .map(drop)
                })?;
                Ok(None)
            }
            found => Ok(found),
        }
    }

    /// Ends the session `token` stands for (signing out); nothing when there is none.
    pub fn end_session(&self, token: &str) -> Result<()> {
        self.write(|c| {
            c.execute(
                "DELETE FROM sessions WHERE token_hash = ?1",
                [secret_hash(token)],
            )
            .map(drop)
        })
    }

    /// Makes an API token for `account` that may do what `role` may: at most what the
    /// account may, an error otherwise.
    pub fn add_token(&self, account: &str, role: AccountRole, label: &str) -> Result<NewToken> {
        check_label(label)?;
        let secret = format!("{SECRET_PREFIX}{}", random_secret());
        let token = ApiToken {
            id: hex::encode(rand::random::<[u8; 8]>()),
            account: account.to_string(),
            role,
            label: label.to_string(),
            created_unix_ms: now_ms(),
            last_used_unix_ms: None,
        };
        self.write(|c| {
            let tx = c.write_transaction()?;
            let has = tx
                .query_opt(
                    "SELECT role FROM accounts WHERE name = ?1",
                    [account],
                    |r| AccountRole::stored(r.get("role")?),
                )?
                .ok_or_else(|| no_account(account))?;
            if !has.allows(role) {
                return Err(StoreError::Account(format!(
                    "a token's role cannot exceed its account's ({account} is {})",
                    has.with_article()
                )));
            }
            tx.execute(
                "INSERT INTO api_tokens (id, secret_hash, account, role, label, created_unix_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    token.id,
                    secret_hash(&secret),
                    account,
                    role.as_str(),
                    label,
                    token.created_unix_ms
                ],
            )?;
            tx.commit()
        })?;
        Ok(NewToken { secret, token })
    }

    /// The token `secret` stands for (marks last use); None when unknown/revoked. Its role is
    /// min(token's role, the account's current role).
    pub fn token(&self, secret: &str) -> Result<Option<ApiToken>> {
        let hash = secret_hash(secret);
        let found = self.read(|c| {
            c.query_opt(
                &format!("{TOKEN_ROWS} WHERE t.secret_hash = ?1"),
                [&hash],
                token_row,
            )
        })?;
        let Some(mut token) = found else {
            return Ok(None);
        };
        let now = now_ms();
        if token
            .last_used_unix_ms
            .is_none_or(|at| at <= now - LAST_USE_EVERY_MS)
        {
            self.write(|c| {
                c.execute(
                    "UPDATE api_tokens SET last_used_unix_ms = ?2 WHERE id = ?1",
                    params![token.id, now],
                )
                .map(drop)
            })?;
            token.last_used_unix_ms = Some(now);
        }
        Ok(Some(token))
    }

    /// Every API token, by account, then oldest first.
    pub fn tokens(&self) -> Result<Vec<ApiToken>> {
        self.read(|c| {
            c.query_map(
                &format!("{TOKEN_ROWS} ORDER BY t.account, t.created_unix_ms, t.id"),
                (),
                token_row,
            )
        })
    }

    /// Revokes the token `id`: its secret opens nothing from now on. An error when there
    /// is no such token.
    pub fn revoke_token(&self, id: &str) -> Result<()> {
        self.write(
            |c| match c.execute("DELETE FROM api_tokens WHERE id = ?1", [id])? {
                0 => Err(StoreError::Account(format!("no API token with id {id:?}"))),
                _ => Ok(()),
            },
        )
    }
}

impl Account {
    /// An account of a row that has its `name`, `role` and `created_unix_ms`.
    fn from_row(r: &super::db::Row<'_>) -> Result<Account> {
        Ok(Account {
            name: r.get("name")?,
            role: AccountRole::stored(r.get("role")?)?,
            created_unix_ms: r.get("created_unix_ms")?,
        })
    }
}

/// Refuses, inside a write transaction `tx`, a change (`doing`, "removing it") that takes
/// the admin role from `name` when it is the last admin: nobody could then manage
/// accounts from the console, and getting one back would need the store's host.
/// On PostgreSQL the admins' rows are locked first (in name order, so two such changes
/// wait for each other rather than deadlock): two coordinators demoting the last two
/// admins at once would otherwise each see the other still an admin, and both commit.
/// SQLite's write transaction holds the whole database already.
fn keep_an_admin(tx: &super::db::Conn, name: &str, doing: &str) -> Result<()> {
    let sql = if tx.is_postgres() {
        "SELECT name FROM accounts WHERE role = 'admin' ORDER BY name FOR UPDATE"
    } else {
        "SELECT name FROM accounts WHERE role = 'admin' ORDER BY name"
    };
    let admins: Vec<String> = tx.query_map(sql, (), |r| r.get("name"))?;
    if admins == [name] {
        return Err(StoreError::Account(format!(
            "{name} is the last admin: {doing} would leave nobody to manage accounts; \
             make another account admin first"
        )));
    }
    Ok(())
}

/// Tokens with their account's role, read by `token_row`.
const TOKEN_ROWS: &str =
    "SELECT t.id, t.account, t.role AS made_as, a.role AS account_role, t.label, t.created_unix_ms,
           t.last_used_unix_ms
   FROM api_tokens t JOIN accounts a ON a.name = t.account";

fn token_row(r: &super::db::Row<'_>) -> Result<ApiToken> {
    let made_as = AccountRole::stored(r.get("made_as")?)?;
    let account_role = AccountRole::stored(r.get("account_role")?)?;
    Ok(ApiToken {
        id: r.get("id")?,
        account: r.get("account")?,
        role: made_as.min(account_role),
        label: r.get("label")?,
        created_unix_ms: r.get("created_unix_ms")?,
        last_used_unix_ms: r.get("last_used_unix_ms")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing;

    const PASSWORD: &str = "correct horse battery";

    fn sessions_of(store: &Store, account: &str) -> i64 {
        store
            .read(|c| {
                c.query_row(
                    "SELECT COUNT(*) FROM sessions WHERE account = ?1",
                    [account],
                    |r| r.only(),
                )
            })
            .unwrap()
    }

    fn account_error<T: std::fmt::Debug>(r: Result<T>) -> String {
        match r {
            Err(StoreError::Account(words)) => words,
            r => panic!("expected an account error, got {r:?}"),
        }
    }

    #[test]
    fn roles_include_the_ones_before_them() {
        use AccountRole::*;
        assert!(Admin.allows(Operator) && Admin.allows(Viewer) && Operator.allows(Viewer));
        assert!(!Viewer.allows(Operator) && !Operator.allows(Admin));
        for role in [Viewer, Operator, Admin] {
            assert!(role.allows(role));
            assert_eq!(AccountRole::parse(role.as_str()), Some(role));
            assert_eq!(
                serde_json::to_string(&role).unwrap(),
                format!("\"{}\"", role.as_str())
            );
        }
        assert_eq!(AccountRole::parse("Admin"), None);
        assert_eq!(AccountRole::parse("root"), None);
    }

    #[test]
    fn a_password_opens_its_account_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        for store in testing::stores(dir.path()) {
            let alice = store
                .add_account("alice", AccountRole::Admin, PASSWORD)
                .unwrap();
            assert_eq!(
                (alice.name.as_str(), alice.role),
                ("alice", AccountRole::Admin)
            );
            store
                .add_account("bob@lab", AccountRole::Viewer, "another long password")
                .unwrap();
            assert_eq!(
                store.check_password("alice", PASSWORD).unwrap(),
                Some(alice.clone())
            );
            assert_eq!(
                store.check_password("alice", "wrong password!").unwrap(),
                None
            );
            assert_eq!(store.check_password("alice", "").unwrap(), None);
            // Another account's password opens only that account.
            assert_eq!(
                store
                    .check_password("alice", "another long password")
                    .unwrap(),
                None
            );
            assert_eq!(store.check_password("carol", PASSWORD).unwrap(), None);
            let names: Vec<_> = store
                .accounts()
                .unwrap()
                .into_iter()
                .map(|a| (a.name, a.role))
                .collect();
            assert_eq!(
                names,
                [
                    ("alice".to_string(), AccountRole::Admin),
                    ("bob@lab".to_string(), AccountRole::Viewer)
                ]
            );
            // Only the Argon2id hash is stored.
            let stored: String = store
                .read(|c| {
                    c.query_row(
                        "SELECT password_hash FROM accounts WHERE name = 'alice'",
                        (),
                        |r| r.only(),
                    )
                })
                .unwrap();
            assert!(stored.starts_with("$argon2id$"), "{stored}");
            assert!(!stored.contains(PASSWORD));
            // An unknown name is checked against a hash of the same algorithm and cost,
            // so it takes as long as a known one.
            let cost = |phc: &str| {
                let h = PasswordHash::new(phc).unwrap();
                (h.algorithm.to_string(), h.version, h.params.to_string())
            };
            assert_eq!(cost(&NO_ACCOUNT_HASH), cost(&stored));
        }
    }

    #[test]
    fn account_input_is_refused_in_words() {
        let dir = tempfile::tempdir().unwrap();
        for store in testing::stores(dir.path()) {
            store
                .add_account("alice", AccountRole::Viewer, PASSWORD)
                .unwrap();
            assert_eq!(
                account_error(store.add_account("alice", AccountRole::Admin, PASSWORD)),
                "an account named \"alice\" exists"
            );
            assert_eq!(
                store.account("alice").unwrap().unwrap().role,
                AccountRole::Viewer
            );
            for bad in ["", "has space", "ünï", &"x".repeat(65), "a/b"] {
                let words = account_error(store.add_account(bad, AccountRole::Viewer, PASSWORD));
                assert!(words.contains("cannot name an account"), "{bad:?}: {words}");
            }
            assert!(store
                .add_account(&"x".repeat(64), AccountRole::Viewer, PASSWORD)
                .is_ok());
            assert_eq!(
                account_error(store.add_account("bob", AccountRole::Viewer, "short")),
                "a password needs at least 12 characters"
            );
            assert_eq!(
                account_error(store.set_password("alice", "elevenchars")),
                "a password needs at least 12 characters"
            );
            for r in [
                store.set_password("bob", PASSWORD),
                store.set_role("bob", AccountRole::Admin),
                store.remove_account("bob"),
            ] {
                assert_eq!(account_error(r), "no account named \"bob\"");
            }
            assert_eq!(
                account_error(
                    store
                        .open_session("bob", Duration::from_secs(60))
                        .map(|_| ())
                ),
                "no account named \"bob\""
            );
            assert_eq!(
                account_error(store.revoke_token("0123")),
                "no API token with id \"0123\""
            );
        }
    }

    #[test]
    fn a_new_password_replaces_the_old_and_ends_sessions() {
        let dir = tempfile::tempdir().unwrap();
        for store in testing::stores(dir.path()) {
            store
                .add_account("alice", AccountRole::Operator, PASSWORD)
                .unwrap();
            store
                .add_account("bob", AccountRole::Viewer, PASSWORD)
                .unwrap();
            let hers = store
                .open_session("alice", Duration::from_secs(3600))
                .unwrap();
            let his = store
                .open_session("bob", Duration::from_secs(3600))
                .unwrap();
            store.set_password("alice", "a brand new password").unwrap();
            assert_eq!(store.check_password("alice", PASSWORD).unwrap(), None);
            assert!(store
                .check_password("alice", "a brand new password")
                .unwrap()
                .is_some());
            assert_eq!(store.session(&hers.token).unwrap(), None);
            assert_eq!(store.session(&his.token).unwrap(), Some(his.session));
        }
    }

    #[test]
    fn a_session_lives_until_it_expires_or_ends() {
        let dir = tempfile::tempdir().unwrap();
        for store in testing::stores(dir.path()) {
            store
                .add_account("alice", AccountRole::Operator, PASSWORD)
                .unwrap();
            let before = now_ms();
            let open = store
                .open_session("alice", Duration::from_secs(3600))
                .unwrap();
            assert!(open.session.expires_unix_ms >= before + 3_600_000);
            assert_eq!(open.session.role, AccountRole::Operator);
            assert_eq!(
                store.session(&open.token).unwrap(),
                Some(open.session.clone())
            );
            // Two sessions never share a token or a CSRF token.
            let other = store
                .open_session("alice", Duration::from_secs(3600))
                .unwrap();
            assert_ne!(other.token, open.token);
            assert_ne!(other.session.csrf, open.session.csrf);
            assert_eq!(open.token.len(), 43);
            // The cookie's token is not what is stored.
            let stored: Vec<String> = store
                .read(|c| c.query_map("SELECT token_hash FROM sessions", (), |r| r.only()))
                .unwrap();
            assert!(stored.iter().all(|h| h.len() == 64 && *h != open.token));
            assert!(stored.contains(&secret_hash(&open.token)));

            // A role change reaches a live session at once.
            store.set_role("alice", AccountRole::Viewer).unwrap();
            assert_eq!(
                store.session(&open.token).unwrap().unwrap().role,
                AccountRole::Viewer
            );

            store.end_session(&open.token).unwrap();
            assert_eq!(store.session(&open.token).unwrap(), None);
            // Ending it again, or one never opened, is no error.
            store.end_session(&open.token).unwrap();
            store.end_session("never-opened").unwrap();
            assert_eq!(store.session("never-opened").unwrap(), None);
            assert!(store.session(&other.token).unwrap().is_some());

            // Expired the moment it opened: not served, and deleted when asked for.
            let gone = store.open_session("alice", Duration::ZERO).unwrap();
            assert_eq!(sessions_of(&store, "alice"), 2);
            assert_eq!(store.session(&gone.token).unwrap(), None);
            assert_eq!(sessions_of(&store, "alice"), 1);
            // One that expired unasked is deleted when the next session opens.
            store.open_session("alice", Duration::ZERO).unwrap();
            store
                .open_session("alice", Duration::from_secs(60))
                .unwrap();
            assert_eq!(sessions_of(&store, "alice"), 2);
        }
    }

    #[test]
    fn a_token_never_does_more_than_its_account() {
        let dir = tempfile::tempdir().unwrap();
        for store in testing::stores(dir.path()) {
            store
                .add_account("alice", AccountRole::Operator, PASSWORD)
                .unwrap();
            assert_eq!(
                account_error(
                    store
                        .add_token("alice", AccountRole::Admin, "ci")
                        .map(|_| ())
                ),
                "a token's role cannot exceed its account's (alice is an operator)"
            );
            assert_eq!(
                account_error(
                    store
                        .add_token("bob", AccountRole::Viewer, "ci")
                        .map(|_| ())
                ),
                "no account named \"bob\""
            );
            assert!(account_error(
                store
                    .add_token("alice", AccountRole::Viewer, " ")
                    .map(|_| ())
            )
            .contains("label"));
            let made = store
                .add_token("alice", AccountRole::Operator, "ci")
                .unwrap();
            assert!(made.secret.starts_with("plt_") && made.secret.len() == 47);
            assert_eq!(made.token.last_used_unix_ms, None);
            let listed = store.tokens().unwrap();
            assert_eq!(listed, std::slice::from_ref(&made.token));

            let before = now_ms();
            let found = store.token(&made.secret).unwrap().unwrap();
            assert_eq!(
                (found.id.as_str(), found.role),
                (made.token.id.as_str(), AccountRole::Operator)
            );
            assert!(found.last_used_unix_ms.unwrap() >= before);
            assert_eq!(
                store.tokens().unwrap()[0].last_used_unix_ms,
                found.last_used_unix_ms
            );
            // Used again within the minute: the last use is not written again.
            std::thread::sleep(Duration::from_millis(5));
            let again = store.token(&made.secret).unwrap().unwrap();
            assert_eq!(again.last_used_unix_ms, found.last_used_unix_ms);
            assert_eq!(store.token("plt_guessed").unwrap(), None);
            assert_eq!(store.token(&secret_hash(&made.secret)).unwrap(), None);

            // Demoted, the account takes its token down with it; promoted again, the token
            // gets back no more than it was made with.
            store.set_role("alice", AccountRole::Viewer).unwrap();
            assert_eq!(
                store.token(&made.secret).unwrap().unwrap().role,
                AccountRole::Viewer
            );
            assert_eq!(store.tokens().unwrap()[0].role, AccountRole::Viewer);
            store.set_role("alice", AccountRole::Admin).unwrap();
            assert_eq!(
                store.token(&made.secret).unwrap().unwrap().role,
                AccountRole::Operator
            );

            // A new password leaves tokens alone; revoking one ends it.
            store.set_password("alice", "a brand new password").unwrap();
            assert!(store.token(&made.secret).unwrap().is_some());
            store.revoke_token(&made.token.id).unwrap();
            assert_eq!(store.token(&made.secret).unwrap(), None);
            assert!(store.tokens().unwrap().is_empty());
            assert_eq!(
                account_error(store.revoke_token(&made.token.id)),
                format!("no API token with id {:?}", made.token.id)
            );
        }
    }

    #[test]
    fn the_last_admin_is_neither_removed_nor_demoted() {
        let dir = tempfile::tempdir().unwrap();
        for store in testing::stores(dir.path()) {
            store
                .add_account("alice", AccountRole::Admin, PASSWORD)
                .unwrap();
            store
                .add_account("bob", AccountRole::Operator, PASSWORD)
                .unwrap();
            let last = "alice is the last admin";
            let words = account_error(store.remove_account("alice"));
            assert!(
                words.starts_with(last) && words.contains("removing it"),
                "{words}"
            );
            for role in [AccountRole::Operator, AccountRole::Viewer] {
                let words = account_error(store.set_role("alice", role));
                assert!(
                    words.starts_with(last) && words.contains(role.with_article()),
                    "{words}"
                );
            }
            assert_eq!(
                store.account("alice").unwrap().unwrap().role,
                AccountRole::Admin
            );
            // Others come and go as before, and an admin may stay one.
            store.set_role("alice", AccountRole::Admin).unwrap();
            store.set_role("bob", AccountRole::Viewer).unwrap();
            // With a second admin, either may go.
            store.set_role("bob", AccountRole::Admin).unwrap();
            store.set_role("alice", AccountRole::Operator).unwrap();
            assert_eq!(
                account_error(store.remove_account("bob")),
                "bob is the last admin: removing it would leave nobody to manage accounts; \
                 make another account admin first"
            );
            store.set_role("alice", AccountRole::Admin).unwrap();
            store.remove_account("bob").unwrap();
            assert_eq!(store.account("bob").unwrap(), None);
            // An unknown name is still just unknown.
            assert_eq!(
                account_error(store.set_role("carol", AccountRole::Viewer)),
                "no account named \"carol\""
            );
        }
    }

    /// Two handles on one PostgreSQL store (two coordinators) demote its two admins at the
    /// same moment, many times over: one of them always stays.
    #[test]
    fn two_coordinators_demoting_the_last_two_admins_leave_one() {
        let Some(url) = testing::postgres_url() else {
            return;
        };
        let at = testing::fresh_postgres(&url);
        let (a, b) = (Store::open_at(&at).unwrap(), Store::open_at(&at).unwrap());
        a.add_account("alice", AccountRole::Admin, PASSWORD)
            .unwrap();
        a.add_account("bob", AccountRole::Admin, PASSWORD).unwrap();
        for _ in 0..20 {
            let start = std::sync::Barrier::new(2);
            let (ra, rb) = std::thread::scope(|s| {
                let ra = s.spawn(|| {
                    start.wait();
                    a.set_role("alice", AccountRole::Viewer)
                });
                let rb = s.spawn(|| {
                    start.wait();
                    b.set_role("bob", AccountRole::Viewer)
                });
                (ra.join().unwrap(), rb.join().unwrap())
            });
            assert!(ra.is_ok() != rb.is_ok(), "{ra:?} {rb:?}");
            let admins: Vec<_> = a
                .accounts()
                .unwrap()
                .into_iter()
                .filter(|x| x.role == AccountRole::Admin)
                .collect();
            assert_eq!(admins.len(), 1, "{admins:?}");
            let demoted = if ra.is_ok() { "alice" } else { "bob" };
            a.set_role(demoted, AccountRole::Admin).unwrap();
        }
    }

    #[test]
    fn removing_an_account_takes_its_sessions_and_tokens() {
        let dir = tempfile::tempdir().unwrap();
        for store in testing::stores(dir.path()) {
            store
                .add_account("alice", AccountRole::Admin, PASSWORD)
                .unwrap();
            store
                .add_account("bob", AccountRole::Admin, PASSWORD)
                .unwrap();
            let session = store
                .open_session("alice", Duration::from_secs(60))
                .unwrap();
            let token = store
                .add_token("alice", AccountRole::Viewer, "cron")
                .unwrap();
            let kept = store.open_session("bob", Duration::from_secs(60)).unwrap();
            let kept_token = store.add_token("bob", AccountRole::Admin, "ci").unwrap();
            store.remove_account("alice").unwrap();
            assert_eq!(store.check_password("alice", PASSWORD).unwrap(), None);
            assert_eq!(store.session(&session.token).unwrap(), None);
            assert_eq!(store.token(&token.secret).unwrap(), None);
            assert_eq!(sessions_of(&store, "alice"), 0);
            let left: Vec<_> = store
                .tokens()
                .unwrap()
                .into_iter()
                .map(|t| t.account)
                .collect();
            assert_eq!(left, ["bob"]);
            assert!(store.session(&kept.token).unwrap().is_some());
            assert!(store.token(&kept_token.secret).unwrap().is_some());
            // The name is free again, and the old secrets open nothing of the new account.
            store
                .add_account("alice", AccountRole::Admin, PASSWORD)
                .unwrap();
            assert_eq!(store.session(&session.token).unwrap(), None);
            assert_eq!(store.token(&token.secret).unwrap(), None);
        }
    }
}
