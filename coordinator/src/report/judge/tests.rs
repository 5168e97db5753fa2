use super::comparisons::pair_devices;
use super::pivot::statistic;
use super::*;
use crate::report::MetricStats;
use crate::spec::{Pivot, PivotKey, ReportSpec, DEVICE};
use crate::stats;

fn cell(
    host: &str,
    device: &str,
    cache: &str,
    size: &str,
    offset: &str,
    values: &[f64],
) -> CellReport {
    CellReport::for_test(
        "0000000000000001".into(),
        host,
        &[
            (DEVICE, device),
            ("write_cache", cache),
            ("size", size),
            ("offset", offset),
        ],
        vec![MetricStats::of_values("latency.mean", "s", values)],
    )
}

fn key(name: &str) -> PivotKey {
    PivotKey {
        name: name.into(),
        line: 1,
        column: 1,
    }
}

#[test]
fn seed_001_table_layout_min_over_offsets_and_repetitions() {
    // Two hosts, each with an Intel 520 or 530, write cache on; sizes as columns; the
    // best (min) of every repetition at offsets 0 and 512, as the seed's table shows.
    let mut cells = Vec::new();
    for (host, dev, base) in [("rcmonster", "sdb", 0.00044), ("rc66", "sdc", 0.0098)] {
        for (i, size) in ["1", "1024", "4096", "8192"].iter().enumerate() {
            let v = base * (1.0 + i as f64);
            cells.push(cell(host, dev, "on", size, "0", &[v * 1.1, v * 1.2]));
            cells.push(cell(host, dev, "on", size, "512", &[v, v * 1.3]));
        }
    }
    let models = |host: &str, dev: &str, field: &str| -> Option<String> {
        (field == "model").then(|| match (host, dev) {
            ("rcmonster", "sdb") => "INTEL SSDSC2CW120A3".to_string(),
            _ => "INTEL SSDSC2BW120A4".to_string(),
        })
    };
    let settings = ReportSpec {
        pivot: Some(Pivot {
            rows: vec![key("host"), key("device.model"), key("write_cache")],
            columns: vec![key("size")],
            metric: "latency.mean".into(),
            metrics: vec![],
            stat: "min".into(),
            line: 1,
            column: 1,
        }),
        ..ReportSpec::default()
    };
    let p = pivot(&cells, &settings, &models).unwrap();
    assert_eq!(p.columns, ["1", "1024", "4096", "8192"]);
    assert_eq!(p.rows.len(), 2);
    let (labels, values) = &p.rows[0];
    assert_eq!(labels, &["rcmonster", "INTEL SSDSC2CW120A3", "on"]);
    let want = [0.00044, 0.00088, 0.00132, 0.00176];
    for (got, want) in values.iter().zip(want) {
        assert!((got.unwrap() - want).abs() < 1e-12, "{got:?} vs {want}");
    }
    assert_eq!(p.rows[1].0[1], "INTEL SSDSC2BW120A4");
}

