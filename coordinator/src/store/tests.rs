//! The store's tests: dispatch, the writers, cancel and reads, on both engines where
//! PostgreSQL is given.

use std::time::Instant;

use platter_proto::model::{HostName, Plan, Record, RecordKind, Sample, StepEvent, StepState};
use rusqlite::Connection;
use tokio::sync::oneshot;

use super::writer::{commit, CellKeys, KnownPlans, PROBE_WHEN_IDLE};
use super::*;
use crate::planning::planner;
use crate::planning::planner::PlannedCampaign;
use tokio_util::sync::CancellationToken;

/// The end record of measure step `step` of `plan`, with one `wall` sample of `value` s.
pub(super) fn end(seq: u64, plan: &Plan, step: u32, attempt: u32, value: f64) -> Record {
    let s = &plan.steps[step as usize];
    Record {
        seq,
        kind: RecordKind::Step(StepEvent {
            plan_id: plan.id.clone(),
            kind: "measure".into(),
            step_index: step,
            cell_id: s.cell_id.clone(),
            repetition: s.repetition,
            attempt,
            state: StepState::Succeeded,
            started_unix_ns: 0,
            finished_unix_ns: 0,
            exit_status: 0,
            stderr_tail: String::new(),
            error: String::new(),
            samples: vec![Sample {
                metric: "wall".into(),
                value,
                unit: "s".into(),
                histogram: Vec::new(),
                missing: String::new(),
            }],
        }),
    }
}

/// Two agents' batches in one writer transaction: rc66 sends a record that breaks a
/// constraint (two samples of one metric) and records for rcmonster's plan. Only
/// those are refused; rc66's other records and rcmonster's own batch are stored.
#[test]
fn an_agent_is_confined_to_its_plans_and_a_bad_record_fails_alone() {
    let dir = tempfile::tempdir().unwrap();
    for store in testing::stores(dir.path()) {
        let planned = test_campaign("rc66, rcmonster", 1);
        store.insert_campaign(&planned, "t.yaml", "").unwrap();
        let plan = |h: &str| planned.plans.iter().find(|p| p.host == h).unwrap();
        let measure = |p: &Plan| {
            p.steps
                .iter()
                .position(|s| matches!(s.kind, platter_proto::model::StepKind::Measure(_)))
                .unwrap() as u32
        };
        let (rc66, rcmonster) = (plan("rc66"), plan("rcmonster"));
        let mut doubled = end(2, rc66, measure(rc66), 1, 1.0);
        if let RecordKind::Step(e) = &mut doubled.kind {
            let again = e.samples[0].clone();
            e.samples.push(again);
        }
        let accepted = |seq, p: &Plan| Record {
            seq,
            kind: RecordKind::PlanAccepted {
                plan_id: p.id.clone(),
            },
        };
        let batch = |host: &str, records: Vec<Record>| Batch {
            host: host.into(),
            hello: None,
            inventory: None,
            records,
            done: oneshot::channel().0,
        };
        let batches = [
            batch(
                "rc66",
                vec![
                    accepted(1, rc66),
                    doubled,
                    // rc66's certificate, rcmonster's plan: its measurement and its end.
                    end(3, rcmonster, measure(rcmonster), 1, 66.0),
                    Record {
                        seq: 4,
                        kind: RecordKind::PlanFinished {
                            plan_id: rcmonster.id.clone(),
                            cancelled: false,
                        },
                    },
                ],
            ),
            batch(
                "rcmonster",
                vec![
                    accepted(1, rcmonster),
                    end(2, rcmonster, measure(rcmonster), 1, 7.0),
                ],
            ),
        ];
        let conn = store.opener.writer().unwrap();
        let outcomes = commit(
            &conn,
            &mut CellKeys::default(),
            &mut KnownPlans::default(),
            &batches,
            &Instance {
                mark: "test".into(),
                channel: "platter_test".into(),
            },
        )
        .expect("one agent's bad records do not fail the commit");
        assert_eq!(outcomes[0].refused.values().sum::<u32>(), 3);
        assert!(outcomes[1].refused.is_empty());
        let rows = |sql: &str| -> Vec<String> { conn.query_map(sql, (), |r| r.only()).unwrap() };
        let stored = conn
            .query_map("SELECT host, value FROM sample_rows", (), |r| {
                Ok((r.get::<String>("host")?, r.get::<f64>("value")?))
            })
            .unwrap();
        assert_eq!(stored, [("rcmonster".to_string(), 7.0)]);
        assert_eq!(
            rows("SELECT host || ' ' || state FROM plans ORDER BY host"),
            ["rc66 accepted", "rcmonster accepted"],
            "rc66 could not finish rcmonster's plan"
        );
        let reasons = rows("SELECT reason FROM refused_records ORDER BY seq");
        assert!(reasons[0].starts_with("cannot be stored: "), "{reasons:?}");
        assert_eq!(reasons[1..], ["the plan is rcmonster's, not rc66's"; 2]);
        // The agent is told which records and why (in its ack)…
        let told: Vec<u64> = outcomes[0].refusals.iter().map(|r| r.0).collect();
        assert_eq!(told, [2, 3, 4]);
        assert_eq!(outcomes[0].refusals[0].1, reasons[0]);
        // …and the step whose end could not be stored failed with that reason, so the
        // report says why its measurement is missing.
        assert_eq!(
        rows("SELECT host || ' ' || state || ' ' || error FROM steps WHERE state != 'started' ORDER BY host"),
        [
            format!(
                "rc66 failed the coordinator's store refused this step's result: {}",
                reasons[0]
            ),
            "rcmonster succeeded ".to_string()
        ]
    );
        // What `writer_stats` adds up: rc66's failed step stored in place of its bad one
        // (without samples), rcmonster's step with its sample.
        let counted = |o: &BatchOutcome| (o.steps_stored, o.samples_stored);
        assert_eq!(counted(&outcomes[0]), (1, 0));
        assert_eq!(counted(&outcomes[1]), (1, 1));
    }
}

/// `writer_stats` counts the rows the writer committed, once: a resent record adds
/// nothing, and every commit lands in one latency bucket.
#[tokio::test(flavor = "multi_thread")]
async fn the_writer_counts_what_it_committed() {
    let dir = tempfile::tempdir().unwrap();
    for store in testing::stores(dir.path()) {
        let planned = test_campaign("h", 1);
        store.insert_campaign(&planned, "t.yaml", "").unwrap();
        let plan = &planned.plans[0];
        store.plan_for_host("h").unwrap().unwrap();
        let before = store.writer_stats();
        assert_eq!(
            (before.steps_stored, before.samples_stored, before.commits),
            (0, 0, 0)
        );

        let mut two_samples = end(1, plan, 0, 1, 1.0);
        if let RecordKind::Step(e) = &mut two_samples.kind {
            let mut other = e.samples[0].clone();
            other.metric = "cpu".into();
            e.samples.push(other);
        }
        store
            .write_records(&"h".into(), vec![two_samples.clone()])
            .await
            .unwrap();
        // A resend after a lost ack: committed again, but no row is new.
        store
            .write_records(&"h".into(), vec![two_samples])
            .await
            .unwrap();
        let stats = store.writer_stats();
        assert_eq!((stats.steps_stored, stats.samples_stored), (1, 2));
        assert_eq!(stats.commits, 2);
        assert_eq!(stats.commit_buckets.len(), COMMIT_BUCKETS.len() + 1);
        assert_eq!(stats.commit_buckets.iter().sum::<u64>(), 2);
        assert!(stats.commit_seconds_sum > 0.0);
    }
}

