//! `platter flags`, `platter flag` and `platter alerts`: flags with a life and the rules
//! that send them. `flags` and `flag` work on the store directly (`--db`) or through a
//! coordinator (`ListFlags`, `SetFlagState`, an operator certificate); `alerts` on the store
//! directly, as `platter users` does. The coordinators of `platter serve` raise the flags
//! and deliver the alerts (`service::alerts`); these commands read and change what they
//! work from. Bad input (an unknown id, state or kind, a secret written out) ends with
//! `error: …` and exit status 2.

use super::users::{finish, open, when, Invalid};
use super::*;
use crate::service::alerts::channels;
use crate::store::alerts::{Channel, Rule, Silence};
use crate::store::error::now_ms;
use crate::store::flags::{Flag, FlagFilter, FlagKind, FlagState, Severity};

/// Where flags are read and changed: the store (`--db`, else the default file unless a
/// coordinator is named), or a coordinator.
enum Source {
    Store(StoreArg),
    Coordinator(crate::client::ClientArgs),
}

impl Source {
    fn of(s: FlagSource) -> Source {
        match s.db {
            Some(db) => Source::Store(StoreArg { db }),
            None if s.client.names_a_coordinator() => Source::Coordinator(s.client),
            None => Source::Store(StoreArg {
                db: crate::store::db::Location::from_arg(std::path::Path::new(DEFAULT_STORE)),
            }),
        }
    }
}

/// A coordinator's refusal of a flag call: the caller's mistake (exit 2), or an error.
fn refused(what: &str, s: tonic::Status) -> anyhow::Error {
    match s.code() {
        tonic::Code::NotFound | tonic::Code::InvalidArgument => {
            Invalid(s.message().to_string()).into()
        }
        _ => call_error(what, s),
    }
}

/// `platter flags`: exit 1 when a flag it lists is open.
pub(super) async fn list(a: FlagsArgs) -> anyhow::Result<i32> {
    let mut open_seen = false;
    let status = finish(
        async {
            let state = match a.state.as_deref() {
                None | Some("all") | Some("live") => None,
                Some(s) => Some(FlagState::parse(s).ok_or_else(|| {
                    Invalid(format!(
                        "--state {s:?}: a state is open, acknowledged, false-positive, fixed or all"
                    ))
                })?),
            };
            let kind = a
                .kind
                .as_deref()
                .map(|k| {
                    FlagKind::parse(k).ok_or_else(|| {
                        Invalid(format!("--kind {k:?}: a kind is one of {}", kind_words()))
                    })
                })
                .transpose()?;
            // Without --state: the live ones; `all` everything.
            let live_only = a.state.is_none() || a.state.as_deref() == Some("live");
            let flags = match Source::of(a.source) {
                Source::Store(store) => {
                    let (series, host) = (a.series.clone(), a.host.clone());
                    tokio::task::spawn_blocking(move || -> anyhow::Result<Vec<Flag>> {
                        let mut flags = open(&store)?.flags(&FlagFilter {
                            state,
                            kind,
                            series,
                            host,
                            model: None,
                            limit: None,
                        })?;
                        if live_only {
                            flags.retain(|f| f.state.is_live());
                        }
                        Ok(flags)
                    })
                    .await??
                }
                Source::Coordinator(client) => {
                    let states = match (state, live_only) {
                        (Some(s), _) => vec![crate::views::state_to_pb(s) as i32],
                        // Every state asked for by name; none means the live ones.
                        (None, false) => FlagState::ALL
                            .iter()
                            .map(|s| crate::views::state_to_pb(*s) as i32)
                            .collect(),
                        (None, true) => Vec::new(),
                    };
                    let req = pb::ListFlagsRequest {
                        states,
                        kind: kind.map_or(0, |k| crate::views::kind_to_pb(k) as i32),
                        series: a.series.clone().unwrap_or_default(),
                        host: a.host.clone().unwrap_or_default(),
                        limit: 0,
                    };
                    let answer = client
                        .connect()
                        .await?
                        .list_flags(req)
                        .await
                        .map_err(|s| refused("listing flags", s))?;
                    answer
                        .into_inner()
                        .flags
                        .into_iter()
                        .map(crate::views::flag_of)
                        .collect()
                }
            };
            let mut flags = flags;
            flags.truncate(a.limit);
            open_seen = flags.iter().any(|f| f.state == FlagState::Open);
            print!("{}", render_flags(&flags, a.format));
            Ok(())
        }
        .await,
    )?;
    Ok(if status == 0 && open_seen { 1 } else { status })
}