#[test]
fn identical_drives_behind_different_controllers_side_by_side() {
    // One model and firmware on three hosts: behind AHCI on two, behind an LSI HBA on the
    // third; another firmware of it on the HBA. Rows model + firmware, a column per
    // controller chain, as the drive facts of each run's snapshots give them.
    let mut cells = Vec::new();
    for (host, dev, v) in [
        ("rc66", "sdb", 0.0010),
        ("rcmonster", "sdb", 0.0012),
        ("flygecko", "sdc", 0.0030),
        ("flygecko", "sdd", 0.0020),
    ] {
        cells.push(cell(host, dev, "on", "4096", "0", &[v, v * 1.1]));
    }
    let facts = |host: &str, dev: &str, field: &str| -> Option<String> {
        Some(match field {
            "model" => "INTEL SSDSC2BW120A4".into(),
            "firmware" if (host, dev) == ("flygecko", "sdd") => "DL2C".into(),
            "firmware" => "DL2B".into(),
            "controller" if host == "flygecko" => "sd>mpt3sas".into(),
            "controller" => "sd>ahci".into(),
            _ => return None,
        })
    };
    let settings = ReportSpec {
        pivot: Some(Pivot {
            rows: vec![key("device.model"), key("device.firmware")],
            columns: vec![key("device.controller")],
            metric: "latency.mean".into(),
            metrics: vec![],
            stat: "median".into(),
            line: 1,
            column: 1,
        }),
        ..ReportSpec::default()
    };
    let p = pivot(&cells, &settings, &facts).unwrap();
    assert_eq!(p.columns, ["sd>ahci", "sd>mpt3sas"]);
    let rows: Vec<(Vec<String>, Vec<Option<f64>>)> = p
        .rows
        .iter()
        .map(|(l, v)| {
            (
                l.clone(),
                v.iter().map(|x| x.map(|x| (x * 1e6).round())).collect(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            (
                vec!["INTEL SSDSC2BW120A4".to_string(), "DL2B".to_string()],
                // The median of rc66's and rcmonster's four runs; flygecko's two.
                vec![Some(1150.0), Some(3150.0)]
            ),
            (
                vec!["INTEL SSDSC2BW120A4".to_string(), "DL2C".to_string()],
                vec![None, Some(2100.0)]
            ),
        ]
    );
}

#[test]
fn seed_003_table_filesystem_by_metric_each_column_in_its_unit() {
    // bonnie++ on three filesystems: block writes in B/s and seeks in op/s.
    let cells: Vec<CellReport> = [("ext4", 1.2e9, 900.0), ("btrfs", 0.9e9, 700.0)]
        .iter()
        .map(|(fs, bw, seeks)| {
            let mut c = cell("rc66", "sdb", "on", "1", "0", &[1.0]);
            c.params = [("fs".to_string(), fs.to_string())].into_iter().collect();
            c.metrics = [("put_block", "B/s", *bw), ("seeks", "op/s", *seeks)]
                .iter()
                .map(|(m, unit, v)| MetricStats {
                    metric: m.to_string(),
                    unit: unit.to_string(),
                    stats: stats::summarize(&[*v, v * 1.1]).unwrap(),
                    values: vec![*v, v * 1.1],
                    not_measured: 0,
                    not_measured_reason: String::new(),
                    samples: vec![],
                    same_as: None,
                })
                .collect();
            c
        })
        .collect();
    let settings = ReportSpec {
        pivot: Some(Pivot {
            rows: vec![key("fs")],
            columns: vec![key("metric")],
            metric: "put_block".into(),
            metrics: vec!["put_block".into(), "seeks".into()],
            stat: "min".into(),
            line: 1,
            column: 1,
        }),
        ..ReportSpec::default()
    };
    let p = pivot(&cells, &settings, &|_: &str, _: &str, _: &str| None).unwrap();
    assert_eq!(p.columns, ["put_block", "seeks"]);
    assert_eq!(p.column_units, ["B/s", "op/s"]);
    assert_eq!(p.unit, "");
    assert_eq!(p.metric, "put_block, seeks");
    assert_eq!(p.rows[0].0, ["ext4"]);
    assert_eq!(p.rows[0].1, [Some(1.2e9), Some(900.0)]);
    assert_eq!(p.rows[1].1, [Some(0.9e9), Some(700.0)]);
    assert_eq!((p.unit_at(1, 0), p.unit_at(1, 1)), ("B/s", "op/s"));
    assert_eq!(p.slot_text(0, 1, Some("900 op/s".into())), "900 op/s");
    // A metric bonnie++ could not measure in some runs, or in every run: the slot says
    // so, and on how many runs its value rests.
    let mut gaps = cells.clone();
    gaps[0].metrics[1].not_measured = 1;
    gaps[0].metrics[1].not_measured_reason = "too fast to measure".into();
    let seeks = gaps[1].metrics.remove(1);
    gaps[1].unmeasured.push(crate::report::Unmeasured {
        metric: "seeks".into(),
        unit: String::new(),
        count: 3,
        reason: "too fast to measure".into(),
        samples: vec![],
    });
    let p = pivot(&gaps, &settings, &|_: &str, _: &str, _: &str| None).unwrap();
    assert_eq!(
        p.slot_text(0, 1, Some("900 op/s".into())),
        "900 op/s (2 of 3 runs; 1 too fast to measure)"
    );
    assert_eq!(p.rows[1].1[1], None);
    assert_eq!(p.slot_text(1, 1, None), "too fast to measure");
    assert_eq!(seeks.metric, "seeks");
    // The metrics as rows instead: each row in its unit.
    let mut s = settings.clone();
    let pv = s.pivot.as_mut().unwrap();
    (pv.rows, pv.columns) = (vec![key("metric")], vec![key("fs")]);
    let p = pivot(&cells, &s, &|_: &str, _: &str, _: &str| None).unwrap();
    assert_eq!(p.columns, ["ext4", "btrfs"]);
    assert_eq!(p.row_units, ["B/s", "op/s"]);
    assert_eq!(
        p.rows[1],
        (vec!["seeks".to_string()], vec![Some(900.0), Some(700.0)])
    );
}

#[test]
fn a_slow_drive_stands_out_in_its_fleet() {
    // Seed 001 in miniature: the same configuration on eight drives, one of them an
    // Intel 530 that takes 10 ms where the others take 0.2–1 ms.
    let medians = [
        0.00044, 0.00021, 0.0037, 0.00083, 0.0098, 0.0006, 0.0003, 0.0005,
    ];
    // Five repetitions each, within 2% of the drive's median.
    let cells: Vec<CellReport> = medians
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let reps: Vec<f64> = [0.98, 0.99, 1.0, 1.01, 1.02]
                .iter()
                .map(|f| m * f)
                .collect();
            let mut c = cell(&format!("host{i}"), "sda", "on", "1", "0", &reps);
            c.metrics[0].stats.median = *m;
            c
        })
        .collect();
    let settings = ReportSpec {
        metric: "latency.mean".into(),
        ..ReportSpec::default()
    };
    let flagged = fleet_outliers(&cells, &settings);
    let hosts: Vec<&str> = flagged.iter().map(|o| o.host.as_str()).collect();
    assert!(hosts.contains(&"host4"), "{flagged:?}");
    let slow = flagged.iter().find(|o| o.host == "host4").unwrap();
    assert!(slow.ratio > 10.0, "{slow:?}");
    // The mark and its interval agree: every outlier's interval is clear of ×1.
    for o in &flagged {
        assert!(o.ci.0 > 1.0 || o.ci.1 < 1.0, "{o:?}");
    }
    // Two repetitions a drive cannot show anything after Holm over eight drives: no mark.
    let two: Vec<CellReport> = medians
        .iter()
        .enumerate()
        .map(|(i, m)| cell(&format!("host{i}"), "sda", "on", "1", "0", &[*m, *m]))
        .collect();
    assert!(fleet_outliers(&two, &settings).is_empty());
    assert_eq!(slow.group, "write_cache=on size=1 offset=0");
    // Drives that agree (within 3%, each run within 2%) raise nothing.
    let calm: Vec<CellReport> = [1.0, 1.01, 0.99, 1.02, 0.985, 1.005]
        .iter()
        .enumerate()
        .map(|(i, level)| {
            let reps: Vec<f64> = [1.01, 0.98, 1.0, 1.02, 0.99]
                .iter()
                .map(|f| 0.0005 * level * f)
                .collect();
            cell(&format!("host{i}"), "sda", "on", "1", "0", &reps)
        })
        .collect();
    assert!(fleet_outliers(&calm, &settings).is_empty());
}

