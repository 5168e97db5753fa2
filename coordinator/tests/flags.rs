//! Flags with a life and the alerts they owe, on both engines, through the store's API:
//! raised once per evidence, refreshed while live, acknowledged, false positive (never
//! raised again for the same evidence), fixed by platter and raised again after, each
//! change an event owed to every rule that routes it (silenced ones recorded, not owed),
//! delivered in order under one coordinator's lease with a key per event and rule.

mod common;

use platter::store::alerts::{idempotency_key, Channel, Rule, Silence};
use platter::store::flags::{flag_id, Fixed, FlagFilter, FlagKind, FlagState, NewFlag, Severity};
use platter::store::testing::stores;
use platter::store::Store;
use serde_json::json;

fn regression(series: &str, host: &str, run: &str) -> NewFlag {
    NewFlag {
        kind: FlagKind::Regression,
        severity: Severity::Warning,
        evidence_key: format!("regression|{series}|{host}|bs=4k|wall|{run}"),
        series: series.into(),
        host: host.into(),
        model: String::new(),
        drive: String::new(),
        metric: "wall".into(),
        cell: "bs=4k".into(),
        campaign_id: run.into(),
        summary: format!("REGRESSION {series} on {host}: wall +10%"),
        evidence: json!({ "runs": ["c-0", run], "before": 20.0 }),
        link: format!("/campaigns/{run}"),
    }
}

fn rule(name: &str) -> Rule {
    Rule {
        name: name.into(),
        channel: Channel::Webhook,
        target: "http://127.0.0.1:9/hook".into(),
        secret: "env:HOOK_KEY".into(),
        recipients: Vec::new(),
        sender: String::new(),
        kinds: Vec::new(),
        min_severity: Severity::Warning,
        series: String::new(),
        host: String::new(),
        model: String::new(),
        digest_after: 5,
        created_unix_ms: 0,
    }
}

fn live(store: &Store) -> Vec<String> {
    store
        .flags(&FlagFilter::default())
        .unwrap()
        .into_iter()
        .filter(|f| f.state.is_live())
        .map(|f| f.id)
        .collect()
}

#[test]
fn a_flag_lives_from_open_to_fixed_and_a_false_positive_stays_down() {
    let dir = tempfile::tempdir().unwrap();
    for store in stores(dir.path()) {
        store.add_rule(&rule("ops")).unwrap();
        let a = regression("nightly", "rc66", "c-7");
        let id = flag_id(&a.evidence_key);

        // Raised once per campaign: a second coordinator marking c-7 does nothing.
        let r = store
            .raise_flags(Some("c-7"), std::slice::from_ref(&a), &[])
            .unwrap()
            .unwrap();
        assert_eq!(r.raised, vec![id.clone()]);
        assert_eq!(
            store
                .raise_flags(Some("c-7"), std::slice::from_ref(&a), &[])
                .unwrap(),
            None
        );
        // The same evidence from elsewhere refreshes it and owes nothing new.
        let r = store
            .raise_flags(None, std::slice::from_ref(&a), &[])
            .unwrap()
            .unwrap();
        assert_eq!(r.refreshed, vec![id.clone()]);
        assert_eq!(store.alert_log(Some("ops"), 100).unwrap().len(), 1);

        // Acknowledged by a person, with a note; still live; a prefix names it.
        let f = store
            .set_flag_state(&id[..6], FlagState::Acknowledged, "looking", "ana")
            .unwrap();
        assert_eq!(
            (f.state, f.note.as_str(), f.state_by.as_str()),
            (FlagState::Acknowledged, "looking", "ana")
        );
        assert_eq!(live(&store), vec![id.clone()]);

        // Fixed by platter when a later run is back: an event owed.
        let r = store
            .raise_flags(
                Some("c-8"),
                &[],
                &[Fixed {
                    flag_id: id.clone(),
                    note: "run c-8 is back within 3%".into(),
                }],
            )
            .unwrap()
            .unwrap();
        assert_eq!(r.fixed, vec![id.clone()]);
        let f = store.flag(&id).unwrap().unwrap();
        assert_eq!(f.state, FlagState::Fixed);
        assert_eq!(f.state_by, "");
        assert!(f.note.contains("back within 3%"), "{}", f.note);
        // Fixing what is not live does nothing.
        let r = store
            .raise_flags(
                None,
                &[],
                &[Fixed {
                    flag_id: id.clone(),
                    note: "again".into(),
                }],
            )
            .unwrap()
            .unwrap();
        assert!(r.fixed.is_empty());

        // The same evidence once more: raised again, open.
        let r = store
            .raise_flags(None, std::slice::from_ref(&a), &[])
            .unwrap()
            .unwrap();
        assert_eq!(r.raised, vec![id.clone()]);
        assert_eq!(store.flag(&id).unwrap().unwrap().state, FlagState::Open);

        // A false positive needs a note, and is never raised again for that evidence...
        assert!(store
            .set_flag_state(&id, FlagState::FalsePositive, " ", "ana")
            .is_err());
        store
            .set_flag_state(&id, FlagState::FalsePositive, "the host was rebuilt", "ana")
            .unwrap();
        let r = store
            .raise_flags(Some("c-9"), std::slice::from_ref(&a), &[])
            .unwrap()
            .unwrap();
        assert_eq!(r.suppressed, vec![id.clone()]);
        assert!(live(&store).is_empty());
        // ...but another run range is other evidence.
        let b = regression("nightly", "rc66", "c-9");
        let r = store
            .raise_flags(None, std::slice::from_ref(&b), &[])
            .unwrap()
            .unwrap();
        assert_eq!(r.raised, vec![flag_id(&b.evidence_key)]);

        // Reopening by hand owes an event too; an unknown id is refused.
        store
            .set_flag_state(&id, FlagState::Open, "it was real", "bo")
            .unwrap();
        assert!(store
            .set_flag_state("ffffffffffff", FlagState::Fixed, "", "bo")
            .is_err());

        let whats: Vec<String> = store
            .alert_log(Some("ops"), 100)
            .unwrap()
            .into_iter()
            .rev()
            .map(|d| format!("{}:{}", &d.event.flag_id[..4], d.event.what))
            .collect();
        let (a4, b4) = (&id[..4], &flag_id(&b.evidence_key)[..4]);
        assert_eq!(
            whats,
            vec![
                format!("{a4}:raised"),
                format!("{a4}:fixed"),
                format!("{a4}:reopened"),
                format!("{b4}:raised"),
                format!("{a4}:reopened"),
            ]
        );
        // Open first in the listing; filters by state and series.
        let open = store
            .flags(&FlagFilter {
                state: Some(FlagState::Open),
                ..Default::default()
            })
            .unwrap();
        assert_eq!(open.len(), 2);
        assert!(store
            .flags(&FlagFilter {
                series: Some("weekly".into()),
                ..Default::default()
            })
            .unwrap()
            .is_empty());
    }
}