/// A hello saying the agent's records were acked further than this store heard of them is
/// answered with the records it lacks, once; records stored or refused count as heard of.
#[tokio::test(flavor = "multi_thread")]
async fn a_hello_acked_past_what_the_store_heard_of_is_told_once() {
    let dir = tempfile::tempdir().unwrap();
    for store in testing::stores(dir.path()) {
        let planned = test_campaign("h", 1);
        store.insert_campaign(&planned, "t.yaml", "").unwrap();
        let h: HostName = "h".into();
        let hello = |acked| store.agent_hello(&h, "b", "v", &[], &[], acked);
        assert_eq!(
            hello(0).await.unwrap(),
            None,
            "an older agent: nothing said"
        );
        let accepted = Record {
            seq: 4,
            kind: RecordKind::PlanAccepted {
                plan_id: planned.plans[0].id.clone(),
            },
        };
        let unknown = Record {
            seq: 5,
            kind: RecordKind::PlanAccepted {
                plan_id: "never-planned".into(),
            },
        };
        let outcome = store
            .write_records(&"h".into(), vec![accepted, unknown])
            .await
            .unwrap();
        assert_eq!(outcome.never_made.len(), 1);
        assert_eq!(
            hello(5).await.unwrap(),
            None,
            "stored and refused: heard of"
        );
        assert_eq!(
            hello(9).await.unwrap(),
            Some(AckedElsewhere {
                first: 6,
                last: 9,
                known_agent: true
            })
        );
        assert_eq!(hello(9).await.unwrap(), None, "said once");
        // An agent whose journal was begun again (its state directory wiped) is behind.
        assert_eq!(hello(2).await.unwrap(), None);
        let new = store
            .agent_hello(&"g".into(), "b", "v", &[], &[], 3)
            .await
            .unwrap();
        assert_eq!(
            new,
            Some(AckedElsewhere {
                first: 1,
                last: 3,
                known_agent: false
            })
        );
    }
}

/// Two stores on one new PostgreSQL database, as two coordinators sharing it have;
/// None without a test server.
fn two_on_postgres() -> Option<(Store, Store)> {
    let location = testing::fresh_postgres(&testing::postgres_url()?);
    Some((
        Store::open_at(&location).unwrap(),
        Store::open_at(&location).unwrap(),
    ))
}