fn baseline(key: &str, value: &str) -> ReportSpec {
    ReportSpec {
        baseline: Some(crate::spec::Baseline {
            key: key.into(),
            value: value.into(),
            line: 1,
            column: 1,
        }),
        metric: "latency.mean".into(),
        ..ReportSpec::default()
    }
}

/// Cells of `host` on `devices` (in plan order) at sizes 1 and 4096, `scale` times a
/// common set of repetitions.
fn host_cells(host: &str, devices: &[&str], scale: f64) -> Vec<CellReport> {
    let runs = [1.00, 1.02, 0.98, 1.01, 0.99, 1.03];
    let mut out = Vec::new();
    for d in devices {
        for size in ["1", "4096"] {
            let v: Vec<f64> = runs.iter().map(|r| r * scale * 1e-3).collect();
            out.push(cell(host, d, "on", size, "0", &v));
        }
    }
    out
}

#[test]
fn a_baseline_host_compares_the_same_cell_on_each_host_whatever_its_devices_are_called() {
    // rc66 tests loop3 and loop4; rcmonster sdb, sdc and a third drive, sdd; flygecko
    // only a loop4. Devices pair by name where both hosts have it, else by position.
    let mut cells = host_cells("rc66", &["loop3", "loop4"], 1.0);
    cells.extend(host_cells("rcmonster", &["sdb", "sdc", "sdd"], 2.0));
    cells.extend(host_cells("flygecko", &["loop4"], 1.0));
    let rows = compare_cells(&cells, &baseline("host", "rc66"));
    let text = |r: &JudgedComparison| format!("{}: {}", r.row.context, r.row.text);
    let all: Vec<String> = rows.iter().map(text).collect();

    let compared: Vec<&JudgedComparison> = rows.iter().filter(|r| r.compared).collect();
    assert_eq!(compared.len(), 6, "{all:#?}");
    for r in compared.iter().filter(|r| r.row.host == "rcmonster") {
        assert!((r.row.ratio - 2.0).abs() < 1e-9, "{}", text(r));
        assert!(r.ci_level.is_some() && r.p_value.is_some(), "{r:?}");
        assert!(!r.row.context.contains("device"), "{}", text(r));
    }
    for (dev, base) in [("sdb", "loop3"), ("sdc", "loop4")] {
        for size in ["1", "4096"] {
            let want = format!(
                "write_cache=on size={size} offset=0: host=rcmonster {dev} vs rc66 {base} penalty 100.0%"
            );
            assert!(all.iter().any(|l| l.starts_with(&want)), "{want}\n{all:#?}");
        }
    }
    let flygecko: Vec<&&JudgedComparison> = compared
        .iter()
        .filter(|r| r.row.host == "flygecko")
        .collect();
    assert_eq!(flygecko.len(), 2, "{all:#?}");
    for r in flygecko {
        assert!(r.row.context.starts_with("device=loop4 "), "{}", text(r));
        assert!(
            r.row.text.starts_with("host=flygecko vs rc66 penalty"),
            "{}",
            text(r)
        );
    }

    // Nothing disappears: rcmonster's third drive, and rc66's loop3 on flygecko.
    let unmatched: Vec<String> = rows.iter().filter(|r| !r.compared).map(text).collect();
    assert_eq!(
        unmatched,
        [
            "device=sdd write_cache=on size=1 offset=0: rcmonster sdd: no cell on rc66 to compare with",
            "device=sdd write_cache=on size=4096 offset=0: rcmonster sdd: no cell on rc66 to compare with",
            "device=loop3 write_cache=on size=1 offset=0: rc66 loop3: no cell on flygecko compared with it",
            "device=loop3 write_cache=on size=4096 offset=0: rc66 loop3: no cell on flygecko compared with it",
        ]
    );
    assert!(rows
        .iter()
        .filter(|r| !r.compared)
        .all(|r| r.row.ratio.is_nan() && !r.row.significant && r.p_value.is_none()));
    // Holm's family counts the tests made, not the cells listed as unmatched.
    assert!(rows.iter().all(|r| r.family == 6), "{rows:?}");
}