#[test]
fn each_rule_is_owed_each_event_once_in_order_and_silences_hold_theirs() {
    let dir = tempfile::tempdir().unwrap();
    for store in stores(dir.path()) {
        store.add_rule(&rule("ops")).unwrap();
        let mut critical = rule("pager");
        critical.min_severity = Severity::Critical;
        store.add_rule(&critical).unwrap();
        // A secret written out is refused, and so is a name taken.
        let mut bad = rule("leaky");
        bad.secret = "hunter2".into();
        assert!(store
            .add_rule(&bad)
            .unwrap_err()
            .to_string()
            .contains("env:NAME"));
        assert!(store.add_rule(&rule("ops")).is_err());
        let now = platter::store::error::now_ms();
        store
            .add_silence(&Silence {
                id: "rebuild-rcmonster".into(),
                kind: String::new(),
                series: String::new(),
                host: "rcmonster".into(),
                model: String::new(),
                ends_unix_ms: now + 3_600_000,
                note: "rebuilt today".into(),
                created_unix_ms: now,
            })
            .unwrap();

        let flags: Vec<NewFlag> = (0..4)
            .map(|i| {
                regression(
                    "nightly",
                    if i == 2 { "rcmonster" } else { "rc66" },
                    &format!("c-{i}"),
                )
            })
            .collect();
        store.raise_flags(None, &flags, &[]).unwrap();

        // Warnings reach ops only; the silenced host's is recorded as silenced.
        let log = store.alert_log(None, 100).unwrap();
        assert_eq!(log.len(), 4);
        assert!(log.iter().all(|d| d.rule == "ops"));
        let silenced: Vec<_> = log.iter().filter(|d| d.state == "silenced").collect();
        assert_eq!(silenced.len(), 1);
        assert_eq!(silenced[0].event.host, "rcmonster");
        assert!(silenced[0].last_error.contains("rebuild-rcmonster"));

        // One coordinator holds the rule at a time.
        let later = platter::store::error::now_ms() + 1;
        assert_eq!(store.rules_due(later).unwrap(), vec!["ops".to_string()]);
        assert!(store
            .claim_rule("ops", "coord-a", later, later + 60_000)
            .unwrap());
        assert!(!store
            .claim_rule("ops", "coord-b", later, later + 60_000)
            .unwrap());
        assert!(store.rules_due(later).unwrap().is_empty());

        // Owed oldest first, each with its own key.
        let (owed, all) = store.owed("ops", later, 10).unwrap();
        assert_eq!(all, 3);
        let runs: Vec<&str> = owed.iter().map(|o| o.event.summary.as_str()).collect();
        assert!(runs.iter().all(|s| s.contains("rc66")), "{runs:?}");
        for o in &owed {
            assert_eq!(o.idempotency_key, idempotency_key(&o.event.event_id, "ops"));
        }
        // The first delivered, the second failed: it and the third wait for the retry.
        store
            .delivered("ops", &[&owed[0].event.event_id], "coord-a", "delivered")
            .unwrap();
        let rest: Vec<&str> = owed[1..]
            .iter()
            .map(|o| o.event.event_id.as_str())
            .collect();
        store
            .delivery_failed("ops", &rest, "coord-a", "connection refused", later + 5_000)
            .unwrap();
        store.release_rule("ops", "coord-a").unwrap();
        assert!(store.owed("ops", later, 10).unwrap().0.is_empty());
        let (owed2, _) = store.owed("ops", later + 5_000, 10).unwrap();
        assert_eq!(
            owed2
                .iter()
                .map(|o| o.event.event_id.clone())
                .collect::<Vec<_>>(),
            rest.iter().map(|s| s.to_string()).collect::<Vec<_>>()
        );
        assert_eq!(owed2[0].attempts, 1);
        // Another coordinator takes the rule now; the key is the same on every try.
        assert!(store
            .claim_rule("ops", "coord-b", later + 5_000, later + 65_000)
            .unwrap());
        assert_eq!(owed2[0].idempotency_key, owed[1].idempotency_key);

        // A removed rule owes nothing more; its log stays.
        store.remove_rule("ops").unwrap();
        assert!(store.owed("ops", later + 5_000, 10).unwrap().0.is_empty());
        assert!(!store.alert_log(Some("ops"), 100).unwrap().is_empty());
    }
}