/// Two coordinators on one PostgreSQL store dispatch to the same host at once, again
/// and again: the host never holds two plans, and every plan is sent exactly once.
#[test]
fn coordinators_sharing_postgres_never_give_a_host_two_plans() {
    let Some((a, b)) = two_on_postgres() else {
        return;
    };
    const PLANS: u32 = 30;
    for generation in 1..=PLANS {
        a.insert_campaign(&test_campaign("h", generation), "t.yaml", "")
            .unwrap();
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut sent = Vec::new();
    for seq in 1..=u64::from(PLANS) {
        // Both ask at once; whatever each gets must be the same one plan.
        let (ra, rb) = std::thread::scope(|s| {
            let ta = s.spawn(|| a.plan_for_host("h").unwrap());
            let tb = s.spawn(|| b.plan_for_host("h").unwrap());
            (ta.join().unwrap(), tb.join().unwrap())
        });
        let (pa, na) = ra.expect("a plan for h");
        let (pb, nb) = rb.expect("a plan for h");
        assert_eq!(pa.id, pb.id, "the host got two plans at once");
        assert!(na ^ nb, "sent exactly once: {na} {nb}");
        let active: i64 = a
            .read(|c| {
                c.query_row(
                    "SELECT COUNT(*) FROM plans WHERE host = 'h' AND state IN ('sent', 'accepted')",
                    (),
                    |r| r.only(),
                )
            })
            .unwrap();
        assert_eq!(active, 1);
        sent.push(pa.id.clone());
        // The plan ends through the other coordinator every other time.
        let ending = if seq % 2 == 0 { &a } else { &b };
        let finished = Record {
            seq,
            kind: RecordKind::PlanFinished {
                plan_id: pa.id,
                cancelled: false,
            },
        };
        rt.block_on(ending.write_records(&"h".into(), vec![finished]))
            .unwrap();
    }
    sent.sort();
    sent.dedup();
    assert_eq!(sent.len(), PLANS as usize, "every plan was sent once");
    assert!(a.plan_for_host("h").unwrap().is_none());
    let done: i64 = b
        .read(|c| {
            c.query_row(
                "SELECT COUNT(*) FROM campaigns WHERE state = 'done'",
                (),
                |r| r.only(),
            )
        })
        .unwrap();
    assert_eq!(
        done,
        i64::from(PLANS),
        "each campaign ended once its plan did"
    );
}

/// Rows are read by column name alike on both engines: a table's column by its name
/// (without its table's alias), an expression by its `AS`, a name as the SQL writes it
/// (PostgreSQL lowercases it); a name the statement has not is an error naming it.
#[test]
fn columns_are_named_alike_on_both_engines() {
    let dir = tempfile::tempdir().unwrap();
    for store in testing::stores(dir.path()) {
        store
            .insert_campaign(&test_campaign("a, b", 1), "t.yaml", "")
            .unwrap();
        let sql =
            "SELECT p.host, COUNT(*) AS steps_total FROM plans p GROUP BY p.host ORDER BY p.host";
        let at = store.location().to_string();
        let rows = store
            .read(|c| {
                c.query_map(sql, (), |r| {
                    Ok((r.get::<String>("host")?, r.get::<i64>("steps_total")?))
                })
            })
            .unwrap();
        assert_eq!(rows, [("a".into(), 1), ("b".into(), 1)], "{at}");
        let mut each = Vec::new();
        store
            .read(|c| {
                c.query_each_at(sql, (), ["steps_total", "host"], |r, [n, host]| {
                    each.push((r.get::<String>(host)?, r.get::<i64>(n)?));
                    Ok(())
                })
            })
            .unwrap();
        assert_eq!(each, rows, "{at}");
        let wrong = store
            .read(|c| c.query_row(sql, (), |r| r.get::<String>("p.host")))
            .unwrap_err();
        assert!(
            matches!(&wrong, StoreError::NoColumn { name, .. } if name == "p.host"),
            "{at}: {wrong:?}"
        );
    }
}

/// Text sorts by its bytes on both engines (SQLite's only order; PostgreSQL's columns
/// are `COLLATE "C"` whatever the database's locale), so lists come out the same.
#[test]
fn text_sorts_by_its_bytes_on_both_engines() {
    let dir = tempfile::tempdir().unwrap();
    for store in testing::stores(dir.path()) {
        store
            .insert_campaign(&test_campaign("ab, a9z, a-c, a1", 1), "t.yaml", "")
            .unwrap();
        let hosts: Vec<String> = store
            .read(|c| {
                c.query_map("SELECT DISTINCT host FROM plans ORDER BY host", (), |r| {
                    r.only()
                })
            })
            .unwrap();
        assert_eq!(hosts, ["a-c", "a1", "a9z", "ab"], "{}", store.location());
        if let Some(pg) = store.conn.lock().unwrap().as_postgres() {
            let other = pg
                .query(
                    "SELECT table_name || '.' || column_name FROM information_schema.columns
                      WHERE table_schema = current_schema() AND data_type = 'text'
                        AND collation_name IS DISTINCT FROM 'C'",
                    &[],
                )
                .unwrap();
            let other: Vec<String> = other.iter().map(|r| r.get(0)).collect();
            assert!(
                other.is_empty(),
                "text columns not in byte order: {other:?}"
            );
        }
    }
}

/// A report lists a cell's metrics in one order whichever engine its store is (by
/// name after the command's own): SQLite returns a step's samples by name, PostgreSQL
/// in the order they were stored, which is the order the tool printed them.
#[tokio::test]
async fn a_reports_metrics_come_in_the_same_order_from_both_engines() {
    let dir = tempfile::tempdir().unwrap();
    let mut orders = Vec::new();
    for store in testing::stores(dir.path()) {
        let planned = test_campaign("h", 1);
        store.insert_campaign(&planned, "t.yaml", "").unwrap();
        let plan = &planned.plans[0];
        let mut record = end(1, plan, 0, 1, 1.0);
        if let RecordKind::Step(e) = &mut record.kind {
            let sample = e.samples[0].clone();
            e.samples = ["zeta", "alpha", "mid"]
                .into_iter()
                .map(|m| Sample {
                    metric: m.into(),
                    ..sample.clone()
                })
                .collect();
        }
        store
            .write_records(&"h".into(), vec![record])
            .await
            .unwrap();
        let report = crate::report::Report::load(&store, &planned.id).unwrap();
        let metrics: Vec<String> = report.cells[0]
            .metrics
            .iter()
            .filter(|m| ["zeta", "alpha", "mid"].contains(&m.metric.as_str()))
            .map(|m| m.metric.clone())
            .collect();
        assert_eq!(metrics, ["alpha", "mid", "zeta"], "{}", store.location());
        orders.push(metrics);
    }
    orders.dedup();
    assert_eq!(orders.len(), 1);
}

/// The indexes of `plan`'s measure steps, in order.
fn measure_steps(plan: &Plan) -> Vec<u32> {
    (0..plan.steps.len() as u32)
        .filter(|&i| {
            matches!(
                plan.steps[i as usize].kind,
                platter_proto::model::StepKind::Measure(_)
            )
        })
        .collect()
}

/// A cell's samples come in the order its repetitions started, whatever order the store
/// returns them in (it is asked for none), on both engines; a metric's reason for missing
/// values is its latest repetition's.
#[tokio::test]
async fn a_cells_samples_come_in_the_order_their_repetitions_started() {
    let dir = tempfile::tempdir().unwrap();
    for store in testing::stores(dir.path()) {
        let yaml = "name: t\nhosts: { names: [h] }\nworkload: { command: { run: x } }\nrepeat: 3\n";
        let c = crate::spec::parse("t.yaml", yaml).unwrap();
        let planned =
            crate::planning::planner::plan(&c, "", "test", 1, &Default::default()).unwrap();
        store.insert_campaign(&planned, "t.yaml", yaml).unwrap();
        let plan = &planned.plans[0];
        let measures = measure_steps(plan);
        assert_eq!(measures.len(), 3);
        // Repetition 1 started last (a clock set back, or a retry), 2 first.
        let runs = [(300, 1.0, "r1"), (100, 2.0, "r2"), (200, 3.0, "")];
        let records = measures
            .iter()
            .zip(runs)
            .enumerate()
            .map(|(k, (&step, (started, wall, why)))| {
                let mut r = end(k as u64 + 1, plan, step, 1, wall);
                if let RecordKind::Step(e) = &mut r.kind {
                    e.started_unix_ns = started;
                    e.samples.push(Sample {
                        metric: "iops".into(),
                        value: if why.is_empty() { 5.0 } else { f64::NAN },
                        unit: "1/s".into(),
                        histogram: Vec::new(),
                        missing: why.into(),
                    });
                }
                r
            })
            .collect();
        store.write_records(&"h".into(), records).await.unwrap();
        let report = crate::report::Report::load(&store, &planned.id).unwrap();
        let metric = |name: &str| {
            report.cells[0]
                .metrics
                .iter()
                .find(|m| m.metric == name)
                .unwrap()
                .clone()
        };
        let wall = metric("wall");
        let started: Vec<i64> = wall.samples.iter().map(|s| s.started_unix_ns).collect();
        assert_eq!(started, [100, 200, 300], "{}", store.location());
        assert_eq!(wall.values, [2.0, 3.0, 1.0], "{}", store.location());
        let iops = metric("iops");
        assert_eq!(iops.values, [5.0], "{}", store.location());
        assert_eq!(
            (iops.not_measured, iops.not_measured_reason.as_str()),
            (2, "r1"),
            "{}",
            store.location()
        );
    }
}

/// A campaign's samples are read by one range of step rows when its rows lie together
/// and joined in SQL when other campaigns' rows are interleaved with them; either way
/// every counted sample comes once, with its own step's facts, and none of another
/// campaign's, on both engines.
#[tokio::test]
async fn a_campaigns_samples_are_the_same_read_by_range_or_by_join() {
    use super::reports::{CountedSteps, SamplesBy};
    let dir = tempfile::tempdir().unwrap();
    for store in testing::stores(dir.path()) {
        let at = store.location().to_string();
        let campaign = |host: &str| {
            let yaml = format!(
                "name: {host}\nhosts: {{ names: [{host}] }}\nworkload: {{ command: {{ run: x }} }}\nrepeat: 4\n"
            );
            let c = crate::spec::parse("t.yaml", &yaml).unwrap();
            let planned =
                crate::planning::planner::plan(&c, "", "test", 1, &Default::default()).unwrap();
            store.insert_campaign(&planned, "t.yaml", &yaml).unwrap();
            planned
        };
        // Three campaigns' step ends stored in turn (their rows interleave), then a
        // fourth's alone; campaign k's repetition r measures 10·k + r, started at r.
        let campaigns: Vec<PlannedCampaign> = ["a", "b", "c", "d"].map(campaign).into();
        let mut seq = 0;
        let mut step = |k: usize, r: usize, state: StepState| {
            let plan = &campaigns[k].plans[0];
            seq += 1;
            let mut record = end(seq, plan, measure_steps(plan)[r], 1, (10 * k + r) as f64);
            if let RecordKind::Step(e) = &mut record.kind {
                e.started_unix_ns = r as i64;
                if state == StepState::Started {
                    e.state = state;
                    e.samples.clear();
                }
            }
            (plan.host.clone(), record)
        };
        let mut ends = Vec::new();
        for r in 0..4 {
            for k in 0..3 {
                ends.push(step(k, r, StepState::Succeeded));
            }
        }
        // The fourth's each after its start, as an agent sends them: a `started` row
        // lies between every two ends and still the range is chosen.
        for r in 0..4 {
            ends.push(step(3, r, StepState::Started));
            ends.push(step(3, r, StepState::Succeeded));
        }
        for (host, record) in ends {
            store.write_records(&host, vec![record]).await.unwrap();
        }
        for (k, planned) in campaigns.iter().enumerate() {
            let read = |way: fn(&CountedSteps, &crate::store::db::Conn) -> Result<SamplesBy>| {
                store
                    .read(|c| {
                        let steps = CountedSteps::read(c, &planned.id)?;
                        let way = way(&steps, c)?;
                        let mut got = Vec::new();
                        steps.each_sample(c, &planned.id, way, |s| {
                            let metric = s.metric.to_string();
                            got.push((s.value, s.repetition, s.started_unix_ns, metric));
                            Ok(())
                        })?;
                        got.sort_by(|a, b| a.partial_cmp(b).unwrap());
                        Ok((way, got))
                    })
                    .unwrap()
            };
            let want: Vec<_> = (0..4)
                .map(|r| {
                    let value = Some((10 * k + r) as f64);
                    (value, r as u32 + 1, r as i64, "wall".to_string())
                })
                .collect();
            let (chosen, got) = read(|steps, c| steps.way(c));
            assert_eq!(got, want, "campaign {k} read as chosen ({chosen:?}), {at}");
            let interleaved = k < 3;
            assert_eq!(
                chosen == SamplesBy::Join,
                interleaved,
                "campaign {k} read {chosen:?}, {at}"
            );
            // Forced either way, the same: a range from an interleaved campaign's first
            // row to its last skips the others' samples in between.
            let (range, got) = read(|steps, _| {
                let (first, last) = steps.span().unwrap();
                Ok(SamplesBy::Range { first, last })
            });
            assert!(matches!(range, SamplesBy::Range { .. }));
            assert_eq!(got, want, "campaign {k} read by range, {at}");
            let (_, got) = read(|_, _| Ok(SamplesBy::Join));
            assert_eq!(got, want, "campaign {k} joined, {at}");
        }
    }
}

/// With several writers, one that cannot commit stays the store's fault while the
/// others commit (health does not flap); a failure of the other writes ends with any
/// commit.
#[test]
fn a_writers_fault_ends_with_its_own_commit() {
    let health = Health::default();
    let full = StoreError::Commit("database or disk is full".into());
    health.failed(0, &full);
    let since = health.get().expect("a fault").since_unix_ms;
    health.committed(1);
    assert_eq!(
        health.get().map(|f| f.since_unix_ms),
        Some(since),
        "writer 0 still fails"
    );
    health.failed(WRITES, &StoreError::Commit("later".into()));
    health.committed(0);
    assert_eq!(
        health.get(),
        None,
        "writer 0 commits again, and so does the rest"
    );
    health.failed(WRITES, &full);
    health.committed(3);
    assert_eq!(health.get(), None);
}

/// `n` host names (`h0`, `h1`, …) whose batches go to writer `w` of `writers`.
fn hosts_of_writer(w: usize, writers: usize, n: usize) -> Vec<String> {
    (0..)
        .map(|i| format!("h{i}"))
        .filter(|h| writer_of(h, writers) == w)
        .take(n)
        .collect()
}

/// Hosts of one adaptive campaign on two writers end their rounds at once: each writer's
/// transaction queues the host's next round (its plan's foreign key locks the campaign's
/// row `FOR KEY SHARE`), then checks whether the campaign ended. That check's lock must
/// not conflict with the other's key share (`FOR UPDATE` did: a deadlock each round).
#[tokio::test]
async fn writers_queuing_next_rounds_of_one_campaign_do_not_deadlock() {
    let Some(url) = testing::postgres_url() else {
        return;
    };
    let store = Store::open_at(&testing::fresh_postgres(&url)).unwrap();
    let writers = store.writers.len();
    let pick = |w| hosts_of_writer(w, writers, 3);
    let hosts = [pick(0), pick(1)].concat();
    let yaml = format!(
        "name: t\nhosts: {{ names: [{}] }}\nworkload: {{ command: {{ run: x }} }}\n\
         repeat: {{ min: 2, max: 6, until: {{ metric: wall, ci: 1% }} }}\n",
        hosts.join(", ")
    );
    let c = crate::spec::parse("t.yaml", &yaml).unwrap();
    let planned = planner::plan(&c, &yaml, "test", 1, &Default::default()).unwrap();
    store.insert_campaign(&planned, "t.yaml", &yaml).unwrap();
    let mut seq = 0;
    for round in 0..3 {
        let mut tasks = Vec::new();
        for host in &hosts {
            let (plan, _) = store.plan_for_host(host).unwrap().expect("a plan");
            let mut batch = Vec::new();
            for (i, s) in plan.steps.iter().enumerate() {
                if matches!(s.kind, platter_proto::model::StepKind::Measure(_)) {
                    seq += 1;
                    // Far apart, so no cell's interval is ever narrow enough to stop.
                    batch.push(end(seq, &plan, i as u32, 1, 1.0 + 4.0 * (seq % 2) as f64));
                }
            }
            seq += 1;
            batch.push(Record {
                seq,
                kind: RecordKind::PlanFinished {
                    plan_id: plan.id.clone(),
                    cancelled: false,
                },
            });
            let (store, host) = (store.clone(), HostName::from(host.as_str()));
            tasks.push(tokio::spawn(async move {
                store.write_records(&host, batch).await
            }));
        }
        for t in tasks {
            t.await.unwrap().expect("every batch is stored");
        }
        for host in &hosts {
            let queued: i64 = store
                .read(|c| {
                    c.query_row(
                        "SELECT COUNT(*) FROM plans WHERE host = ?1 AND state = 'queued'",
                        [host],
                        |r| r.only(),
                    )
                })
                .unwrap();
            assert_eq!(queued, 1, "round {round}: {host}'s next round is queued");
        }
    }
    assert_eq!(
        store.retried.load(std::sync::atomic::Ordering::Relaxed),
        0,
        "no transaction deadlocked"
    );
    assert!(store.fault().is_none());
}

/// A host's batches always go to the same writer (so they are stored in the order they
/// came), and a fleet's hosts are spread over all of them.
#[test]
fn hosts_are_spread_over_the_writers_each_always_to_the_same() {
    let hosts: Vec<String> = (0..1000).map(|i| format!("host-{i}")).collect();
    let mut per_writer = [0usize; 4];
    for h in &hosts {
        let w = writer_of(h, 4);
        assert_eq!(writer_of(h, 4), w);
        per_writer[w] += 1;
    }
    assert!(per_writer.iter().all(|&n| n > 150), "{per_writer:?}");
    assert!(hosts.iter().all(|h| writer_of(h, 1) == 0));
}

/// A PostgreSQL store's writers each store the batches of hosts of their own. Two of
/// them ending plans of the same two campaigns at once, in opposite orders, must not
/// deadlock (each locks the campaigns' rows once, in the campaigns' order, after its
/// records; and a transaction PostgreSQL fails as a deadlock is tried again): every
/// batch is stored, every campaign ends, and none of it reaches the agents as a
/// failure. (Before either, 20 rounds failed in their first.)
#[test]
fn writers_ending_plans_of_two_campaigns_in_opposite_orders_all_commit() {
    let Some(url) = testing::postgres_url() else {
        return;
    };
    let store = Store::open_at(&testing::fresh_postgres(&url)).unwrap();
    let writers = store.writers.len();
    assert!(writers >= 2, "a PostgreSQL store has several writers");
    // Three hosts of writer 0 and three of writer 1.
    let pick = |w| hosts_of_writer(w, writers, 3);
    let (zero, one) = (pick(0), pick(1));
    let hosts = [zero.clone(), one.clone()].concat().join(", ");
    let rt = tokio::runtime::Runtime::new().unwrap();
    const ROUNDS: u32 = 20;
    for round in 0..ROUNDS {
        let (c1, c2) = (
            test_campaign(&hosts, 2 * round + 1),
            test_campaign(&hosts, 2 * round + 2),
        );
        store.insert_campaign(&c1, "t.yaml", "").unwrap();
        store.insert_campaign(&c2, "t.yaml", "").unwrap();
        let plan_of = |c: &PlannedCampaign, host: &str| {
            c.plans.iter().find(|p| p.host == host).unwrap().id.clone()
        };
        let finished = |seq: u64, plan_id: platter_proto::model::PlanId| Record {
            seq,
            kind: RecordKind::PlanFinished {
                plan_id,
                cancelled: false,
            },
        };
        let seq = u64::from(round) * 2;
        let results = rt.block_on(async {
            let mut tasks = Vec::new();
            for host in zero.iter().chain(&one) {
                // Writer 0's hosts end c1's plan first, writer 1's c2's.
                let (first, second) = if zero.contains(host) {
                    (&c1, &c2)
                } else {
                    (&c2, &c1)
                };
                let batch = vec![
                    finished(seq + 1, plan_of(first, host)),
                    finished(seq + 2, plan_of(second, host)),
                ];
                let (store, host) = (store.clone(), HostName::from(host));
                tasks.push(tokio::spawn(async move {
                    store.write_records(&host, batch).await
                }));
            }
            let mut out = Vec::new();
            for t in tasks {
                out.push(t.await.unwrap());
            }
            out
        });
        for r in results {
            r.expect("every batch is stored");
        }
        for c in [&c1, &c2] {
            assert_eq!(
                store.campaign_state(&c.id).unwrap(),
                "done",
                "round {round}"
            );
        }
    }
    assert!(store.fault().is_none(), "the store never reported a fault");
    assert_eq!(
        store.retried.load(std::sync::atomic::Ordering::Relaxed),
        0,
        "no transaction deadlocked"
    );
}

/// A campaign submitted through one coordinator is heard of by another sharing its
/// PostgreSQL store (NOTIFY), which then dispatches it to the hosts connected to it.
#[test]
fn another_coordinator_hears_of_new_plans() {
    let Some((a, b)) = two_on_postgres() else {
        return;
    };
    let mut heard = b.subscribe_remote_plans();
    let mut own = a.subscribe_remote_plans();
    // The listeners connect on threads of their own: give them a moment.
    std::thread::sleep(Duration::from_millis(500));
    a.insert_campaign(&test_campaign("h", 1), "t.yaml", "")
        .unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(5), heard.changed())
            .await
            .expect("b hears of a's plans within 5 s")
            .unwrap();
        assert!(
            tokio::time::timeout(Duration::from_millis(500), own.changed())
                .await
                .is_err(),
            "a does not act on its own notification"
        );
    });
    assert!(b.plan_for_host("h").unwrap().unwrap().1);
}