#[test]
fn devices_pair_by_name_first_then_by_position_among_the_rest() {
    assert_eq!(
        pair_devices(&["sdb", "sdc"], &["loop3", "loop4"]),
        [("sdb", "loop3"), ("sdc", "loop4")]
    );
    // sdb is on both; sdc and sda pair by position among the rest; sdd has nothing.
    assert_eq!(
        pair_devices(&["sdc", "sdb", "sdd"], &["sdb", "sda"]),
        [("sdb", "sdb"), ("sdc", "sda")]
    );
    assert_eq!(pair_devices(&[], &["sda"]), []);
}

#[test]
fn a_cell_without_its_baseline_value_is_listed_not_dropped() {
    // An `exclude` took write_cache=off from sdc: its `on` cell has no baseline. A
    // cell without values of the metric is listed as not compared.
    let mut cells = vec![
        cell("h", "sdb", "off", "1", "0", &[1e-3, 1.1e-3, 0.9e-3]),
        cell("h", "sdb", "on", "1", "0", &[2e-3, 2.1e-3, 1.9e-3]),
        cell("h", "sdc", "on", "1", "0", &[2e-3, 2.1e-3, 1.9e-3]),
        cell("h", "sdb", "off", "8", "0", &[1e-3, 1.1e-3, 0.9e-3]),
        cell("h", "sdb", "on", "8", "0", &[2e-3, 2.1e-3, 1.9e-3]),
    ];
    cells[4].metrics.clear();
    let rows = compare_cells(&cells, &baseline("write_cache", "off"));
    let lines: Vec<(bool, String)> = rows
        .iter()
        .map(|r| (r.compared, format!("{}: {}", r.row.context, r.row.text)))
        .collect();
    assert_eq!(lines.len(), 3, "{lines:#?}");
    assert!(
        lines[0].0
            && lines[0]
                .1
                .starts_with("h device=sdb size=1 offset=0: write_cache=on vs off penalty"),
        "{lines:#?}"
    );
    assert_eq!(
        lines[1],
        (false, "h device=sdc size=1 offset=0: write_cache=on: no cell with write_cache=off on h sdc to compare with".to_string())
    );
    assert_eq!(
        lines[2],
        (false, "h device=sdb size=8 offset=0: write_cache=on vs off: not compared: no positive values of latency.mean on both sides".to_string())
    );
}

