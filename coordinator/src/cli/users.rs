//! `platter users` and `platter tokens`: the browser console's accounts and API tokens,
//! kept in the store and changed there directly, as `platter db` does, with no coordinator
//! in between. A password is read here (a file, a terminal with no echo, or one line of
//! stdin) and handed to the store, which keeps only its hash; it is never printed. A
//! token's secret is printed once, on stdout, and never again.
//!
//! Bad input (a name, a role, a short password, an account that exists or does not) ends
//! with `error: …` and exit status 2; a store that cannot be reached, with 1.

use std::io::{BufRead, IsTerminal};

use super::*;
use crate::store::accounts::{check_new_password, Account, ApiToken};
use crate::store::db::Location;
use crate::store::{Store, StoreError};

/// Input the command cannot act on, in words for the operator (exit status 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(super) struct Invalid(pub(super) String);

/// `platter users …`.
pub(super) fn users(command: Users) -> anyhow::Result<i32> {
    finish(match command {
        Users::Add {
            name,
            role,
            password,
            store,
        } => open(&store).and_then(|store| {
            let password = new_password(&password, &name)?;
            store.add_account(&name, role, &password)?;
            eprintln!("account {name} ({role}) added");
            Ok(())
        }),
        Users::List { output, store } => open(&store).and_then(|store| {
            print!("{}", render_accounts(&store.accounts()?, output));
            Ok(())
        }),
        Users::Remove { name, store } => open(&store).and_then(|store| {
            store.remove_account(&name)?;
            eprintln!("account {name} removed, with its sessions and API tokens");
            Ok(())
        }),
        Users::Password {
            name,
            password,
            store,
        } => open(&store).and_then(|store| {
            // Known before the password is asked for, so nobody types one twice for nothing.
            if store.account(&name)?.is_none() {
                return Err(no_account(&name));
            }
            let password = new_password(&password, &name)?;
            store.set_password(&name, &password)?;
            eprintln!("password of {name} changed; its browsers are signed out");
            Ok(())
        }),
        Users::Role { name, role, store } => open(&store).and_then(|store| {
            store.set_role(&name, role)?;
            eprintln!("{name} is now {role}");
            Ok(())
        }),
    })
}

/// `platter tokens …`.
pub(super) fn tokens(command: Tokens) -> anyhow::Result<i32> {
    finish(match command {
        Tokens::Add {
            user,
            role,
            label,
            store,
        } => open(&store).and_then(|store| {
            let role = match role {
                Some(role) => role,
                None => store.account(&user)?.ok_or_else(|| no_account(&user))?.role,
            };
            let made = store.add_token(&user, role, &label)?;
            println!("{}", made.secret);
            eprintln!(
                "API token {} for {user} ({role}, {label:?}): its secret (above) is shown \
                 only now; the store keeps only its hash",
                made.token.id
            );
            Ok(())
        }),
        Tokens::List { output, store } => open(&store).and_then(|store| {
            print!("{}", render_tokens(&store.tokens()?, output));
            Ok(())
        }),
        Tokens::Revoke { id, store } => open(&store).and_then(|store| {
            store.revoke_token(&id)?;
            eprintln!("API token {id} revoked");
            Ok(())
        }),
    })
}

/// The exit status of a command that ended with `r`: bad input is said here (status 2),
/// anything else goes to `main` (status 1).
pub(super) fn finish(r: anyhow::Result<()>) -> anyhow::Result<i32> {
    match r {
        Ok(()) => Ok(0),
        Err(e)
            if e.downcast_ref::<Invalid>().is_some()
                || matches!(
                    e.downcast_ref::<StoreError>(),
                    Some(StoreError::Account(_) | StoreError::Refused(_) | StoreError::NoFlag(_))
                ) =>
        {
            eprintln!("error: {e}");
            Ok(EXIT_INVALID)
        }
        Err(e) => Err(e),
    }
}