/// A campaign is found by id, or by name as the latest of that name.
#[test]
fn a_campaign_is_found_by_id_or_by_its_latest_name() {
    let dir = tempfile::tempdir().unwrap();
    for store in testing::stores(dir.path()) {
        let (first, second) = (test_campaign("h", 1), test_campaign("h", 2));
        store.insert_campaign(&first, "t.yaml", "").unwrap();
        std::thread::sleep(Duration::from_millis(5));
        store.insert_campaign(&second, "t.yaml", "").unwrap();
        store
            .read(|c| {
                assert_eq!(resolve_campaign(c, &first.id)?, first.id);
                assert_eq!(resolve_campaign(c, "t")?, second.id);
                assert!(matches!(
                    resolve_campaign(c, "u"),
                    Err(StoreError::NoCampaign(n)) if n == "u"
                ));
                Ok(())
            })
            .unwrap();
    }
}

/// A plan sent but never accepted (too large to arrive, or the agent went away) must
/// not hold its host after a cancel.
#[test]
fn cancelling_a_plan_that_was_only_sent_frees_its_host() {
    let dir = tempfile::tempdir().unwrap();
    for store in testing::stores(dir.path()) {
        let (first, second) = (test_campaign("h", 1), test_campaign("h", 2));
        store.insert_campaign(&first, "t.yaml", "").unwrap();
        store.insert_campaign(&second, "t.yaml", "").unwrap();
        let (sent, _) = store.plan_for_host("h").unwrap().unwrap();
        assert_eq!(sent.campaign_id, first.id);
        let held = store.cancel_campaign(&first.id).unwrap();
        assert_eq!(
            held,
            [(sent.id.clone(), HostName::from("h"))],
            "the agent is still told"
        );
        let (next, new) = store.plan_for_host("h").unwrap().unwrap();
        assert_eq!((next.campaign_id.as_str(), new), (second.id.as_str(), true));
    }
}