fn report(id: &str, cells: Vec<CellReport>) -> crate::report::Report {
    crate::report::Report {
        schema_version: 1,
        campaign_id: id.into(),
        name: id.into(),
        state: "done".into(),
        params: vec![],
        repeat: 6,
        repetition: String::new(),
        warmup: 0,
        cells,
        ..Default::default()
    }
}

#[test]
fn compare_campaigns_lists_the_cells_either_side_lacks() {
    let a = report("A", host_cells("rc66", &["sdb", "sdc"], 1.0));
    let mut b_cells = host_cells("rc66", &["sdb"], 1.5);
    b_cells.extend(host_cells("rcmonster", &["sdb"], 1.0));
    let b = report("B", b_cells);
    let c = compare_campaigns(&a, &b, "latency.mean");
    assert_eq!(c.rows.len(), 2);
    for r in &c.rows {
        assert!(r.compared && (r.row.ratio - 1.5).abs() < 1e-9, "{r:?}");
        // 6 + 6 runs: the interval's real coverage, and the test behind the verdict.
        assert!(r.ci_level.is_some_and(|l| l > 0.95), "{r:?}");
        assert!(
            r.p_value.is_some() && r.holm_p.is_some() && r.family == 2,
            "{r:?}"
        );
        assert!(r.row.significant && r.row.text.contains("% CI"), "{r:?}");
    }
    let names = |cells: &[UnmatchedCell]| -> Vec<String> {
        cells.iter().map(UnmatchedCell::describe).collect()
    };
    assert_eq!(
        names(&c.only_in_a),
        [
            "rc66 device=sdc write_cache=on size=1 offset=0",
            "rc66 device=sdc write_cache=on size=4096 offset=0"
        ]
    );
    assert_eq!(
        names(&c.only_in_b),
        [
            "rcmonster device=sdb write_cache=on size=1 offset=0",
            "rcmonster device=sdb write_cache=on size=4096 offset=0"
        ]
    );
    assert_eq!(c.incomplete(), 4);
    let same = compare_campaigns(&a, &a, "latency.mean");
    assert_eq!((same.rows.len(), same.incomplete()), (4, 0));
}

#[test]
fn statistics_of_a_slot() {
    let mut v = vec![4.0, 1.0, 3.0, 2.0];
    assert_eq!(statistic(&mut v, "min"), Some(1.0));
    assert_eq!(statistic(&mut v, "max"), Some(4.0));
    assert_eq!(statistic(&mut v, "median"), Some(2.5));
    assert_eq!(statistic(&mut v, "mean"), Some(2.5));
    assert_eq!(statistic(&mut v, "p50"), Some(2.5));
    assert_eq!(statistic(&mut [], "min"), None);
}

/// `qualify: { peers: { max_slower } }` is the campaign's floor for an outlier: a drive 7%
/// slower than five others, every run within 1%, is significant; it is an outlier at 5%,
/// not at the default 10%.
#[test]
fn the_peers_threshold_is_the_campaigns_outlier_floor() {
    let cells: Vec<CellReport> = (0..6)
        .map(|i| {
            let level = if i == 3 { 1.07 } else { 1.0 };
            let reps: Vec<f64> = [1.0, 1.005, 0.995, 1.01, 0.99, 1.002]
                .iter()
                .map(|f| 0.002 * level * f)
                .collect();
            cell(&format!("host{i}"), "sda", "on", "1", "0", &reps)
        })
        .collect();
    let mut settings = ReportSpec {
        metric: "latency.mean".into(),
        ..ReportSpec::default()
    };
    assert!(fleet_outliers(&cells, &settings).is_empty());
    settings.peers_max_slower = Some(5.0);
    let flagged = fleet_outliers(&cells, &settings);
    assert_eq!(
        flagged.iter().map(|o| o.host.as_str()).collect::<Vec<_>>(),
        ["host3"]
    );
}