/// `platter flags` and `platter flag` through a coordinator (`ListFlags`, `SetFlagState`,
/// an operator certificate) read and change the same flags as on the store directly: the
/// same list in the same order, a state set in the certificate's name (with the name the
/// person gave beside it), an unknown id or a false positive without a note refused with
/// exit status 2; an agent's certificate is refused.
#[test]
fn flags_are_read_and_triaged_through_a_coordinator_as_on_the_store() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let db = dir.join("coordinator.db");
    let raised = common::flagged::raise(&db);
    let (_coordinator, port) = common::serve(dir);
    let on_store = |args: &[&str]| {
        common::platter()
            .args(args)
            .arg("--db")
            .arg(&db)
            .env_remove("PLATTER_COORDINATOR")
            .output()
            .unwrap()
    };
    let through = |args: &[&str]| common::operator(dir, port).args(args).output().unwrap();
    let json = |out: std::process::Output| -> serde_json::Value {
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)))
    };

    // The live ones by default, then every state; the same words either way.
    for args in [
        &["flags", "--format", "json"][..],
        &["flags", "--state", "all", "--format", "json"],
        &["flags", "--state", "fixed", "--format", "json"],
        &["flags", "--kind", "regression", "--format", "json"],
        &["flags", "--host", "h1", "--format", "json"],
    ] {
        assert_eq!(json(through(args)), json(on_store(args)), "{args:?}");
    }
    let live = json(through(&["flags", "--format", "json"]));
    let ids: Vec<&str> = live
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [&raised.fail, &raised.regression, &raised.health],
        "{live}"
    );
    let table = through(&["flags"]);
    assert_eq!(table.status.code(), Some(1), "open flags listed");
    assert_eq!(table.stdout, on_store(&["flags"]).stdout);

    // Acknowledged by a 6-digit prefix, in the certificate's name with the person's beside.
    let out = through(&[
        "flag",
        &raised.fail[..6],
        "ack",
        "--note",
        "looking",
        "--by",
        "ana",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let f = json(on_store(&[
        "flags",
        "--state",
        "acknowledged",
        "--format",
        "json",
    ]));
    let fail = f
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["id"] == raised.fail.as_str())
        .unwrap_or_else(|| panic!("{f}"));
    assert_eq!(fail["state_by"], "ana (certificate tester)", "{fail}");
    assert_eq!(fail["note"], "looking", "{fail}");

    // Refusals: exit 2 with the reason, nothing changed.
    let out = through(&["flag", "abcdef", "ack"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("error: no flag abcdef"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = through(&["flag", &raised.regression, "false-positive"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs a note"));
    let out = through(&[
        "flag",
        &raised.regression,
        "false-positive",
        "--note",
        "noisy neighbour",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let all = json(on_store(&[
        "flags",
        "--state",
        "false-positive",
        "--format",
        "json",
    ]));
    assert_eq!(all[0]["id"], raised.regression.as_str(), "{all}");
    assert_eq!(all[0]["state_by"], "tester", "{all}");

    // An agent's certificate is not an operator's.
    let out = common::platter()
        .env("PLATTER_COORDINATOR", common::url(port))
        .env("PLATTER_TLS_DIR", common::identity(dir, "agent", "h1"))
        .args(["flags"])
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("operator certificate"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