fn no_account(name: &str) -> anyhow::Error {
    Invalid(format!("no account named {name:?}")).into()
}

/// The store `--db` names. An SQLite file must exist: a mistyped path would otherwise
/// become a new, empty store that no coordinator reads.
pub(super) fn open(arg: &StoreArg) -> anyhow::Result<Store> {
    if let Location::Sqlite(path) = &arg.db {
        if !path.exists() {
            return Err(Invalid(format!(
                "no store at {}: `platter serve --db {0}` or `platter db migrate --db {0}` \
                 makes it; --db (or PLATTER_DB) names another",
                path.display()
            ))
            .into());
        }
    }
    // One record writer: no agent's records come through this store.
    Store::open_with_writers(&arg.db, 1).with_context(|| format!("opening the store {}", arg.db))
}

/// A new password for `name`, from where `arg` says, long enough.
fn new_password(arg: &PasswordArg, name: &str) -> anyhow::Result<String> {
    let password = match &arg.password_file {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                Invalid(format!(
                    "cannot read the password file {}: {e}",
                    path.display()
                ))
            })?;
            let line = without_line_end(&text);
            if line.contains('\n') {
                return Err(Invalid(format!(
                    "{} holds more than one line; the password is the file's one line",
                    path.display()
                ))
                .into());
            }
            line.to_string()
        }
        None if std::io::stdin().is_terminal() => {
            let first = rpassword::prompt_password(format!("new password for {name}: "))
                .context("reading the password from the terminal")?;
            // Said before the second prompt: typing a refused password twice helps no one.
            check_new_password(&first)?;
            let again = rpassword::prompt_password("the same again: ")
                .context("reading the password from the terminal")?;
            if again != first {
                return Err(Invalid("the two passwords differ; nothing was changed".into()).into());
            }
            first
        }
        None => {
            let mut line = String::new();
            std::io::stdin()
                .lock()
                .read_line(&mut line)
                .context("reading the password from stdin")?;
            without_line_end(&line).to_string()
        }
    };
    check_new_password(&password)?;
    Ok(password)
}

/// `text` without one final line break (`\n` or `\r\n`).
fn without_line_end(text: &str) -> &str {
    let text = text.strip_suffix('\n').unwrap_or(text);
    text.strip_suffix('\r').unwrap_or(text)
}

/// A time from the store as `certs list` shows one: `2026-12-02 07:24 UTC`.
pub(super) fn when(unix_ms: i64) -> String {
    let t = time::OffsetDateTime::from_unix_timestamp(unix_ms.div_euclid(1000))
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    certs::date(t)
}

fn render_accounts(accounts: &[Account], output: Format) -> String {
    if output == Format::Json {
        return serde_json::to_string_pretty(accounts).expect("accounts serialize") + "\n";
    }
    if accounts.is_empty() {
        return "No accounts: `platter users add NAME --role admin` makes the first.\n".into();
    }
    let rows = accounts
        .iter()
        .map(|a| vec![a.name.clone(), a.role.to_string(), when(a.created_unix_ms)])
        .collect::<Vec<_>>();
    crate::report::table(&["NAME", "ROLE", "CREATED"], &rows)
}

fn render_tokens(tokens: &[ApiToken], output: Format) -> String {
    if output == Format::Json {
        return serde_json::to_string_pretty(tokens).expect("tokens serialize") + "\n";
    }
    if tokens.is_empty() {
        return "No API tokens.\n".into();
    }
    let rows = tokens
        .iter()
        .map(|t| {
            vec![
                t.id.clone(),
                t.account.clone(),
                t.role.to_string(),
                t.label.clone(),
                when(t.created_unix_ms),
                t.last_used_unix_ms.map_or("never".into(), when),
            ]
        })
        .collect::<Vec<_>>();
    crate::report::table(
        &["ID", "USER", "ROLE", "LABEL", "CREATED", "LAST USED"],
        &rows,
    )
}