/// A campaign of one host `h` measuring `repeat` times, stored in `store`.
fn stored_repeated(store: &Store, repeat: u32) -> planner::PlannedCampaign {
    let yaml = format!(
        "name: t\nhosts: {{ names: [h] }}\nworkload: {{ command: {{ run: x }} }}\nrepeat: {repeat}\n"
    );
    let c = crate::spec::parse("t.yaml", &yaml).unwrap();
    let planned = planner::plan(&c, "", "test", 1, &Default::default()).unwrap();
    store.insert_campaign(&planned, "t.yaml", "").unwrap();
    planned
}

/// The store's sample values, by repetition.
fn stored_values(store: &Store) -> Vec<f64> {
    store
        .read(|c| {
            c.query_map(
                "SELECT value FROM sample_rows ORDER BY repetition",
                (),
                |r| r.only(),
            )
        })
        .unwrap()
}

#[tokio::test]
async fn resent_and_repeated_records_are_stored_once() {
    let dir = tempfile::tempdir().unwrap();
    for store in testing::stores(dir.path()) {
        let planned = stored_repeated(&store, 2);
        let plan = &planned.plans[0];
        let (dispatched, new) = store.plan_for_host("h").unwrap().unwrap();
        assert!(new);
        assert_eq!(&dispatched, plan);

        store
            .write_records(&"h".into(), vec![end(1, plan, 0, 1, 1.0)])
            .await
            .unwrap();
        // The same record again (a resend after a lost ack), and another end of the same
        // measure step (which a correct agent never sends): neither adds a sample.
        store
            .write_records(
                &"h".into(),
                vec![end(1, plan, 0, 1, 1.0), end(2, plan, 0, 2, 9.0)],
            )
            .await
            .unwrap();
        // PostgreSQL's batch of the two could not be stored whole (the second end breaks
        // `steps_one_measure`), so it went in record by record; SQLite's `INSERT OR IGNORE`
        // skips the second end within the batch.
        let one_by_one = u64::from(store.location().is_postgres());
        assert_eq!(store.writer_stats().batches_one_by_one, one_by_one);
        store
            .write_records(&"h".into(), vec![end(3, plan, 1, 1, 2.0)])
            .await
            .unwrap();
        let values = stored_values(&store);
        assert_eq!(values, [1.0, 2.0]);

        let finished = Record {
            seq: 4,
            kind: RecordKind::PlanFinished {
                plan_id: plan.id.clone(),
                cancelled: false,
            },
        };
        let outcome = store
            .write_records(&"h".into(), vec![finished.clone()])
            .await
            .unwrap();
        assert_eq!(outcome.hosts_freed, ["h"]);
        assert_eq!(store.campaign_state(&planned.id).unwrap(), "done");
        // A resent PlanFinished frees nothing twice.
        assert!(store
            .write_records(&"h".into(), vec![finished])
            .await
            .unwrap()
            .hosts_freed
            .is_empty());
        assert!(store.plan_for_host("h").unwrap().is_none());
    }
}

