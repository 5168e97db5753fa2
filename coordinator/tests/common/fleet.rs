//! A fleet of drives simulated through the store's normal write path, for the tests of
//! each drive against its peers (issue 49: `tests/peers.rs`, the console's model page):
//! campaigns submitted, the agents' records (provenance naming the drives, each
//! measurement's samples, the plan's end) written as agents send them, the ledger filled by
//! their inventories.

use indexmap::IndexMap;
use platter::planning::planner::{PlannedCampaign, PlannedCell};
use platter::store::Store;
use platter_proto::inventory::Device;
use platter_proto::model::{
    OnFailure, Plan, Record, RecordKind, Sample, Step, StepEvent, StepKind, StepState, Workload,
};
use platter_proto::provenance::{DeviceFacts, Provenance, AT_PLAN_START};
use rand::{Rng, SeedableRng};

pub const MODEL: &str = "SAMSUNG MZ7LH960HAJR";
pub const HOSTS: [&str; 3] = ["rc66", "rcmonster", "flygecko"];

/// Drive `i` of the fleet: its host, name and device as the agent reports it.
pub fn drive(i: usize, model: &str, controller: &str) -> (String, Device) {
    let host = HOSTS[i % HOSTS.len()].to_string();
    let mut d = platter::store::testing::drive(model);
    d.name = format!("sd{}", (b'a' + (i / HOSTS.len()) as u8) as char);
    d.path = format!("/dev/{}", d.name);
    d.serial = format!("S4{}{i:04}", &model[..2]);
    d.firmware = "HXT7404Q".into();
    d.controller = vec!["sd".into(), controller.into()];
    (host, d)
}