/// Over random fleets (hosts × drives × block sizes, 3 to 12 runs a cell, with and without
/// a baseline host), every ratio the comparisons, the side-by-side view and the findings
/// print is either decided — significant exactly when its interval excludes ×1, `~`
/// exactly when not — or an estimate, neither significant nor `~`; and no fleet outlier
/// stands on a cell whose ratio is decided equal to the reference's.
#[test]
fn every_ratio_of_a_random_fleet_says_what_its_interval_says() {
    use crate::report::side::{self, SideValue};
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(50);
    let (mut decided, mut estimates, mut outliers_kept) = (0, 0, 0);
    for round in 0..40 {
        let runs: &[usize] = if round % 2 == 0 {
            &[5]
        } else {
            &[3, 5, 6, 8, 12]
        };
        let mut cells = Vec::new();
        for host in ["a", "b", "c"] {
            for device in ["sdb", "sdc"] {
                let factor: f64 = if rng.random_bool(0.5) {
                    1.0
                } else {
                    rng.random_range(0.3..3.0)
                };
                for bs in ["4k", "64k"] {
                    let n = runs[rng.random_range(0..runs.len())];
                    let noise = rng.random_range(0.005..0.2);
                    let values: Vec<f64> = (0..n)
                        .map(|_| 0.01 * factor * (1.0 + noise * rng.random_range(-1.0..1.0)))
                        .collect();
                    cells.push(CellReport::for_test(
                        format!("{host}-{device}-{bs}"),
                        host,
                        &[(DEVICE, device), ("bs", bs)],
                        vec![MetricStats::of_values("wall", "s", &values)],
                    ));
                }
            }
        }
        let settings = ReportSpec {
            baseline: (round % 3 != 0).then(|| crate::spec::Baseline {
                key: "host".into(),
                value: "a".into(),
                line: 1,
                column: 1,
            }),
            ..ReportSpec::default()
        };
        let comparisons = compare_cells(&cells, &settings);
        let outliers = fleet_outliers(&cells, &settings);
        let mut view = side::build(&cells, &settings, &outliers, &comparisons);
        let kept = side::agreeing_outliers(view.as_mut(), &cells, &settings, outliers);
        let view = view.expect("three hosts");
        // No outlier stands on a cell whose ratio is decided equal, marked or listed.
        for row in &view.rows {
            for v in &row.values {
                if let SideValue::Measured {
                    ratio: Some(r),
                    outlier,
                    ..
                } = v
                {
                    assert!(!(*outlier && r.no_difference()), "{r:?}");
                }
            }
        }
        outliers_kept += kept.len();
        let found = crate::report::findings::build(&cells, &settings, &comparisons, Some(&view));
        let mut ratios: Vec<side::SideRatio> = comparisons
            .iter()
            .filter_map(side::SideRatio::of_comparison)
            .collect();
        for row in &view.rows {
            for v in &row.values {
                if let SideValue::Measured { ratio: Some(r), .. } = v {
                    ratios.push(r.clone());
                }
            }
        }
        for f in found
            .differences
            .iter()
            .chain(&found.no_difference)
            .chain(&found.estimates)
        {
            ratios.extend(f.at.iter().map(|i| i.ratio.clone()));
        }
        for r in ratios {
            let text = r.text();
            if r.too_few_runs.is_some() {
                estimates += 1;
                assert!(!r.significant && !text.contains('~'), "{r:?}");
                continue;
            }
            decided += 1;
            let (lo, hi) = r.ratio_ci.expect("decided lines have an interval");
            assert_eq!(r.significant, lo > 1.0 || hi < 1.0, "{text} {r:?}");
            assert_eq!(text.ends_with(" ~"), !r.significant, "{text}");
        }
        // A report whose lines are all estimates says so once, with the repeat that would.
        if let Some(u) = found.undecided {
            assert!(u.estimates > 0 && u.runs_needed > u.runs.0, "{u:?}");
        }
    }
    assert!(
        decided > 100 && estimates > 100,
        "{decided} decided, {estimates} estimates"
    );
    assert!(outliers_kept > 0, "no outlier in any fleet");
}