/// A batch sent again after a lost ack, a new record before it and one more after (as an
/// agent sends after a reconnect): the new steps are stored, the resent ones are not
/// stored twice, none is refused, and the batch is not stored record by record. (On
/// PostgreSQL the new step's run is copied in, then the resent run's `COPY` fails on a
/// key taken and the whole batch goes in again by `INSERT … ON CONFLICT`: what the first
/// try stored is rolled back and counted once.)
#[tokio::test]
async fn a_batch_resent_with_a_new_record_stores_the_new_one_and_nothing_twice() {
    let dir = tempfile::tempdir().unwrap();
    for store in testing::stores(dir.path()) {
        let planned = stored_repeated(&store, 4);
        let plan = &planned.plans[0];
        store.plan_for_host("h").unwrap().unwrap();
        let accepted = Record {
            seq: 1,
            kind: RecordKind::PlanAccepted {
                plan_id: plan.id.clone(),
            },
        };
        let first = vec![end(2, plan, 0, 1, 1.0), end(3, plan, 1, 1, 2.0)];
        store
            .write_records(&"h".into(), first.clone())
            .await
            .unwrap();
        // A new end, a record that is no step end (it parts the step ends in two runs),
        // the first batch again, another new end.
        let mut again = vec![end(4, plan, 2, 1, 3.0), accepted];
        again.extend(first);
        again.push(end(5, plan, 3, 1, 4.0));
        let outcome = store.write_records(&"h".into(), again).await.unwrap();
        assert!(outcome.refused.is_empty(), "{:?}", outcome.refused);
        assert!(!outcome.one_by_one, "the batch went in record by record");
        assert_eq!((outcome.steps_stored, outcome.samples_stored), (2, 2));
        let values = stored_values(&store);
        assert_eq!(values, [1.0, 2.0, 3.0, 4.0]);
        let refused: i64 = store
            .read(|c| c.query_row("SELECT COUNT(*) FROM refused_records", (), |r| r.only()))
            .unwrap();
        assert_eq!(refused, 0);
        let stats = store.writer_stats();
        assert_eq!((stats.steps_stored, stats.samples_stored), (4, 4));
        assert_eq!(stats.batches_one_by_one, 0);
    }
}

/// A preparation step that ran again (its measure was cut off) ends once per attempt;
/// a resend of either end is still stored once.
#[tokio::test]
async fn a_step_run_again_ends_once_per_attempt() {
    let dir = tempfile::tempdir().unwrap();
    for store in testing::stores(dir.path()) {
        let planned = test_campaign("h", 1);
        store.insert_campaign(&planned, "t.yaml", "").unwrap();
        let plan = &planned.plans[0];
        let prep = |seq, attempt| {
            let mut r = end(seq, plan, 0, attempt, 0.0);
            if let RecordKind::Step(e) = &mut r.kind {
                e.kind = "sync".into();
                e.samples.clear();
            }
            r
        };
        store
            .write_records(&"h".into(), vec![prep(1, 1), prep(2, 2)])
            .await
            .unwrap();
        store
            .write_records(&"h".into(), vec![prep(1, 1), prep(2, 2)])
            .await
            .unwrap();
        let attempts: Vec<u32> = store
            .read(|c| {
                c.query_map(
                    "SELECT attempt FROM steps WHERE step_index = 0 ORDER BY n",
                    (),
                    |r| r.only(),
                )
            })
            .unwrap();
        assert_eq!(attempts, [1, 2]);
    }
}

/// A dispatch that changes nothing (the host runs a plan already, or has none queued)
/// is answered while another connection holds the write lock.
#[test]
fn a_dispatch_that_changes_nothing_takes_no_write_lock() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let store = Store::open_with(&path, Duration::from_millis(50)).unwrap();
    store
        .insert_campaign(&test_campaign("h", 1), "t.yaml", "")
        .unwrap();
    let (plan, new) = store.plan_for_host("h").unwrap().unwrap();
    assert!(new);

    let locker = Connection::open(&path).unwrap();
    locker.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let (again, new) = store.plan_for_host("h").unwrap().unwrap();
    assert_eq!(
        (again, new),
        (plan.clone(), false),
        "the plan it runs, under the lock"
    );
    assert!(store.plan_for_host("idle").unwrap().is_none());
    // Marking a queued plan sent does need the lock: it waits, then gives up.
    locker.execute_batch("COMMIT").unwrap();
    store
        .insert_campaign(&test_campaign("h", 2), "t.yaml", "")
        .unwrap();
    store
        .with(|c| c.execute("UPDATE plans SET state = 'done' WHERE id = ?1", [&plan.id]))
        .unwrap();
    locker.execute_batch("BEGIN EXCLUSIVE").unwrap();
    assert!(store.plan_for_host("h").is_err(), "busy");
    locker.execute_batch("COMMIT").unwrap();
    assert!(
        store.plan_for_host("h").unwrap().unwrap().1,
        "sent once free"
    );
}

