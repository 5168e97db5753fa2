//! What the console asks of flags and alert rules beyond what the CLI does: flags counted
//! by state (the overview's count and the flags page's headline, without reading every
//! flag), and an alert rule checked and shown as `platter alerts add`/`list` check and
//! show one (a secret named, never written; e-mail through smtp:// to someone; a URL's
//! path, which may be a token, never shown).

use super::alerts::{is_reference, Channel, Rule, Silence};
use super::error::Result;
use super::flags::{FlagKind, FlagState};
use super::Store;

impl Store {
    /// How many flags there are and when the last of them changed (raised, refreshed,
    /// set a state): what a live page looks at to know whether to look again.
    pub fn flags_changed(&self) -> Result<(i64, i64)> {
        self.read(|c| {
            c.query_row(
                "SELECT COUNT(*) AS n, COALESCE(MAX(updated_unix_ms), 0) AS at FROM flags",
                (),
                |r| Ok((r.get("n")?, r.get("at")?)),
            )
        })
    }

    /// How many flags are in each state, in `FlagState::ALL`'s order (zeros included).
    pub fn flag_counts(&self) -> Result<Vec<(FlagState, usize)>> {
        let counted: Vec<(String, i64)> = self.read(|c| {
            c.query_map(
                "SELECT state, COUNT(*) AS n FROM flags GROUP BY state",
                (),
                |r| Ok((r.get("state")?, r.get("n")?)),
            )
        })?;
        Ok(FlagState::ALL
            .iter()
            .map(|s| {
                let n = counted
                    .iter()
                    .find(|(state, _)| state == s.as_str())
                    .map_or(0, |(_, n)| *n);
                (*s, n.max(0) as usize)
            })
            .collect())
    }
}

impl Rule {
    /// Why this rule cannot be kept, in the words of the form's fields; `None` when it
    /// can. The checks of `platter alerts add`: a secret is named where it is read, an
    /// e-mail rule sends through smtp:// to at least one recipient, a webhook is an
    /// http(s):// URL or names where one is read.
    pub fn problem(&self) -> Option<String> {
        if self.name.trim().is_empty() {
            return Some("a rule needs a name".into());
        }
        if !is_reference(&self.secret) {
            return Some(
                "the secret is named where it is read (env:NAME or file:PATH); the store never \
                 keeps one"
                    .into(),
            );
        }
        let reference = self.target.starts_with("env:") || self.target.starts_with("file:");
        match self.channel {
            Channel::Email if !self.target.starts_with("smtp://") => Some(format!(
                "target {:?}: an e-mail rule sends through smtp://HOST:PORT",
                self.target
            )),
            Channel::Email if self.recipients.is_empty() => {
                Some("an e-mail rule needs a recipient (to)".into())
            }
            Channel::Webhook | Channel::Slack
                if !(self.target.starts_with("http://")
                    || self.target.starts_with("https://")
                    || reference) =>
            {
                Some(format!(
                    "target {:?}: a webhook is an http(s):// URL, or env:NAME / file:PATH naming \
                     one",
                    self.target
                ))
            }
            _ => None,
        }
    }

    /// Where the rule sends, as a listing may show it: e-mail's recipients and server, a
    /// reference as written, a URL's scheme, host and port only (Slack's path is its token).
    pub fn shown_to(&self) -> String {
        if self.channel == Channel::Email {
            return format!("{} via {}", self.recipients.join(", "), self.target);
        }
        if self.target.starts_with("env:") || self.target.starts_with("file:") {
            return self.target.clone();
        }
        let Ok(url) = reqwest::Url::parse(&self.target) else {
            return "(not a URL)".into();
        };
        let port = url.port().map(|p| format!(":{p}")).unwrap_or_default();
        let path = if url.path().len() > 1 || url.query().is_some() {
            "/…"
        } else {
            ""
        };
        format!(
            "{}://{}{port}{path}",
            url.scheme(),
            url.host_str().unwrap_or("")
        )
    }
}

impl Silence {
    /// What it silences: "kind health, host rc66".
    pub fn what(&self) -> String {
        let named = [
            ("kind", &self.kind),
            ("series", &self.series),
            ("host", &self.host),
            ("model", &self.model),
        ];
        let what: Vec<String> = named
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        what.join(", ")
    }

    /// Why this silence cannot be kept, as `platter alerts silence` refuses it: an unknown
    /// kind, or nothing named to silence.
    pub fn problem(&self) -> Option<String> {
        if self.id.trim().is_empty() {
            return Some("a silence needs a name".into());
        }
        if !self.kind.is_empty() && FlagKind::parse(&self.kind).is_none() {
            return Some(format!("kind {:?} is not a kind of flag", self.kind));
        }
        if [&self.host, &self.series, &self.model, &self.kind]
            .iter()
            .all(|s| s.is_empty())
        {
            return Some(
                "a silence names what it silences: a host, series, model or kind ('*' as the \
                 host for everything)"
                    .into(),
            );
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::flags::Severity;

    fn rule(channel: Channel, target: &str) -> Rule {
        Rule {
            name: "ops".into(),
            channel,
            target: target.into(),
            secret: String::new(),
            recipients: Vec::new(),
            sender: "platter@localhost".into(),
            kinds: Vec::new(),
            min_severity: Severity::Warning,
            series: String::new(),
            host: String::new(),
            model: String::new(),
            digest_after: 5,
            created_unix_ms: 0,
        }
    }

    #[test]
    fn a_rule_is_checked_as_platter_alerts_add_checks_it() {
        assert_eq!(
            rule(Channel::Webhook, "http://127.0.0.1:9/hook").problem(),
            None
        );
        assert_eq!(rule(Channel::Slack, "env:SLACK_URL").problem(), None);
        assert!(rule(Channel::Webhook, "ftp://x/")
            .problem()
            .unwrap()
            .contains("http(s)://"));
        let secret = Rule {
            secret: "hunter2".into(),
            ..rule(Channel::Webhook, "http://x/")
        };
        assert!(secret.problem().unwrap().contains("env:NAME or file:PATH"));
        let mail = rule(Channel::Email, "smtp://mail:587");
        assert!(mail.problem().unwrap().contains("recipient"));
        let mail = Rule {
            recipients: vec!["ops@example.com".into()],
            ..mail
        };
        assert_eq!(mail.problem(), None);
        assert!(Rule {
            target: "https://mail/".into(),
            ..mail
        }
        .problem()
        .unwrap()
        .contains("smtp://"));
    }

    #[test]
    fn a_rules_target_is_shown_without_its_path() {
        assert_eq!(
            rule(
                Channel::Slack,
                "https://hooks.slack.com/services/T000/B000/XXXX"
            )
            .shown_to(),
            "https://hooks.slack.com/…"
        );
        assert_eq!(
            rule(Channel::Webhook, "http://127.0.0.1:8080/").shown_to(),
            "http://127.0.0.1:8080"
        );
        assert_eq!(
            rule(Channel::Webhook, "http://h/?token=x").shown_to(),
            "http://h/…"
        );
        assert_eq!(
            rule(Channel::Slack, "file:/etc/slack").shown_to(),
            "file:/etc/slack"
        );
    }
}
