//! Each drive against its peers (issue 49), on fleets simulated through the store's normal
//! write path: campaigns submitted, the agents' records (provenance naming the drives, each
//! measurement's samples, the plan's end) written as agents send them, the ledger filled by
//! their inventories; then `report::peers` and `platter peers` as a user asks.

mod common;

use common::fleet::{drive, night, normal, seen, MODEL};
use platter::report::peers::{self, Ask};
use platter::store::Store;
use platter_proto::inventory::Device;
use rand::SeedableRng;

/// The known answer: 40 drives of one model over 3 hosts, 6 runs each with 5%
/// run-to-run noise, 2 of them 15% slower: exactly those 2 are flagged, with intervals that
/// agree with the mark; a model of 3 drives is too few to judge; a drive measured on
/// another configuration is not its peers' peer. Both engines.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_forty_drives_exactly_the_two_slow_ones_are_flagged() {
    let tmp = tempfile::tempdir().unwrap();
    for store in platter::store::testing::stores(tmp.path()) {
        let mut rng = rand::rngs::StdRng::seed_from_u64(49);
        let mut fleet: Vec<(String, Device)> = (0..40).map(|i| drive(i, MODEL, "ahci")).collect();
        // Three drives of a small model, and one of the big model on another block size.
        fleet.extend((40..43).map(|i| drive(i, "INTEL SSDSC2KB960G8", "ahci")));
        let odd_config = 43;
        fleet.push(drive(odd_config, MODEL, "ahci"));
        seen(&store, &fleet).await;
        let config: Vec<&str> = (0..fleet.len())
            .map(|d| if d == odd_config { "64k" } else { "4k" })
            .collect();
        let slow = [5, 29];
        for n in 0..6 {
            let level: Vec<f64> = (0..fleet.len())
                .map(|d| {
                    let factor = if slow.contains(&d) { 1.15 } else { 1.0 };
                    0.020 * factor * (0.05 * normal(&mut rng)).exp()
                })
                .collect();
            night(&store, n, &fleet, &config, &level, &mut rng).await;
        }

        let p = peers::peers(
            &store,
            &Ask {
                model: MODEL.into(),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(
            p.groups.len(),
            2,
            "{:#?}",
            p.groups
                .iter()
                .map(|g| &g.configuration)
                .collect::<Vec<_>>()
        );
        let main = p
            .groups
            .iter()
            .find(|g| g.configuration == "bs=4k")
            .unwrap();
        assert_eq!(main.drives.len(), 40);
        assert_eq!(main.not_judged, "");
        let id = |d: usize| format!("{MODEL}/{}", fleet[d].1.serial);
        let flagged: Vec<&str> = main
            .drives
            .iter()
            .filter(|d| d.outlier)
            .map(|d| d.drive.as_str())
            .collect();
        let mut want = vec![id(5), id(29)];
        want.sort();
        let mut got: Vec<String> = flagged.iter().map(|s| s.to_string()).collect();
        got.sort();
        assert_eq!(got, want);
        for d in &main.drives {
            assert_eq!(d.runs.len(), 6, "one median per run: {}", d.drive);
            let s = d.standing.as_ref().unwrap();
            assert_eq!(
                s.significant,
                s.ci.0 > 1.0 || s.ci.1 < 1.0,
                "{}: {s:?}",
                d.drive
            );
            if d.outlier {
                let pct = d.slower_pct.unwrap();
                assert!((10.0..22.0).contains(&pct), "{}: {pct}", d.drive);
                assert!(
                    d.standing_text().ends_with("slower OUTLIER"),
                    "{}",
                    d.standing_text()
                );
            }
        }
        assert_eq!(p.outliers().len(), 2);
        // The drive on another block size is alone in its group: too few to judge.
        let odd = p
            .groups
            .iter()
            .find(|g| g.configuration == "bs=64k")
            .unwrap();
        assert_eq!(odd.drives.len(), 1);
        assert_eq!(odd.drives[0].drive, id(odd_config));
        assert!(
            odd.not_judged
                .starts_with("too few peers to judge: 1 drive(s)"),
            "{}",
            odd.not_judged
        );
        assert!(odd.drives[0].standing.is_none());
        // A model of three drives: too few.
        let small = peers::peers(
            &store,
            &Ask {
                model: "INTEL SSDSC2KB960G8".into(),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(small.groups.len(), 1);
        assert!(small.groups[0]
            .not_judged
            .starts_with("too few peers to judge: 3 drive(s)"));
        assert!(small.outliers().is_empty());
        // `platter qualification` counts them.
        let q = platter::report::ledger::qualification(&store, MODEL, None).unwrap();
        assert_eq!(q.peer_outliers.len(), 2, "{:?}", q.peer_outliers);
        assert!(q
            .peer_outliers
            .iter()
            .all(|o| o.contains("bs=4k wall ×") && o.ends_with("slower OUTLIER")));
        assert!(
            q.headline().ends_with(
                "; 2 peer outlier(s): slower than the model's other drives (platter peers)"
            ),
            "{}",
            q.headline()
        );
        assert!(
            q.peers.starts_with(
                "41 drive(s) of SAMSUNG MZ7LH960HAJR in 2 peer group(s); 2 outliers: "
            ),
            "{}",
            q.peers
        );
        // The drive's page counts the runs its results name (no storage was made on it and
        // its health was not read: the results alone say it was measured).
        let Ok(d) = platter::report::ledger::find(&store, &id(5)).unwrap() else {
            panic!("drive 5 in the ledger")
        };
        let detail = platter::report::ledger::detail(&store, &d).unwrap();
        assert_eq!(detail.runs.len(), 6, "{:?}", detail.runs);
        assert!(
            detail.runs[0].results[0].contains("wall median"),
            "{:?}",
            detail.runs[0].results
        );
        // The series' own threshold (`qualify: { peers: { max_slower: 12% } }`) when asked by
        // series without --max-slower; 10% without a series.
        let by_series = peers::peers(
            &store,
            &Ask {
                model: MODEL.into(),
                series: Some("fleet-qualification".into()),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!((by_series.max_slower_pct, p.max_slower_pct), (12.0, 10.0));
        // Asked again, nothing is indexed twice.
        assert_eq!(peers::index(&store).unwrap(), 0);
        let again = peers::peers(
            &store,
            &Ask {
                model: MODEL.into(),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(again, p);
    }
}

/// Behind one controller every drive is slower: the controller is named, not the drives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_controller_is_named_rather_than_its_drives() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open(&tmp.path().join("coordinator.db")).unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let fleet: Vec<(String, Device)> = (0..21)
        .map(|i| drive(i, MODEL, if i % 3 == 2 { "mpt3sas" } else { "ahci" }))
        .collect();
    seen(&store, &fleet).await;
    let config = vec!["4k"; fleet.len()];
    for n in 0..6 {
        let level: Vec<f64> = (0..fleet.len())
            .map(|d| {
                let factor = if d % 3 == 2 { 1.12 } else { 1.0 };
                0.020 * factor * (0.03 * normal(&mut rng)).exp()
            })
            .collect();
        night(&store, n, &fleet, &config, &level, &mut rng).await;
    }
    let p = peers::peers(
        &store,
        &Ask {
            model: MODEL.into(),
            ..Default::default()
        },
    )
    .unwrap();
    let g = &p.groups[0];
    assert_eq!(g.controllers.len(), 1, "{:?}", g.controllers);
    assert!(
        g.controllers[0].starts_with("7 of 7 drives behind mpt3sas are 1")
            && g.controllers[0]
                .ends_with("% slower than behind ahci: the controller, not the drives"),
        "{}",
        g.controllers[0]
    );
    assert!(
        p.outliers().is_empty(),
        "each drive is judged behind its own controller: {:?}",
        p.outliers()
    );

    // The CLI: table, JSON and CSV; exit 0 without an outlier, 5 for a model never measured.
    let db = tmp.path().join("coordinator.db");
    let db = db.to_str().unwrap();
    let out = common::run_ok(common::platter().args(["peers", MODEL, "--db", db]));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("21 drive(s) of SAMSUNG MZ7LH960HAJR in 1 peer group(s); no outlier"),
        "{text}"
    );
    assert!(text.contains("7 of 7 drives behind mpt3sas"), "{text}");
    let out =
        common::run_ok(common::platter().args(["peers", MODEL, "--db", db, "--format", "json"]));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["groups"][0]["drives"].as_array().unwrap().len(), 21);
    let out =
        common::run_ok(common::platter().args(["peers", MODEL, "--db", db, "--format", "csv"]));
    let csv = String::from_utf8_lossy(&out.stdout);
    assert_eq!(csv.lines().count(), 22, "{csv}");
    assert!(csv.starts_with("model,firmware,workload,configuration,metric"));
    let none = common::platter()
        .args(["peers", "NO SUCH MODEL", "--db", db])
        .output()
        .unwrap();
    assert_eq!(none.status.code(), Some(5));
    let bad = common::platter()
        .args(["peers", MODEL, "--db", db, "--max-slower", "fast"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("is not a percentage like 10% or 7.5"));
}

/// A campaign's flags judge each drive it measured among its peers again: the two slow
/// drives of the forty are flagged (kind peer, linking to the model's page), the others'
/// flags would be fixed, and a second look at the same campaign raises nothing new.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_campaigns_flags_name_the_drives_slower_than_their_peers() {
    use platter::store::flags::{FlagFilter, FlagKind};
    let tmp = tempfile::tempdir().unwrap();
    for store in platter::store::testing::stores(tmp.path()) {
        let fleet = common::fleet::forty(&store, &[5, 29]).await;
        let last = store.campaigns_to_flag().unwrap().pop().unwrap();
        let (raised, fixed) = platter::report::flags::of_campaign(&store, &last).unwrap();
        let peer: Vec<_> = raised.iter().filter(|f| f.kind == FlagKind::Peer).collect();
        let mut drives: Vec<&str> = peer.iter().map(|f| f.drive.as_str()).collect();
        drives.sort();
        let id = |d: usize| format!("{MODEL}/{}", fleet[d].1.serial);
        let mut want = vec![id(5), id(29)];
        want.sort();
        assert_eq!(drives, want, "{peer:#?}");
        for f in &peer {
            assert!(
                f.summary.contains("is slower than its 39 peers"),
                "{}",
                f.summary
            );
            assert!(f.summary.contains("OUTLIER"), "{}", f.summary);
            assert!(f.link.starts_with("/models/"), "{}", f.link);
        }
        assert_eq!(
            fixed
                .iter()
                .filter(|f| f.note.contains("among 39 peers"))
                .count(),
            38
        );
        store
            .raise_flags(Some(&last), &raised, &fixed)
            .unwrap()
            .unwrap();
        let stored = store
            .flags(&FlagFilter {
                kind: Some(FlagKind::Peer),
                ..Default::default()
            })
            .unwrap();
        assert_eq!(stored.len(), 2);
        assert_eq!(
            store.raise_flags(Some(&last), &raised, &fixed).unwrap(),
            None
        );
    }
}