/// An operator's cancel and a record writer lock a campaign's row and its plans' in
/// opposite orders. When PostgreSQL breaks that deadlock by failing the cancel, the
/// cancel is tried again instead of failing. (Another connection here takes the
/// writer's part: a plan's row, then the campaign's; the cancel waits first, so its
/// deadlock check, `deadlock_timeout` after it began to wait, runs first and it is the
/// one failed.)
#[test]
fn a_cancel_failed_as_a_deadlocks_victim_is_tried_again() {
    let Some(url) = testing::postgres_url() else {
        return;
    };
    let store = Store::open_at(&testing::fresh_postgres(&url)).unwrap();
    let planned = test_campaign("h", 1);
    store.insert_campaign(&planned, "t.yaml", "").unwrap();
    let campaign = planned.id.clone();
    let writer = store.opener.writer().unwrap();
    let writer = writer.as_postgres().unwrap();
    writer
        .batch(&format!(
            "BEGIN; UPDATE plans SET queued_seq = queued_seq WHERE campaign_id = '{campaign}'"
        ))
        .unwrap();
    let cancel = {
        let (store, campaign) = (store.clone(), campaign.clone());
        std::thread::spawn(move || store.cancel_campaign(&campaign))
    };
    // Until the cancel holds the campaign's row and waits for the plan's (asked on a
    // connection outside the transaction, whose view of the activity would not change).
    let watcher = store.opener.writer().unwrap();
    let watcher = watcher.as_postgres().unwrap();
    let t0 = std::time::Instant::now();
    loop {
        let waiting = watcher
            .query(
                "SELECT 1 FROM pg_stat_activity WHERE datname = current_database()
                    AND wait_event_type = 'Lock' AND query LIKE 'UPDATE plans SET state = ''cancelled''%'",
                &[],
            )
            .unwrap();
        if !waiting.is_empty() {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the cancel never waited"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    writer
        .batch(&format!(
            "SELECT 1 FROM campaigns WHERE id = '{campaign}' FOR NO KEY UPDATE; COMMIT"
        ))
        .unwrap();
    let held = cancel.join().unwrap().expect("the cancel, tried again");
    assert!(held.is_empty(), "no plan was sent: {held:?}");
    assert_eq!(store.campaign_state(&campaign).unwrap(), "cancelled");
    // At least once: a retry that takes the campaign's row before the transaction above
    // does (it has yet to commit) can be the victim of the same deadlock again, which
    // a loaded machine showed (2 retries).
    let retried = store.retried.load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        retried >= 1,
        "failed as the deadlock's victim: {retried} retries"
    );
}

/// A writer whose commit failed and to which no batch comes again (its agents went
/// elsewhere) ends its fault by committing a write of its own once the store can
/// commit, not never; while it cannot, the fault stays.
#[tokio::test]
async fn an_idle_writers_fault_ends_when_the_store_can_commit_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let store = Store::open_with(&path, Duration::from_millis(50)).unwrap();
    let locker = Connection::open(&path).unwrap();
    locker.execute_batch("BEGIN EXCLUSIVE").unwrap();
    assert!(store.write_records(&"h".into(), Vec::new()).await.is_err());
    let fault = store.fault().expect("the writer cannot commit");
    // Past the writer's wait for a batch: its own write fails too.
    tokio::time::sleep(PROBE_WHEN_IDLE + Duration::from_secs(1)).await;
    assert_eq!(store.fault(), Some(fault), "still locked: still a fault");
    locker.execute_batch("COMMIT").unwrap();
    let t0 = Instant::now();
    while store.fault().is_some() {
        assert!(
            t0.elapsed() < PROBE_WHEN_IDLE * 3,
            "the fault outlived the lock by {:?}",
            t0.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // And the writer still takes batches.
    store.write_records(&"h".into(), Vec::new()).await.unwrap();
}

/// Dispatching (read the queue, then mark a plan sent) while the writer commits other
/// agents' records: with deferred transactions the dispatch failed now and then with
/// "database is locked" (its snapshot went stale) and the host sat idle for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dispatch_never_fails_while_the_writer_commits() {
    let dir = tempfile::tempdir().unwrap();
    for store in testing::stores(dir.path()) {
        const PLANS: u32 = 200;
        for generation in 1..=PLANS {
            store
                .insert_campaign(&test_campaign("h", generation), "t.yaml", "")
                .unwrap();
        }
        let stop = CancellationToken::new();
        let hammer = {
            let (store, stop) = (store.clone(), stop.clone());
            tokio::spawn(async move {
                let mut hellos = 0u64;
                while !stop.is_cancelled() {
                    store
                        .agent_seen(&"other".into(), &format!("b{hellos}"), "v", &[], &[])
                        .await
                        .unwrap();
                    hellos += 1;
                }
                hellos
            })
        };
        for seq in 1..=u64::from(PLANS) {
            let (plan, new) = store
                .plan_for_host("h")
                .expect("dispatch while the writer commits")
                .expect("a queued plan");
            assert!(new);
            let finished = Record {
                seq,
                kind: RecordKind::PlanFinished {
                    plan_id: plan.id,
                    cancelled: false,
                },
            };
            store
                .write_records(&"h".into(), vec![finished])
                .await
                .unwrap();
        }
        stop.cancel();
        assert!(hammer.await.unwrap() > 0, "the writer was busy meanwhile");
        assert!(store.plan_for_host("h").unwrap().is_none());
    }
}

/// Two coordinators dispatch to the same 20 hosts at once, one naming them in the
/// other's reverse order: their passes take the hosts' locks in key order, so they
/// wait for each other rather than deadlock, and every host gets one plan, sent once.
#[test]
fn overlapping_dispatch_passes_do_not_deadlock() {
    let Some((a, b)) = two_on_postgres() else {
        return;
    };
    let hosts: Vec<HostName> = (1..=20).map(|i| format!("h{i:02}").into()).collect();
    let reversed: Vec<HostName> = hosts.iter().rev().cloned().collect();
    for round in 1..=5 {
        a.insert_campaign(&test_campaign(&hosts.join(", "), round), "t.yaml", "")
            .unwrap();
        let (ra, rb) = std::thread::scope(|s| {
            let ta = s.spawn(|| a.plans_for_hosts(&hosts).unwrap());
            let tb = s.spawn(|| b.plans_for_hosts(&reversed).unwrap());
            (ta.join().unwrap(), tb.join().unwrap())
        });
        assert_eq!((ra.len(), rb.len()), (20, 20), "round {round}");
        let new = ra.iter().chain(&rb).filter(|(_, _, new)| *new).count();
        assert_eq!(new, 20, "each host's plan sent once, round {round}");
        // End them, so the next round's plans are next.
        a.write(|c| c.execute("UPDATE plans SET state = 'done' WHERE state = 'sent'", ()))
            .unwrap();
    }
}

/// Reads from many threads at once share at most `MAX_READERS` PostgreSQL
/// connections: the others wait for one, and every read is answered.
#[test]
fn reads_at_once_use_a_bounded_number_of_connections() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let dir = tempfile::tempdir().unwrap();
    for store in testing::stores(dir.path()) {
        let (now, most, done) = (
            AtomicUsize::new(0),
            AtomicUsize::new(0),
            AtomicUsize::new(0),
        );
        std::thread::scope(|s| {
            for _ in 0..MAX_READERS * 3 {
                s.spawn(|| {
                    store
                        .read(|c| {
                            let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                            most.fetch_max(n, Ordering::SeqCst);
                            std::thread::sleep(Duration::from_millis(30));
                            let one: i64 = c.query_row("SELECT 1", (), |r| r.only())?;
                            now.fetch_sub(1, Ordering::SeqCst);
                            done.fetch_add(one as usize, Ordering::SeqCst);
                            Ok(())
                        })
                        .unwrap()
                });
            }
        });
        assert_eq!(done.load(Ordering::SeqCst), MAX_READERS * 3);
        let most = most.load(Ordering::SeqCst);
        if store.location().is_postgres() {
            assert!(most <= MAX_READERS, "{most} reads at once");
        }
        assert!(most > 1, "reads run side by side: {most}");
        let (lock, _) = &*store.readers;
        let readers = lock.lock().unwrap();
        assert!(readers.open <= MAX_IDLE_READERS && readers.idle.len() == readers.open);
    }
}