fn kind_words() -> String {
    FlagKind::ALL
        .iter()
        .map(|k| k.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// "2026-12-06 14:02 UTC"
fn at(unix_ms: i64) -> String {
    when(unix_ms)
}

fn render_flags(flags: &[Flag], format: Format) -> String {
    match format {
        Format::Json => serde_json::to_string_pretty(flags).expect("flags serialize") + "\n",
        Format::Csv => {
            let mut out = String::from(
                "id,state,severity,kind,series,host,cell,metric,campaign_id,raised_unix_ms,state_by,note,summary\n",
            );
            for f in flags {
                let row = [
                    f.id.clone(),
                    f.state.as_str().into(),
                    f.severity.as_str().into(),
                    f.kind.as_str().into(),
                    f.series.clone(),
                    f.host.clone(),
                    f.cell.clone(),
                    f.metric.clone(),
                    f.campaign_id.clone(),
                    f.raised_unix_ms.to_string(),
                    f.state_by.clone(),
                    f.note.clone(),
                    f.summary.clone(),
                ];
                let row: Vec<String> = row.iter().map(|s| crate::report::csv_field(s)).collect();
                out.push_str(&row.join(","));
                out.push('\n');
            }
            out
        }
        _ => {
            if flags.is_empty() {
                return "No flags.\n".into();
            }
            let rows: Vec<Vec<String>> = flags
                .iter()
                .map(|f| {
                    let state = match (f.state, f.note.is_empty()) {
                        (FlagState::Open, _) | (_, true) => f.state.as_str().to_string(),
                        (s, false) => format!("{}: {}", s.as_str(), f.note),
                    };
                    vec![
                        f.id.clone(),
                        f.severity.as_str().to_uppercase(),
                        f.kind.as_str().into(),
                        state,
                        at(f.raised_unix_ms),
                        f.summary.clone(),
                    ]
                })
                .collect();
            crate::report::table(
                &["ID", "SEVERITY", "KIND", "STATE", "RAISED", "WHAT"],
                &rows,
            )
        }
    }
}

/// `platter flag ID ACTION`.
pub(super) async fn set(a: FlagArgs) -> anyhow::Result<i32> {
    finish(
        async {
            let state = match a.action.as_str() {
                "ack" => FlagState::Acknowledged,
                "false-positive" => FlagState::FalsePositive,
                "fixed" => FlagState::Fixed,
                _ => FlagState::Open,
            };
            let f = match Source::of(a.source) {
                Source::Store(store) => {
                    let by =
                        a.by.clone()
                            .or_else(|| std::env::var("USER").ok())
                            .unwrap_or_else(|| "someone".into());
                    let (id, note) = (a.id.clone(), a.note.clone());
                    tokio::task::spawn_blocking(move || -> anyhow::Result<Flag> {
                        Ok(open(&store)?.set_flag_state(&id, state, &note, &by)?)
                    })
                    .await??
                }
                Source::Coordinator(client) => {
                    let req = pb::SetFlagStateRequest {
                        id: a.id.clone(),
                        state: crate::views::state_to_pb(state) as i32,
                        note: a.note.clone(),
                        by: a.by.clone().unwrap_or_default(),
                    };
                    let answer = client
                        .connect()
                        .await?
                        .set_flag_state(req)
                        .await
                        .map_err(|s| refused("setting the flag's state", s))?;
                    crate::views::flag_of(answer.into_inner())
                }
            };
            eprintln!(
                "flag {} is {} ({}): {}",
                f.id,
                f.state.as_str(),
                f.state_by,
                f.summary
            );
            if state == FlagState::FalsePositive {
                eprintln!("it is not raised again for the same evidence");
            }
            Ok(())
        }
        .await,
    )
}

/// `platter alerts …`.
pub(super) async fn alerts(command: AlertsCommand) -> anyhow::Result<i32> {
    match command {
        AlertsCommand::Test {
            name,
            public_url,
            store,
        } => test(&name, &public_url, &store).await,
        other => tokio::task::spawn_blocking(move || manage(other)).await?,
    }
}

fn manage(command: AlertsCommand) -> anyhow::Result<i32> {
    finish(match command {
        AlertsCommand::Add {
            name,
            channel,
            target,
            secret,
            to,
            from,
            kind,
            min_severity,
            series,
            host,
            model,
            digest_after,
            store,
        } => (|| {
            let channel = Channel::parse(&channel).expect("clap offers only channels");
            let kinds = kind
                .iter()
                .map(|k| {
                    FlagKind::parse(k).ok_or_else(|| {
                        Invalid(format!("--kind {k:?}: a kind is one of {}", kind_words()))
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            let min_severity = Severity::parse(&min_severity).ok_or_else(|| {
                Invalid(format!(
                    "--min-severity {min_severity:?}: info, warning or critical"
                ))
            })?;
            let rule = Rule {
                name: name.clone(),
                channel,
                target,
                secret,
                recipients: to,
                sender: from,
                kinds,
                min_severity,
                series,
                host,
                model,
                digest_after,
                created_unix_ms: now_ms(),
            };
            if let Some(problem) = rule.problem() {
                return Err(Invalid(problem).into());
            }
            open(&store)?.add_rule(&rule)?;
            eprintln!(
                "alert rule {name}: {} to {} ({}); `platter alerts test {name}` sends a test message",
                rule.selects(),
                rule.channel.as_str(),
                rule.shown_to()
            );
            Ok(())
        })(),
        AlertsCommand::List { output, store } => (|| {
            let rules = open(&store)?.alert_rules()?;
            if output == Format::Json {
                println!("{}", serde_json::to_string_pretty(&rules)?);
                return Ok(());
            }
            if rules.is_empty() {
                println!("No alert rules: `platter alerts add NAME --channel webhook --target URL` makes one.");
                return Ok(());
            }
            let rows: Vec<Vec<String>> = rules
                .iter()
                .map(|r| {
                    vec![
                        r.name.clone(),
                        r.channel.as_str().into(),
                        r.shown_to(),
                        if r.secret.is_empty() {
                            "-".into()
                        } else {
                            r.secret.clone()
                        },
                        r.selects(),
                    ]
                })
                .collect();
            print!(
                "{}",
                crate::report::table(&["NAME", "CHANNEL", "TO", "SECRET FROM", "SELECTS"], &rows)
            );
            Ok(())
        })(),
        AlertsCommand::Remove { name, store } => (|| {
            open(&store)?.remove_rule(&name)?;
            eprintln!("alert rule {name} removed; its log stays");
            Ok(())
        })(),
        AlertsCommand::Log {
            rule,
            limit,
            output,
            store,
        } => (|| {
            let log = open(&store)?.alert_log(rule.as_deref(), limit)?;
            if output == Format::Json {
                println!("{}", serde_json::to_string_pretty(&log)?);
                return Ok(());
            }
            if log.is_empty() {
                println!("Nothing sent or owed.");
                return Ok(());
            }
            let rows: Vec<Vec<String>> = log
                .iter()
                .map(|d| {
                    let state = crate::views::delivery_state(d);
                    vec![
                        at(d.event.created_unix_ms),
                        d.rule.clone(),
                        format!("{} {}", d.event.kind, d.event.what),
                        d.event.summary.clone(),
                        state,
                        d.idempotency_key.clone(),
                    ]
                })
                .collect();
            print!(
                "{}",
                crate::report::table(
                    &["EVENT AT", "RULE", "EVENT", "WHAT", "STATE", "KEY"],
                    &rows
                )
            );
            Ok(())
        })(),
        AlertsCommand::Silence {
            name,
            host,
            series,
            model,
            kind,
            duration,
            note,
            store,
        } => (|| {
            let now = now_ms();
            let ends = now + std::time::Duration::from(duration).as_millis() as i64;
            let silence = Silence {
                id: name.clone(),
                kind,
                series,
                host,
                model,
                ends_unix_ms: ends,
                note,
                created_unix_ms: now,
            };
            if let Some(problem) = silence.problem() {
                return Err(Invalid(problem).into());
            }
            open(&store)?.add_silence(&silence)?;
            eprintln!("silence {name} until {}", at(ends));
            Ok(())
        })(),
        AlertsCommand::Silences { output, store } => (|| {
            let now = now_ms();
            let silences = open(&store)?.alert_silences()?;
            if output == Format::Json {
                println!("{}", serde_json::to_string_pretty(&silences)?);
                return Ok(());
            }
            let rows: Vec<Vec<String>> = silences
                .iter()
                .map(|s| {
                    vec![
                        s.id.clone(),
                        s.what(),
                        if s.ends_unix_ms > now {
                            format!("until {}", at(s.ends_unix_ms))
                        } else {
                            format!("ended {}", at(s.ends_unix_ms))
                        },
                        s.note.clone(),
                    ]
                })
                .collect();
            if rows.is_empty() {
                println!("No silences.");
            } else {
                print!(
                    "{}",
                    crate::report::table(&["NAME", "SILENCES", "ENDS", "NOTE"], &rows)
                );
            }
            Ok(())
        })(),
        AlertsCommand::Unsilence { name, store } => (|| {
            open(&store)?.remove_silence(&name)?;
            eprintln!("silence {name} ended");
            Ok(())
        })(),
        AlertsCommand::Test { .. } => unreachable!("sent by `alerts`"),
    })
}

/// `platter alerts test RULE`: exit 0 when the channel took it, 1 when not (said why).
async fn test(name: &str, public_url: &str, store: &StoreArg) -> anyhow::Result<i32> {
    let store = {
        let arg = store.clone();
        match tokio::task::spawn_blocking(move || open(&arg)).await? {
            Ok(s) => s,
            Err(e) => return finish(Err(e)),
        }
    };
    let rule = {
        let (s, n) = (store.clone(), name.to_string());
        tokio::task::spawn_blocking(move || s.alert_rule(&n)).await??
    };
    let Some(rule) = rule else {
        return finish(Err(Invalid(format!("no alert rule named {name:?}")).into()));
    };
    let sent = channels::send_test(&rule, public_url).await;
    let me = format!("platter alerts test on {}", platter_agent::cli::hostname());
    let logged = sent.clone();
    tokio::task::spawn_blocking(move || store.record_test(&rule.name, logged, &me)).await??;
    match sent {
        Ok(()) => {
            eprintln!("test message sent through {name}: the channel took it");
            Ok(0)
        }
        Err(e) => {
            eprintln!("test message through {name} failed: {e}");
            Ok(1)
        }
    }
}
