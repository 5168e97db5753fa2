//! `platter certs`: the fleet's CA and identities on disk (`crate::pki` makes and reads
//! them). A refusal (an identity or CA already there) exits with the usage status.

use super::*;
use crate::pki::{self, Existing, Lifetime, Listed, Refusal};
use time::OffsetDateTime;

/// A certificate expiring within this many days is warned about.
const WARN_DAYS: i64 = 30;

pub(super) fn certs(command: Certs) -> anyhow::Result<i32> {
    let result = match command {
        Certs::Init { dir, days } => pki::init(&dir, days).map(|ca| {
            println!("{}", ca.display());
            eprintln!(
                "fleet CA written to {}; keep ca-key.pem private (it signs every identity)",
                ca.display()
            );
        }),
        Certs::Issue {
            role,
            names,
            dir,
            days,
            hours,
            force,
        } => {
            let lifetime = hours.map_or(Lifetime::Days(days), Lifetime::Hours);
            let existing = if force {
                Existing::Replace
            } else {
                Existing::Refuse
            };
            pki::issue_to_dir(&dir, role, &names, lifetime, existing).map(|out| {
                println!("{}", out.display());
                eprintln!(
                    "{} certificate for {} written to {} (use it as --tls-dir)",
                    role.as_str(),
                    names.join(", "),
                    out.display()
                );
            })
        }
        Certs::List { dir, format } => return list(&dir, format),
    };
    match result {
        Ok(()) => Ok(0),
        Err(e) => match e.downcast_ref::<Refusal>() {
            Some(r) => {
                eprintln!("error: {r}");
                Ok(EXIT_INVALID)
            }
            None => Err(e),
        },
    }
}

/// `platter certs list`: the table or JSON on stdout, a warning on stderr for each
/// certificate expired or expiring within `WARN_DAYS`.
fn list(dir: &Path, format: Format) -> anyhow::Result<i32> {
    let listing = pki::list(dir)?;
    let now = OffsetDateTime::now_utc();
    for u in &listing.unreadable {
        eprintln!("warning: {u}");
    }
    if listing.certificates.is_empty() {
        eprintln!(
            "no certificates in {} (`platter certs init --dir {0}` makes the CA)",
            dir.display()
        );
    }
    for c in &listing.certificates {
        let what = format!("{} {} ({})", c.role_name(), c.common_name, c.dir);
        match Expiry::of(c, now) {
            Expiry::Expired => eprintln!("warning: {what} EXPIRED on {}", date(c.not_after)),
            Expiry::Soon(days) => eprintln!(
                "warning: {what} expires in {} on {}",
                days_text(days),
                date(c.not_after)
            ),
            Expiry::Later(_) => {}
        }
    }
    print!("{}", render_list(&listing.certificates, now, format));
    Ok(0)
}

/// Where a certificate stands: days left are whole days, rounded down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expiry {
    Expired,
    Soon(i64),
    Later(i64),
}

impl Expiry {
    fn of(c: &Listed, now: OffsetDateTime) -> Expiry {
        let days = (c.not_after - now).whole_days();
        if c.not_after <= now {
            Expiry::Expired
        } else if days < WARN_DAYS {
            Expiry::Soon(days)
        } else {
            Expiry::Later(days)
        }
    }
}

fn days_text(days: i64) -> String {
    match days {
        0 => "less than a day".into(),
        1 => "1 day".into(),
        d => format!("{d} days"),
    }
}

/// `2026-12-02 07:24 UTC`.
pub(super) fn date(t: OffsetDateTime) -> String {
    let t = t.to_offset(time::UtcOffset::UTC);
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02} UTC",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute()
    )
}

fn render_list(certs: &[Listed], now: OffsetDateTime, format: Format) -> String {
    if format == Format::Json {
        let v: Vec<_> = certs
            .iter()
            .map(|c| {
                let expiry = Expiry::of(c, now);
                serde_json::json!({
                    "dir": c.dir,
                    "role": c.role_name(),
                    "common_name": c.common_name,
                    "names": c.names,
                    "not_after": c.not_after.unix_timestamp(),
                    "expires": date(c.not_after),
                    "days_left": (c.not_after - now).whole_days(),
                    "expired": expiry == Expiry::Expired,
                    "expiring_soon": matches!(expiry, Expiry::Soon(_)),
                })
            })
            .collect();
        return serde_json::to_string_pretty(&v).expect("json") + "\n";
    }
    let rows: Vec<Vec<String>> = certs
        .iter()
        .map(|c| {
            let (left, note) = match Expiry::of(c, now) {
                Expiry::Expired => ("-".to_string(), "EXPIRED"),
                Expiry::Soon(d) => (d.to_string(), "expires within 30 days"),
                Expiry::Later(d) => (d.to_string(), ""),
            };
            vec![
                c.role_name().to_string(),
                c.dir.clone(),
                c.names.join(", "),
                date(c.not_after),
                left,
                note.to_string(),
            ]
        })
        .collect();
    let header: Vec<String> = ["ROLE", "DIRECTORY", "NAMES", "EXPIRES", "DAYS LEFT", ""]
        .map(String::from)
        .into();
    let widths = crate::report::widths(&header, &rows);
    let mut out = String::new();
    for r in std::iter::once(&header).chain(&rows) {
        out += &crate::report::aligned(r, &widths, "", "  ");
        out.push('\n');
    }
    out
}