/// A campaign on many hosts with the same steps stores those steps once (issue 32): one
/// template, a row per host; each host is still sent its own plan (its id, host and
/// cells), exactly once, and a report reads every plan back as planned.
#[test]
fn identical_plans_are_stored_once_and_each_host_gets_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let names: Vec<String> = (0..40).map(|i| format!("h{i:02}")).collect();
    for store in testing::stores(dir.path()) {
        let planned = test_campaign(&names.join(", "), 1);
        assert_eq!(planned.plans.len(), 40);
        store.insert_campaign(&planned, "t.yaml", "").unwrap();
        let count = |sql: &str| {
            store
                .read(|c| c.query_row(sql, (), |r| r.only::<i64>()))
                .unwrap()
        };
        assert_eq!(count("SELECT COUNT(*) FROM plan_templates"), 1);
        assert_eq!(
            count("SELECT COUNT(*) FROM plans WHERE body = '' AND template IS NOT NULL"),
            40
        );
        // The steps are in the template alone: a row holds only its cells' ids.
        let biggest_row = count("SELECT MAX(LENGTH(cells)) FROM plans");
        let template = count("SELECT MAX(LENGTH(body)) FROM plan_templates");
        assert!(
            biggest_row * 4 < template,
            "row {biggest_row} B, template {template} B"
        );

        let hosts: Vec<HostName> = names.iter().map(|n| HostName::from(n.as_str())).collect();
        let sent = store.plans_for_hosts(&hosts).unwrap();
        assert_eq!(sent.len(), 40);
        for (host, plan, new) in &sent {
            let want = planned.plans.iter().find(|p| p.host == *host).unwrap();
            assert_eq!((plan, *new), (want, true), "{host}");
        }
        // Sent once: asked again, each host's plan is the one it runs, not a new one.
        let again = store.plans_for_hosts(&hosts).unwrap();
        assert!(again.iter().all(|(_, _, new)| !new));
        let read = store.read(|c| reports::plans(c, &planned.id)).unwrap();
        assert_eq!(read.len(), 40);
        for p in read {
            assert_eq!(planned.plans.iter().find(|q| q.id == p.id), Some(&p.plan));
        }

        // 30 hosts run their first step, then all 40: the campaign's progress names it
        // with each one's own plan, whether it reads the running plans one by one (up to
        // `READ_ONE_BY_ONE`) or with the campaign's plans in one go.
        const { assert!(30 <= progress::READ_ONE_BY_ONE && 40 > progress::READ_ONE_BY_ONE) };
        let conn = store.opener.writer().unwrap();
        let instance = Instance {
            mark: "test".into(),
            channel: "platter_test".into(),
        };
        for (from, upto) in [(0, 30), (30, 40)] {
            let batches: Vec<Batch> = planned.plans[from..upto]
                .iter()
                .map(|p| {
                    let mut started = end(2, p, 0, 1, 0.0);
                    if let RecordKind::Step(e) = &mut started.kind {
                        e.state = StepState::Started;
                        e.kind = "storage_setup".into();
                        e.samples.clear();
                    }
                    let accepted = Record {
                        seq: 1,
                        kind: RecordKind::PlanAccepted {
                            plan_id: p.id.clone(),
                        },
                    };
                    Batch {
                        host: p.host.clone(),
                        hello: None,
                        inventory: None,
                        records: vec![accepted, started],
                        done: oneshot::channel().0,
                    }
                })
                .collect();
            let outcomes = commit(
                &conn,
                &mut CellKeys::default(),
                &mut KnownPlans::default(),
                &batches,
                &instance,
            )
            .unwrap();
            assert!(outcomes.iter().all(|o| o.refused.is_empty()));
            let started = |host: &HostName| planned.plans[..upto].iter().any(|q| q.host == *host);
            let progress = store.campaign_progress(planned.id.as_str()).unwrap();
            assert_eq!(progress.plans.len(), 40);
            for p in &progress.plans {
                let want = planned.plans.iter().find(|q| q.host == p.host).unwrap();
                match &p.running {
                    Some(r) => {
                        assert!(
                            started(&p.host) && r.index == 0 && r.plan == *want,
                            "{}",
                            p.host
                        )
                    }
                    None => assert!(!started(&p.host), "{} runs its first step", p.host),
                }
            }
        }
    }
}

/// A plan stored whole by a version before templates (`body` holds it, `template` is
/// NULL) is read and sent as it was.
#[test]
fn a_plan_stored_whole_before_templates_is_still_read() {
    let dir = tempfile::tempdir().unwrap();
    for store in testing::stores(dir.path()) {
        let planned = test_campaign("old", 1);
        store.insert_campaign(&planned, "t.yaml", "").unwrap();
        let plan = &planned.plans[0];
        let whole = serde_json::to_string(plan).unwrap();
        store
            .write(|c| {
                c.execute(
                    "UPDATE plans SET body = ?1, template = NULL, cells = NULL WHERE id = ?2",
                    db::params![whole, plan.id],
                )?;
                c.execute("DELETE FROM plan_templates", ())
            })
            .unwrap();
        let (sent, new) = store.plan_for_host("old").unwrap().unwrap();
        assert_eq!((&sent, new), (plan, true));
    }
}

/// A round put ahead (`plans::put_ahead`) is the host's next plan, before a plan of
/// another campaign queued earlier, and that plan keeps its place after it; on both engines.
#[test]
fn a_plan_put_ahead_runs_before_plans_queued_earlier() {
    let dir = tempfile::tempdir().unwrap();
    for store in testing::stores(dir.path()) {
        let first = test_campaign("h", 1);
        let other = test_campaign("h", 2);
        store.insert_campaign(&first, "t.yaml", "").unwrap();
        store.insert_campaign(&other, "t.yaml", "").unwrap();
        let (sent, _) = store.plan_for_host("h").unwrap().unwrap();
        assert_eq!(sent.id, first.plans[0].id);
        // The first campaign's next round, queued (after the other's plan) and put ahead.
        let mut round = first.plans[0].clone();
        round.id = format!("{}-r2", round.id).into();
        store
            .write(|c| {
                super::plans::queue_plan(c, &round)?;
                super::plans::put_ahead(c, &round)
            })
            .unwrap();
        store
            .write(|c| {
                c.execute(
                    "UPDATE plans SET state = 'done' WHERE id = ?1",
                    [&first.plans[0].id],
                )
            })
            .unwrap();
        let (next, _) = store.plan_for_host("h").unwrap().unwrap();
        assert_eq!(next.id, round.id, "the round goes first");
        store
            .write(|c| c.execute("UPDATE plans SET state = 'done' WHERE id = ?1", [&round.id]))
            .unwrap();
        let (after, _) = store.plan_for_host("h").unwrap().unwrap();
        assert_eq!(
            after.id, other.plans[0].id,
            "then the plan it went ahead of"
        );
    }
}