/// The campaign file each night's campaign is stored with: what its report reads again
/// (its threshold for peers, 12%).
pub const FLEET_YAML: &str = "name: fleet-qualification
workload: { command: { run: \"true\" } }
report:
  qualify:
    peers: { max_slower: 12% }
";

/// One campaign ("night") measuring every drive of `fleet` once, each cell 3 repetitions:
/// drive d's run at `level[d]` (its night's level), the repetitions within 1% of it.
pub async fn night(
    store: &Store,
    n: usize,
    fleet: &[(String, Device)],
    config: &[&str],
    level: &[f64],
    rng: &mut impl Rng,
) {
    let id = format!("night-{n}");
    let mut cells = Vec::new();
    let mut plans: IndexMap<String, Vec<Step>> = IndexMap::new();
    for (d, (host, dev)) in fleet.iter().enumerate() {
        let cell_id = format!("{id}-cell-{d}");
        let mut params = IndexMap::from([("device".to_string(), dev.name.clone())]);
        params.insert("bs".into(), config[d].to_string());
        let steps = plans.entry(host.clone()).or_default();
        cells.push(PlannedCell {
            id: cell_id.clone().into(),
            host: host.clone().into(),
            index: steps.len() / 3,
            params,
            point: 0,
            device: Some(dev.path.clone()),
        });
        for repetition in 1..=3 {
            steps.push(Step {
                index: steps.len() as u32,
                cell_id: cell_id.clone().into(),
                repetition,
                warmup: false,
                kind: StepKind::Measure(Workload::Command(format!(
                    "fio --filename={} --rw=randwrite --bs={}",
                    dev.path, config[d]
                ))),
            });
        }
    }
    let campaign = PlannedCampaign {
        id: id.clone().into(),
        name: "fleet-qualification".into(),
        series: "fleet-qualification".into(),
        content_hash: id.clone(),
        generation: 1,
        params: vec!["device".into(), "bs".into()],
        repeat: 3,
        cells,
        plans: plans
            .iter()
            .map(|(host, steps)| Plan {
                id: format!("{id}-{host}").into(),
                campaign_id: id.clone().into(),
                campaign_name: "fleet-qualification".into(),
                host: host.clone().into(),
                steps: steps.clone(),
                on_failure: OnFailure::Continue,
                run_as: Default::default(),
            })
            .collect(),
    };
    store
        .insert_campaign(&campaign, "fleet.yaml", FLEET_YAML)
        .unwrap();
    for (host, steps) in &plans {
        let plan_id = format!("{id}-{host}");
        let devices: Vec<DeviceFacts> = fleet
            .iter()
            .filter(|(h, _)| h == host)
            .map(|(_, d)| DeviceFacts {
                device: d.clone(),
                logical_block_size: 512,
                physical_block_size: 4096,
                scheduler: "none".into(),
            })
            .collect();
        let mut records = vec![
            Record {
                seq: 0,
                kind: RecordKind::PlanAccepted {
                    plan_id: plan_id.clone().into(),
                },
            },
            Record {
                seq: 0,
                kind: RecordKind::Provenance {
                    plan_id: plan_id.clone().into(),
                    step_index: 0,
                    facts: Box::new(Provenance {
                        trigger: AT_PLAN_START.into(),
                        devices,
                        ..Default::default()
                    }),
                },
            },
        ];
        for s in steps {
            let d: usize = s
                .cell_id
                .as_str()
                .rsplit('-')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            let value = level[d] * (1.0 + rng.random_range(-0.01..0.01));
            records.push(Record {
                seq: 0,
                kind: RecordKind::Step(StepEvent {
                    plan_id: plan_id.clone().into(),
                    kind: "measure".into(),
                    step_index: s.index,
                    cell_id: s.cell_id.clone(),
                    repetition: s.repetition,
                    attempt: 1,
                    state: StepState::Succeeded,
                    started_unix_ns: 1_000 * (s.index as i64 + 1),
                    finished_unix_ns: 1_000 * (s.index as i64 + 2),
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
            });
        }
        records.push(Record {
            seq: 0,
            kind: RecordKind::PlanFinished {
                plan_id: plan_id.clone().into(),
                cancelled: false,
            },
        });
        for (i, r) in records.iter_mut().enumerate() {
            r.seq = n as u64 * 100_000 + i as u64 + 1;
        }
        store
            .write_records(&host.clone().into(), records)
            .await
            .unwrap();
    }
}

/// A standard normal draw (Box–Muller).
pub fn normal(rng: &mut impl Rng) -> f64 {
    let u1: f64 = rng.random_range(f64::EPSILON..1.0);
    let u2: f64 = rng.random_range(0.0..1.0);
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// Tells the store each host's drives of `fleet`, as their agents' hellos do.
pub async fn seen(store: &Store, fleet: &[(String, Device)]) {
    for host in HOSTS {
        let devices: Vec<Device> = fleet
            .iter()
            .filter(|(h, _)| h == host)
            .map(|(_, d)| d.clone())
            .collect();
        store
            .agent_seen(&host.to_string().into(), "b1", "0.1.0", &devices, &[])
            .await
            .unwrap();
    }
}

/// The fleet: 40 drives of `MODEL` over the 3 hosts behind ahci, each measured in 6
/// runs ("nights") with 5% run-to-run noise, the drives `slow` 15% slower; the fleet, each
/// drive's ledger id being `MODEL/` and its serial.
pub async fn forty(store: &Store, slow: &[usize]) -> Vec<(String, Device)> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(49);
    let fleet: Vec<(String, Device)> = (0..40).map(|i| drive(i, MODEL, "ahci")).collect();
    seen(store, &fleet).await;
    let config = vec!["4k"; fleet.len()];
    for n in 0..6 {
        let level: Vec<f64> = (0..fleet.len())
            .map(|d| {
                let factor = if slow.contains(&d) { 1.15 } else { 1.0 };
                0.020 * factor * (0.05 * normal(&mut rng)).exp()
            })
            .collect();
        night(store, n, &fleet, &config, &level, &mut rng).await;
    }
    fleet
}
