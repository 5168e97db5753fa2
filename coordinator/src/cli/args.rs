//! The command line's clap types and their value parsers.

use super::*;

/// platter runs storage experiments (YAML campaigns) on one machine or a fleet of test
/// hosts and reports how hosts, drives and configurations compare.
#[derive(Parser)]
#[command(version, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Run a campaign on this machine: an embedded coordinator and agent over loopback,
    /// progress on stderr, the report on stdout. Run it again after an interruption or
    /// a reboot to resume.
    Run(RunArgs),
    /// Check a campaign file and print its cells and each host's plan; runs nothing.
    /// With a coordinator (--coordinator or PLATTER_COORDINATOR), expand it against the
    /// live fleet: which hosts (names and labels) and drives it would touch, within the
    /// coordinator's limits.
    Validate(ValidateArgs),
    /// Run a coordinator for a fleet of agents: campaigns from many operators at once,
    /// one plan at a time per host, hosts in parallel.
    Serve(ServeArgs),
    /// Submit a campaign to a coordinator and print its id.
    Submit(SubmitArgs),
    /// Campaigns and their progress: every campaign, or one with its hosts.
    #[command(visible_alias = "campaigns")]
    Status(StatusArgs),
    /// Follow a campaign live: one line per host with its step, done/total and ETA.
    Watch(WatchArgs),
    /// The fleet: hosts with labels, drives, state (idle, busy, lost, offline), last seen
    /// and current campaign. Past 50 hosts the table counts them by state and lists those
    /// needing attention (journal fault, lost, offline) first; `--all` lists every one,
    /// `--output json` lists every one matching.
    Agents(AgentsArgs),
    /// Whether the coordinator serves: exit status 0 when it answers and its store
    /// commits, 1 otherwise (for load balancers, monitoring and scripts; it asks the
    /// standard gRPC health service, grpc.health.v1, which other probes can ask too).
    Health(HealthArgs),
    /// Cancel a campaign: queued plans are dropped, running steps are killed, storage is
    /// torn down.
    Cancel(CancelArgs),
    /// The fleet's certificates: a CA, then one certificate per coordinator, agent and
    /// operator, each in its own directory for --tls-dir; `certs list` shows when they
    /// expire.
    #[command(subcommand)]
    Certs(Certs),
    /// Print the report of a campaign.
    Report(ReportArgs),
    /// Compare two campaigns run from the same matrix (another day, another fleet): each
    /// cell of B against the same host and parameters in A — the Hodges–Lehmann ratio of
    /// B to A with an interval of its real coverage, Holm-corrected — and the cells of
    /// either without a counterpart. `CAMPAIGN@HOST` narrows a side to one host, so two
    /// hosts (and their drives, matched by position) of one campaign or of two face each
    /// other: `platter compare fleet@rc66 fleet@rcmonster`. Exits 3 when some cells could
    /// not be compared.
    Compare(CompareArgs),
    /// A series over time: the ended runs of one campaign name, oldest first. Per host and
    /// cell, each run's median with its interval and, against the run before it on the
    /// same host and parameters, the Hodges–Lehmann shift with its interval (Holm across
    /// that run's cells) — flagged when significant with its whole interval beyond
    /// ±--threshold, a regression when worse by the metric's unit (a time up, a rate down), with what
    /// changed on that host between the two runs (kernel, drives' firmware, tools…, from
    /// their provenance). Reads the store (`--db`, or `platter run`'s here). Exits 4 with
    /// --fail-on-regression when the latest run has a regression.
    History(HistoryArgs),
    /// List the block devices of this machine, or of every agent a coordinator knows:
    /// model, serial, transport, controller chain, write cache, and what is in use.
    Inventory(InventoryArgs),
    /// Run an agent (the same as the `platter-agent` binary).
    Agent(platter_agent::cli::AgentArgs),
    /// The store: its schema (coordinators also migrate it when they start), and backups
    /// of an SQLite store (taken while it is served) and their restoring.
    #[command(subcommand)]
    Db(DbCommand),
    /// Accounts of the browser console: who may sign in, and with which role (viewer
    /// reads, operator also submits and cancels, admin also manages accounts). Works on
    /// the store directly, as `platter db` does: run it where the store is reachable.
    #[command(subcommand)]
    Users(Users),
    /// API tokens, for scripts that call the console's API in an account's name: each
    /// does at most what its account may do now. Works on the store directly.
    #[command(subcommand)]
    Tokens(Tokens),
    /// Schedules: a campaign run again and again as a series — every so often, on a cron
    /// line (UTC) or when a trigger is pulled — by the coordinators of `platter serve`.
    /// Each slot fires once, whichever coordinator on the store finds it due; slots missed
    /// while every coordinator was down fire once at start-up. Follow a series with
    /// `platter history SERIES`.
    #[command(subcommand)]
    Schedule(Schedule),
    /// Fire now the schedules made `--on-trigger NAME` (else the schedule called NAME),
    /// each run labelled: `platter trigger kernel-update --label kernel=6.12.1`. For CI
    /// systems without the CLI: `POST /api/v1/triggers/NAME` on the console with an
    /// operator's API token. Exits 1 when a schedule's run could not be submitted.
    Trigger(TriggerArgs),
    /// The drive ledger: every physical drive the agents reported (by WWN, else model and
    /// serial; a drive without a serial per host), where it was seen, its latest health
    /// (smartctl, read before and after each run) and the verdicts on it. Reads the store
    /// (--db, or `platter run`'s here) or the coordinator.
    Drives(DrivesArgs),
    /// One drive's history: sightings (host, controller, firmware), moves and firmware
    /// changes, the runs that measured it with their key results and verdicts, its health
    /// over time
    Drive(DriveArgs),
    /// A drive model's qualification across the fleet: on how many drives, hosts and
    /// controller types it passed, every FAIL with its serial and campaign, and the drives
    /// that stand out among their peers (`platter peers`). Exits 1 when a drive of the model
    /// failed a verdict or is a peer outlier, 5 when no drive of it was judged
    Qualification(QualificationArgs),
    /// Each drive of a model against its identical peers across the fleet: the drives of
    /// the model and firmware measured on the same workload and configuration (whatever the
    /// campaign, host or night), one median per run, each drive's shift against the rest
    /// (Hodges–Lehmann, Holm over the group at 1%), flagged when significant and slower than
    /// --max-slower. Exits 1 when a drive is flagged
    Peers(PeersArgs),
    /// Flags: every finding worth a person's attention — a regression or drift in a
    /// series, a qualification FAIL, a drive's health flag, a host offline while holding
    /// a plan, a store fault — one record each with its evidence, severity and state (open,
    /// acknowledged, false-positive, fixed). Live ones (open, then acknowledged) by
    /// default, most severe first. Reads the store directly (--db), or asks a coordinator
    /// (--coordinator, an operator certificate). Exits 1 when a flag is open
    Flags(FlagsArgs),
    /// Change a flag's state: ack (seen, being looked at), false-positive (with a note:
    /// never raised again for the same evidence), fixed, or reopen. Platter sets a flag
    /// fixed itself when later runs are back within the threshold. On the store directly
    /// (--db), or through a coordinator (--coordinator, an operator certificate)
    Flag(FlagArgs),
    /// Alert rules: which flags' events (raised, fixed, reopened) go to which channel — a
    /// signed JSON webhook, a Slack-compatible webhook, or e-mail over SMTP with STARTTLS —
    /// sent once per event and rule by whichever coordinator holds the rule, retried with
    /// backoff, a digest past a count; silences; the delivery log. Works on the store
    /// directly (--db)
    #[command(subcommand)]
    Alerts(AlertsCommand),
}

// `platter validate`'s arguments; its help is the variant's doc comment above.
#[derive(clap::Args)]
pub struct ValidateArgs {
    pub file: PathBuf,
    /// The host `local` stands for [default: this machine's hostname]
    #[arg(long)]
    pub local_host: Option<String>,
    #[command(flatten)]
    pub client: ClientArgs,
    /// Limits when checking here; with a coordinator, its own (`platter serve`) apply
    #[command(flatten)]
    pub limits: LimitArgs,
    #[command(flatten)]
    pub set: SetArgs,
}

// `platter serve`'s arguments; its help is the variant's doc comment above.
#[derive(clap::Args)]
pub struct ServeArgs {
    /// The address to serve on; port 0 takes a free one. Once it listens, `platter
    /// serve` prints `listening on ADDRESS` (the port bound) on stderr
    #[arg(long, default_value = "0.0.0.0:7461")]
    pub listen: SocketAddr,
    /// The store: an SQLite file, or a PostgreSQL database that several coordinators
    /// share (`postgres://USER:PASSWORD@HOST:PORT/DBNAME`; migrated at start, as
    /// `platter db migrate` does)
    #[arg(
        long,
        env = "PLATTER_DB",
        default_value = DEFAULT_STORE
    )]
    pub db: crate::store::db::Location,
    /// Mutual TLS: a directory with ca.pem, cert.pem and key.pem: PKI/coordinator-NAME,
    /// as `platter certs issue coordinator NAME [MORE-NAMES…]` writes it. Agents and
    /// operators must present certificates from the same CA.
    #[arg(
        long,
        env = "PLATTER_TLS_DIR",
        required_unless_present = "dangerously_insecure"
    )]
    pub tls_dir: Option<PathBuf>,
    /// Serve plaintext gRPC: anyone who can reach the address can submit campaigns
    /// and wipe every allowed drive of every agent.
    #[arg(long, conflicts_with = "tls_dir")]
    pub dangerously_insecure: bool,
    /// Also serve HTTP on this address: the fleet console (sign in with an account
    /// from `platter users add`) and its JSON API under /api/v1 (API tokens from
    /// `platter tokens add`), `/healthz` (the process serves), `/readyz` (the store
    /// answers and commits; 503 with the reason otherwise) and `/metrics`
    /// (Prometheus). HTTPS with the coordinator's certificate under --tls-dir (people's
    /// browsers and scrapers trust the fleet's ca.pem); without it plaintext, so a
    /// loopback address (127.0.0.1:9461) unless with --dangerously-insecure. Once it
    /// serves, `platter serve` prints `http on URL` on stderr
    #[arg(long, value_name = "ADDR")]
    pub http: Option<SocketAddr>,
    /// Seconds without a heartbeat after which an agent is lost (its plans wait)
    #[arg(
        long,
        default_value_t = crate::service::server::DEFAULT_HEARTBEAT_TIMEOUT.as_secs(),
        value_parser = heartbeat_timeout
    )]
    pub heartbeat_timeout: u64,
    /// This coordinator's name where several share a PostgreSQL store: `platter
    /// agents` and `platter status` say which coordinator holds each agent [default:
    /// HOSTNAME:PORT]
    #[arg(long, env = "PLATTER_COORDINATOR_NAME")]
    pub name: Option<String>,
    /// PostgreSQL: how many connections store agents' records at once, each for
    /// agents of its own (one server backend uses one core), 1 to 16; a coordinator
    /// also opens up to 24 for reads and 2 more, so mind the server's
    /// `max_connections` (100 by default) across coordinators. An SQLite store has
    /// one writer
    #[arg(
        long,
        env = "PLATTER_DB_WRITERS",
        default_value_t = crate::store::DEFAULT_PG_WRITERS as u16,
        value_parser = clap::value_parser!(u16).range(1..=16)
    )]
    pub db_writers: u16,
    /// Seconds each request to the store waits for its answer (a statement, a row, a
    /// commit; PostgreSQL's connect too). A store that does not answer in time counts
    /// as in fault, as one that cannot commit: health says NOT_SERVING within a few
    /// seconds of a hang, `status` and `agents` say since when, agents keep their
    /// records unacked. On PostgreSQL it also sets the server's statement_timeout (6×)
    /// and idle_in_transaction_session_timeout (3×)
    #[arg(long, env = "PLATTER_STORE_DEADLINE", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub store_deadline: u64,
    /// At start, exit (status 1) if the store is down or does not answer, instead of
    /// waiting for it: by default the coordinator listens, says NOT_SERVING with the
    /// reason, logs "waiting for the store", and serves once it answers
    #[arg(long)]
    pub exit_without_store: bool,
    /// What submitted campaigns may ask for
    #[command(flatten)]
    pub limits: LimitArgs,
    /// The address people reach the console at (https://platter.lab.example:9461):
    /// alert messages link to their evidence under it. Without it the links are paths
    #[arg(long, env = "PLATTER_PUBLIC_URL", value_name = "URL")]
    pub public_url: Option<String>,
    /// How long a host may be offline while holding a plan before it is flagged (a
    /// reboot step takes a host away on purpose): 5m, 90s, 1h
    #[arg(long, default_value = "5m", value_name = "DURATION")]
    pub host_offline_alert_after: humantime::Duration,
}

// `platter submit`'s arguments; its help is the variant's doc comment above.
#[derive(clap::Args)]
pub struct SubmitArgs {
    pub file: PathBuf,
    #[command(flatten)]
    pub client: ClientArgs,
    /// Follow progress until the campaign ends, then print the report
    #[arg(long)]
    pub watch: bool,
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// The largest campaign file sent, in bytes or with K, M or G (the coordinator's
    /// own limit, `platter serve --max-file-size`, applies too)
    #[arg(long, value_name = "SIZE", default_value = "1M", value_parser = file_size)]
    pub max_file_size: u64,
    #[command(flatten)]
    pub set: SetArgs,
}

// `platter status`'s arguments; its help is the variant's doc comment above.
#[derive(clap::Args)]
pub struct StatusArgs {
    /// A campaign id, or a name for its latest run; without one, every campaign
    pub campaign: Option<String>,
    /// Read this database file instead of asking a coordinator [default:
    /// platter-data/platter.db, what `platter run` writes, unless a coordinator is named]
    #[arg(long)]
    pub db: Option<PathBuf>,
    #[command(flatten)]
    pub client: ClientArgs,
    #[arg(long, default_value = "table", value_parser = offered(&["table", "json"]))]
    pub output: Format,
}

// `platter watch`'s arguments; its help is the variant's doc comment above.
#[derive(clap::Args)]
pub struct WatchArgs {
    pub campaign: String,
    #[command(flatten)]
    pub client: ClientArgs,
}

// `platter agents`'s arguments; its help is the variant's doc comment above.
#[derive(clap::Args)]
pub struct AgentsArgs {
    /// Only agents in this state.
    #[arg(long, value_parser = ["idle", "busy", "lost", "offline", "journal-fault"])]
    pub state: Option<String>,
    /// Only agents whose name contains TEXT, with the label TEXT (`rack=b12`, or a
    /// label's key), or with a drive whose model contains TEXT.
    #[arg(long = "match", value_name = "TEXT")]
    pub matching: Option<String>,
    /// List every matching agent in the table, however many.
    #[arg(long)]
    pub all: bool,
    #[command(flatten)]
    pub client: ClientArgs,
    #[arg(long, default_value = "table", value_parser = offered(&["table", "json"]))]
    pub output: Format,
}

// `platter health`'s arguments; its help is the variant's doc comment above.
#[derive(clap::Args)]
pub struct HealthArgs {
    #[command(flatten)]
    pub client: ClientArgs,
}

// `platter cancel`'s arguments; its help is the variant's doc comment above.
#[derive(clap::Args)]
pub struct CancelArgs {
    pub campaign: String,
    #[command(flatten)]
    pub client: ClientArgs,
}

// `platter report`'s arguments; its help is the variant's doc comment above.
#[derive(clap::Args)]
pub struct ReportArgs {
    /// A campaign id, or a name for its latest run (`platter campaigns` lists them)
    pub campaign: String,
    /// Read this database file instead of asking a coordinator [default:
    /// platter-data/platter.db, what `platter run` writes, unless a coordinator is named]
    #[arg(long)]
    pub db: Option<PathBuf>,
    #[command(flatten)]
    pub client: ClientArgs,
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    /// Also write the qualification verdicts (`report: { qualify }`) as JUnit XML
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Also judge this run against the run before it of the same name (as `platter
    /// history` does; said on stderr) and exit 4 when it regressed (for CI); reads
    /// the store (--db, or platter run's)
    #[arg(long)]
    pub fail_on_regression: bool,
    /// The metric --fail-on-regression follows
    #[arg(long, default_value = "wall", value_name = "METRIC")]
    pub regression_metric: String,
}

// `platter compare`'s arguments; its help is the variant's doc comment above.
#[derive(clap::Args)]
pub struct CompareArgs {
    /// The baseline: a campaign id or name, optionally @HOST
    pub a: String,
    /// What is compared with it: a campaign id or name, optionally @HOST
    pub b: String,
    /// Read both from this database file [default: platter-data/platter.db, what
    /// `platter run` writes, unless a coordinator is named]
    #[arg(long)]
    pub db: Option<PathBuf>,
    /// Ask a coordinator (--coordinator or PLATTER_COORDINATOR) instead
    #[command(flatten)]
    pub client: ClientArgs,
    /// The metric to compare
    #[arg(long, default_value = "wall")]
    pub metric: String,
    /// table for people, json for scripts
    #[arg(long, default_value = "table", value_parser = offered(&["table", "json"]))]
    pub format: Format,
    /// Exit 0 even when some cells could not be compared (they are still listed)
    #[arg(long)]
    pub allow_unmatched: bool,
}

// `platter history`'s arguments; its help is the variant's doc comment above.
#[derive(clap::Args)]
pub struct HistoryArgs {
    /// The series: the campaigns' `series:`, else their name (a schedule's runs too)
    pub series: String,
    /// Read from this database file or PostgreSQL URL [default: the coordinator when
    /// one is named, else platter-data/platter.db, what `platter run` writes]
    #[arg(long)]
    pub db: Option<PathBuf>,
    #[command(flatten)]
    pub client: ClientArgs,
    /// The metric followed
    #[arg(long, default_value = "wall")]
    pub metric: String,
    /// Only this host's cells
    #[arg(long)]
    pub host: Option<String>,
    /// Only the cells with this parameter value, KEY=VALUE (repeatable: all of them)
    #[arg(long = "cell", value_name = "KEY=VALUE")]
    pub cells: Vec<String>,
    /// Only the last N runs that ended [default: all]
    #[arg(long, value_name = "N")]
    pub last: Option<usize>,
    /// Smallest shift flagged, in percent of the earlier run's value: a shift's whole
    /// interval must lie beyond it [default: the latest run's `track: { threshold }`,
    /// else 3]
    #[arg(long, value_name = "PERCENT")]
    pub threshold: Option<f64>,
    /// table for people, json or csv for scripts and spreadsheets
    #[arg(long, default_value = "table", value_parser = offered(&["table", "json", "csv"]))]
    pub format: Format,
    /// Exit 4 when the latest run has a regression, or brought a step or ramp that is one
    /// (for CI)
    #[arg(long)]
    pub fail_on_regression: bool,
}

// `platter inventory`'s arguments; its help is the variant's doc comment above.
#[derive(clap::Args)]
pub struct InventoryArgs {
    /// Ask the coordinator (--coordinator or PLATTER_COORDINATOR) for its agents'
    /// inventories instead of scanning here
    #[command(flatten)]
    pub client: ClientArgs,
    /// table for people, json for scripts
    #[arg(long, alias = "output", default_value = "table", value_parser = offered(&["table", "json"]))]
    pub format: Format,
    /// Read each drive's health now (smartctl --json, as a plan does before and after
    /// it runs) instead of listing the drives; on this machine only
    #[arg(long, conflicts_with = "coordinator")]
    pub health: bool,
}

// `platter trigger`'s arguments; its help is the variant's doc comment above.
#[derive(clap::Args)]
pub struct TriggerArgs {
    /// The trigger (or schedule) name
    pub name: String,
    /// A label kept with the run, KEY=VALUE (repeatable)
    #[arg(long = "label", value_name = "KEY=VALUE", value_parser = label)]
    pub labels: Vec<(String, String)>,
    #[command(flatten)]
    pub client: ClientArgs,
    /// table for people, json for scripts
    #[arg(long, default_value = "table", value_parser = offered(&["table", "json"]))]
    pub format: Format,
}

// `platter drives`'s arguments; its help is the variant's doc comment above.
#[derive(clap::Args)]
pub struct DrivesArgs {
    /// Only drives whose model contains this (case-insensitive)
    #[arg(long)]
    pub model: Option<String>,
    /// Only drives seen with this firmware
    #[arg(long)]
    pub firmware: Option<String>,
    /// Only drives seen on this host
    #[arg(long)]
    pub host: Option<String>,
    /// Only drives a verdict (performance or health) failed
    #[arg(long)]
    pub failed: bool,
    #[command(flatten)]
    pub ledger: LedgerArgs,
}

// `platter drive`'s arguments; its help is the variant's doc comment above.
#[derive(clap::Args)]
pub struct DriveArgs {
    /// The drive's id as `platter drives` lists it, its serial or its WWN
    pub id: String,
    #[command(flatten)]
    pub ledger: LedgerArgs,
}

// `platter peers`'s arguments; its help is the variant's doc comment above.
#[derive(clap::Args)]
pub struct PeersArgs {
    /// The model as the drives report it (`platter drives` lists them)
    pub model: String,
    /// Only runs of the drives with this firmware (else each firmware is a group of its own)
    #[arg(long)]
    pub firmware: Option<String>,
    /// One metric (`wall`, `write.iops`, `lat.p99`); else each campaign's key metric (its
    /// `report: { metric }`, else wall)
    #[arg(long)]
    pub metric: Option<String>,
    /// Only runs of this series (`platter history` lists them)
    #[arg(long)]
    pub series: Option<String>,
    /// How much slower than its peers a significant drive must be to be flagged, in percent
    /// (`10`, `10%`) [default: with --series, the series' `qualify: { peers: { max_slower }
    /// }`; else 10%]
    #[arg(long, value_name = "PCT", value_parser = parse_pct)]
    pub max_slower: Option<f64>,
    #[command(flatten)]
    pub ledger: LedgerArgs,
}

/// A percentage, with or without its sign: "10%", "7.5".
fn parse_pct(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .trim_end_matches('%')
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a percentage like 10% or 7.5"))?;
    if !(0.0..1000.0).contains(&v) {
        return Err(format!("{s:?}: give a percentage from 0% to 1000%"));
    }
    Ok(v)
}

// `platter qualification`'s arguments; its help is the variant's doc comment above.
#[derive(clap::Args)]
pub struct QualificationArgs {
    /// The model as the drives report it (`platter drives` lists them)
    pub model: String,
    /// Only runs of the drives with this firmware
    #[arg(long)]
    pub firmware: Option<String>,
    #[command(flatten)]
    pub ledger: LedgerArgs,
}

/// Where `drives`, `drive` and `qualification` read the ledger, and how they print it.
#[derive(Debug, clap::Args)]
pub struct LedgerArgs {
    /// Read from this database file or PostgreSQL URL [default: the coordinator when one is
    /// named, else platter-data/platter.db, what `platter run` writes]
    #[arg(long)]
    pub db: Option<PathBuf>,
    #[command(flatten)]
    pub client: ClientArgs,
    /// table for people, json or csv for scripts and spreadsheets
    #[arg(long, default_value = "table", value_parser = offered(&["table", "json", "csv"]))]
    pub format: Format,
}

fn label(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
        _ => Err(format!("`{s}` is not KEY=VALUE (e.g. kernel=6.12.1)")),
    }
}

#[derive(Subcommand, Debug)]
pub enum Schedule {
    /// Add a schedule: FILE's campaign fired as a new run of its series (its `series:`,
    /// else its name) with --every, --cron or --on-trigger. The campaign is checked now,
    /// and planned against the fleet at each firing.
    Add {
        /// The campaign file (checked now; stored with the schedule, with --set applied)
        file: PathBuf,
        /// The schedule's name [default: the campaign's series]
        #[arg(long)]
        name: Option<String>,
        /// Fire every DURATION (24h, 90m, 2s), the first one DURATION from now
        #[arg(long, value_name = "DURATION", group = "when")]
        every: Option<String>,
        /// Fire on a five-field cron line, read in UTC ("0 2 * * *": 02:00 every night)
        #[arg(long, value_name = "LINE", group = "when")]
        cron: Option<String>,
        /// Fire when `platter trigger NAME` (or POST /api/v1/triggers/NAME) is called
        #[arg(long, value_name = "NAME", group = "when")]
        on_trigger: Option<String>,
        /// A firing while the series' previous run still runs: skip it (noted in `schedule
        /// show`), or queue the new run behind it
        #[arg(long, default_value = "skip", value_parser = ["skip", "queue"])]
        policy: String,
        /// The largest campaign file sent, in bytes or with K, M or G
        #[arg(long, value_name = "SIZE", default_value = "1M", value_parser = file_size)]
        max_file_size: u64,
        #[command(flatten)]
        set: SetArgs,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Every schedule: when it fires next, its series, what its firings did.
    List {
        #[command(flatten)]
        client: ClientArgs,
        /// table for people, json for scripts
        #[arg(long, default_value = "table", value_parser = offered(&["table", "json"]))]
        format: Format,
    },
    /// One schedule with its latest firings (labels, run, notes: skipped, caught up).
    Show {
        name: String,
        #[command(flatten)]
        client: ClientArgs,
        /// table for people, json for scripts
        #[arg(long, default_value = "table", value_parser = offered(&["table", "json"]))]
        format: Format,
    },
    /// Stop firing it until resumed.
    Pause {
        name: String,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Fire it again from its next slot on (the slots it was paused over are not fired).
    Resume {
        name: String,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Remove it; its runs and firings stay, the series' history.
    Remove {
        name: String,
        #[command(flatten)]
        client: ClientArgs,
    },
}

/// Where a coordinator installed from the Debian package keeps its store.
pub const DEFAULT_STORE: &str = "/var/lib/platter/platter.db";

/// Where `platter users` and `platter tokens` find the store.
#[derive(Debug, Clone, clap::Args)]
pub struct StoreArg {
    /// The coordinator's store: an SQLite file, or `postgres://USER:PASSWORD@HOST:PORT/DBNAME`
    // The environment's value is not shown in `--help`: a PostgreSQL URL holds a password.
    #[arg(
        long,
        env = "PLATTER_DB",
        hide_env_values = true,
        default_value = DEFAULT_STORE
    )]
    pub db: crate::store::db::Location,
}

/// Where a new password comes from.
#[derive(Debug, Clone, clap::Args)]
pub struct PasswordArg {
    /// Read the password from this file (its one line; a final line break is not part of
    /// it). Without it, the password is asked for twice with no echo on a terminal, or
    /// read as one line from stdin when stdin is not a terminal. At least 12 characters
    #[arg(long, value_name = "FILE")]
    pub password_file: Option<PathBuf>,
}

#[derive(Subcommand)]
pub enum Users {
    /// Make an account with a role and a password.
    Add {
        /// The account's name: 1 to 64 letters, digits and . _ @ -
        name: String,
        /// What it may do: viewer, operator or admin
        #[arg(long, value_name = "ROLE", value_parser = account_role)]
        role: AccountRole,
        #[command(flatten)]
        password: PasswordArg,
        #[command(flatten)]
        store: StoreArg,
    },
    /// Every account with its role and when it was made.
    List {
        #[arg(long, default_value = "table", value_parser = offered(&["table", "json"]))]
        output: Format,
        #[command(flatten)]
        store: StoreArg,
    },
    /// Remove an account, with its sessions (signed out at once) and API tokens.
    Remove {
        name: String,
        #[command(flatten)]
        store: StoreArg,
    },
    /// Give an account a new password; its browsers are signed out, its API tokens stay.
    Password {
        name: String,
        #[command(flatten)]
        password: PasswordArg,
        #[command(flatten)]
        store: StoreArg,
    },
    /// Change an account's role; its sessions and API tokens follow at once.
    Role {
        name: String,
        /// viewer, operator or admin
        #[arg(value_name = "ROLE", value_parser = account_role)]
        role: AccountRole,
        #[command(flatten)]
        store: StoreArg,
    },
}

#[derive(Subcommand)]
pub enum Tokens {
    /// Make an API token and print its secret on stdout, the only time it is shown: the
    /// store keeps only its hash.
    Add {
        /// The account the token acts for
        #[arg(long, value_name = "NAME")]
        user: String,
        /// What the token may do, at most the account's role [default: the account's role]
        #[arg(long, value_name = "ROLE", value_parser = account_role)]
        role: Option<AccountRole>,
        /// What uses the token ("nightly CI"), for the listing
        #[arg(long, value_name = "TEXT")]
        label: String,
        #[command(flatten)]
        store: StoreArg,
    },
    /// Every API token: id, account, role, label, when made and last used (never secrets).
    List {
        #[arg(long, default_value = "table", value_parser = offered(&["table", "json"]))]
        output: Format,
        #[command(flatten)]
        store: StoreArg,
    },
    /// Revoke a token by its id (`platter tokens list`): its secret opens nothing from now on.
    Revoke {
        id: String,
        #[command(flatten)]
        store: StoreArg,
    },
}

/// `--role` of `platter users` and `platter tokens`.
fn account_role(s: &str) -> Result<AccountRole, String> {
    AccountRole::parse(s).ok_or_else(|| "a role is viewer, operator or admin".to_string())
}

#[derive(Subcommand)]
pub enum DbCommand {
    /// Bring the store's schema to this platter's version and say where it stands: run
    /// it before starting upgraded coordinators on a shared PostgreSQL store.
    Migrate {
        /// An SQLite file, or `postgres://USER:PASSWORD@HOST:PORT/DBNAME`
        #[arg(long, env = "PLATTER_DB")]
        db: crate::store::db::Location,
    },
    /// Copy an SQLite store to FILE while it is served, and say what was copied.
    ///
    /// The copy is consistent whatever a coordinator or `platter run` writes meanwhile
    /// (SQLite's VACUUM INTO: one snapshot); no lock is taken and nothing of the store
    /// changes. It is written beside FILE under a temporary name, fsync'd and renamed:
    /// FILE is whole or absent. A PostgreSQL store is backed up with pg_dump: asked for
    /// one, this says how.
    Backup {
        /// Where the copy goes; refused if it exists, unless --force
        file: std::path::PathBuf,
        /// The store: an SQLite file (`platter run` writes platter-data/platter.db)
        #[arg(long, env = "PLATTER_DB", default_value = "platter-data/platter.db")]
        db: crate::store::db::Location,
        /// Replace FILE if it exists
        #[arg(long)]
        force: bool,
    },
    /// Put a backup (from `platter db backup`) in the place of the SQLite store --db.
    ///
    /// The backup is checked first (SQLite's integrity check, a platter store, a schema
    /// no newer than this platter's); a store in use by a coordinator or `platter run` is
    /// refused, naming who has it; a store already there is replaced only with --force,
    /// and then kept beside as PATH.replaced-TIME (with its -wal). The copy is written
    /// under a temporary name, migrated to this platter's schema, given a new identity,
    /// fsync'd and renamed.
    #[command(after_long_help = super::db::AFTER_RESTORE)]
    Restore {
        /// The backup file
        backup: std::path::PathBuf,
        /// The store to restore: an SQLite file
        #[arg(long)]
        db: crate::store::db::Location,
        /// Replace the store at --db (kept as PATH.replaced-TIME)
        #[arg(long)]
        force: bool,
    },
}

#[derive(Subcommand)]
pub enum Certs {
    /// Create the fleet CA in DIR/ca (ca.pem, and ca-key.pem readable only by you). Keep
    /// ca-key.pem offline; it signs every identity in the fleet. An existing CA is never
    /// replaced: remove DIR/ca first if you really want a new one.
    Init {
        /// The PKI directory; the CA goes to DIR/ca
        #[arg(long, default_value = "platter-pki")]
        dir: PathBuf,
        /// How long the CA is valid, in days (at least 1)
        #[arg(long, default_value_t = 3650, value_parser = lifetime_days)]
        days: u32,
    },
    /// Issue a certificate: `coordinator NAME [MORE-NAMES…]` (DNS names or IP addresses
    /// agents and operators dial), `agent HOST` (the host it may act as), `operator NAME`.
    /// Writes DIR/coordinator-NAME, DIR/agent-HOST or DIR/operator-NAME (NAME the first
    /// name) with ca.pem, cert.pem and key.pem: the directory to give as --tls-dir. An
    /// identity that exists there is refused unless --force is given.
    Issue {
        #[arg(value_enum)]
        role: crate::pki::Role,
        /// The host or operator name; for a coordinator its name, then every other DNS
        /// name and IP address agents and operators dial
        #[arg(required = true)]
        names: Vec<String>,
        /// The PKI directory made by `platter certs init`
        #[arg(long, default_value = "platter-pki")]
        dir: PathBuf,
        /// How long the certificate is valid, in days (at least 1)
        #[arg(long, default_value_t = 825, value_parser = lifetime_days)]
        days: u32,
        /// A short-lived certificate instead, valid this many hours (tests, demonstrations)
        #[arg(long, value_name = "N", conflicts_with = "days", value_parser = clap::value_parser!(u32).range(1..))]
        hours: Option<u32>,
        /// Replace the identity if the directory already holds one (whoever uses the old
        /// certificate needs the new files)
        #[arg(long)]
        force: bool,
    },
    /// The CA and every identity in DIR: role, names, expiry and days left; warns (on
    /// stderr) for certificates expiring within 30 days and for expired ones.
    List {
        /// The PKI directory made by `platter certs init`
        #[arg(long, default_value = "platter-pki")]
        dir: PathBuf,
        /// table for people, json for scripts
        #[arg(long, alias = "output", default_value = "table", value_parser = offered(&["table", "json"]))]
        format: Format,
    },
}

/// `--days` of `platter certs`: a certificate valid for 0 days expires at once, which is
/// never what a fleet wants; a short-lived one is asked for with `--hours`.
fn lifetime_days(s: &str) -> Result<u32, String> {
    let days: u32 = s.parse().map_err(|e| format!("{e}"))?;
    if days == 0 {
        return Err("a certificate valid for 0 days expires at once; \
                    `platter certs issue --hours N` issues a short-lived one on purpose"
            .into());
    }
    Ok(days)
}

/// Limits on a campaign, for the rare campaign that legitimately needs more.
/// `platter run`'s arguments.
#[derive(clap::Args)]
pub struct RunArgs {
    /// The campaign YAML file
    pub file: PathBuf,
    /// SQLite database for campaigns and samples
    #[arg(long, default_value = "platter-data/platter.db")]
    pub db: PathBuf,
    /// The local agent's journal directory
    #[arg(long, default_value = "platter-data/agent")]
    pub state_dir: PathBuf,
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Write the report to this file instead of stdout
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    /// Also write the qualification verdicts (`report: { qualify }`) as JUnit XML
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Start a new campaign even if an unfinished one with the same content exists
    #[arg(long)]
    pub fresh: bool,
    /// Command a `reboot` phase runs
    #[arg(long, default_value = "systemctl reboot")]
    pub reboot_command: String,
    /// A device `storage:` may format (mkfs, write cache), as a path or glob; repeat
    /// for more. Devices not named here are refused before anything runs.
    #[arg(long = "allow-device", value_name = "PATH|GLOB")]
    pub allow_devices: Vec<String>,
    /// Let `prepare: { purge }` erase the allowed devices (discard, ATA secure erase, NVMe
    /// format or sanitize, SCSI sanitize): a campaign file alone never can
    #[arg(long)]
    pub allow_purge: bool,
    #[command(flatten)]
    pub limits: LimitArgs,
    #[command(flatten)]
    pub set: SetArgs,
    #[command(flatten)]
    pub cpu: platter_agent::cli::CpuArgs,
}

/// `--set KEY=VALUE` of `validate`, `run` and `submit`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SetArgs {
    /// Set a matrix parameter's values, or a field of `devices:`, instead of editing the
    /// file: `--set devices.path=/dev/loop0`, `--set bs=4k --set bs=1M`. A parameter
    /// given several times takes every value given, in order (a value is taken whole,
    /// commas included); include and exclude entries about values no longer there are
    /// dropped. What is stored (and what reports and later rounds read) is the campaign
    /// with the values set. A key that cannot be set is an error naming those that can
    #[arg(long = "set", value_name = "KEY=VALUE", value_parser = spec::set::parse_arg)]
    pub sets: Vec<(String, String)>,
}

#[derive(Debug, Clone, Copy, clap::Args)]
pub struct LimitArgs {
    /// The largest campaign file accepted, in bytes or with K, M or G (powers of 1024);
    /// the size is checked before the file is read
    #[arg(long, value_name = "SIZE", default_value = "1M", value_parser = file_size)]
    pub max_file_size: u64,
    /// The most steps (measurements and their preparation) one host's plan may hold
    #[arg(long, value_name = "N", default_value_t = spec::MAX_STEPS_PER_PLAN)]
    pub max_steps_per_plan: u64,
    /// The most steps all hosts' plans of one campaign may hold together
    #[arg(long, value_name = "N", default_value_t = spec::MAX_TOTAL_STEPS)]
    pub max_total_steps: u64,
}

impl From<LimitArgs> for spec::Limits {
    fn from(a: LimitArgs) -> spec::Limits {
        spec::Limits {
            max_file_bytes: a.max_file_size,
            max_steps_per_plan: a.max_steps_per_plan,
            max_total_steps: a.max_total_steps,
            stored: false,
        }
    }
}

/// `--max-file-size`: `1M`, `20MiB`, `65536`.
fn file_size(s: &str) -> Result<u64, String> {
    spec::parse_bytes(s).filter(|n| *n > 0).ok_or_else(|| {
        format!("`{s}` is not a size: write bytes, or a number with K, M or G (e.g. 20M)")
    })
}

/// `--heartbeat-timeout` in seconds, at least two heartbeat intervals.
fn heartbeat_timeout(s: &str) -> Result<u64, String> {
    let secs: u64 = s.parse().map_err(|e| format!("{e}"))?;
    let min = crate::service::server::MIN_HEARTBEAT_TIMEOUT.as_secs();
    if secs < min {
        return Err(format!(
            "the minimum is {min} s (two of the agents' {} s heartbeat intervals); \
             a shorter timeout declares idle agents lost between heartbeats",
            platter_proto::protocol::HEARTBEAT_INTERVAL.as_secs()
        ));
    }
    Ok(secs)
}

/// A `--format` (or `--output`) that offers only `names` of [`Format`]'s: every command
/// takes the one format type, and its help lists only what it can write.
fn offered(names: &'static [&'static str]) -> impl clap::builder::TypedValueParser<Value = Format> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(names)
        .map(|name| Format::parse(&name).expect("an offered name is a format's"))
}

// `platter flags`' arguments; its help is the variant's doc comment above.
#[derive(clap::Args)]
pub struct FlagsArgs {
    /// open, acknowledged, false-positive, fixed, or all [default: open and acknowledged]
    #[arg(long, value_name = "STATE")]
    pub state: Option<String>,
    /// regression, drift, qualification, health, peer, host, firing or store
    #[arg(long, value_name = "KIND")]
    pub kind: Option<String>,
    #[arg(long, value_name = "SERIES")]
    pub series: Option<String>,
    #[arg(long, value_name = "HOST")]
    pub host: Option<String>,
    /// At most this many, most urgent first
    #[arg(long, default_value_t = 200)]
    pub limit: usize,
    #[arg(long, default_value = "table", value_parser = offered(&["table", "json", "csv"]))]
    pub format: Format,
    #[command(flatten)]
    pub source: FlagSource,
}

/// Where `platter flags` and `platter flag` read and change flags: the store itself, or a
/// coordinator (an operator certificate) — the same flags either way.
#[derive(Debug, Clone, clap::Args)]
pub struct FlagSource {
    /// The coordinator's store, read and changed directly: an SQLite file, or
    /// `postgres://USER:PASSWORD@HOST:PORT/DBNAME` [default, unless a coordinator is named:
    /// /var/lib/platter/platter.db]
    // The environment's value is not shown in `--help`: a PostgreSQL URL holds a password.
    #[arg(long, env = "PLATTER_DB", hide_env_values = true)]
    pub db: Option<crate::store::db::Location>,
    /// Ask a coordinator (--coordinator or PLATTER_COORDINATOR) instead
    #[command(flatten)]
    pub client: ClientArgs,
}

// `platter flag`'s arguments; its help is the variant's doc comment above.
#[derive(clap::Args)]
pub struct FlagArgs {
    /// The flag's id (`platter flags`), or a unique prefix of at least 4 digits
    pub id: String,
    /// ack, false-positive, fixed or reopen
    #[arg(value_name = "ACTION", value_parser = ["ack", "false-positive", "fixed", "reopen"])]
    pub action: String,
    /// Why: shown with the flag (required for false-positive)
    #[arg(long, default_value = "")]
    pub note: String,
    /// Who [default: $USER; through a coordinator, its certificate's name, with NAME
    /// beside it when given]
    #[arg(long, value_name = "NAME")]
    pub by: Option<String>,
    #[command(flatten)]
    pub source: FlagSource,
}

#[derive(Subcommand)]
pub enum AlertsCommand {
    /// Add a rule: NAME routes the events it selects to its channel.
    ///
    /// A webhook gets JSON ({"idempotency_key", "digest", "events": [...]}) with the
    /// headers Idempotency-Key, X-Platter-Timestamp and, with --secret,
    /// X-Platter-Signature: v1=HEX(HMAC-SHA256(key, TIMESTAMP + "." + BODY)). Secrets are
    /// never kept in the store: --secret names where each send reads one (env:NAME or
    /// file:PATH), so a backup does not hand it out and rotating it is changing the file.
    Add {
        name: String,
        /// webhook, slack or email
        #[arg(long, value_parser = ["webhook", "slack", "email"])]
        channel: String,
        /// The webhook's URL (env:NAME or file:PATH for one that is itself a secret, as
        /// Slack's are), or smtp://[USER@]HOST[:PORT][?ca=PATH] for e-mail (STARTTLS
        /// required; ca: a CA file for a server the system does not trust)
        #[arg(long, value_name = "URL")]
        target: String,
        /// Where the signing key (webhook) or SMTP password is read: env:NAME or file:PATH
        #[arg(long, value_name = "REF", default_value = "")]
        secret: String,
        /// E-mail recipients
        #[arg(long, value_name = "ADDRESS")]
        to: Vec<String>,
        /// E-mail sender
        #[arg(long, value_name = "ADDRESS", default_value = "platter@localhost")]
        from: String,
        /// Only these kinds (repeatable): regression, drift, qualification, health, peer,
        /// host, firing, store [default: every kind]
        #[arg(long, value_name = "KIND")]
        kind: Vec<String>,
        /// info, warning or critical
        #[arg(long, default_value = "warning", value_name = "SEVERITY")]
        min_severity: String,
        /// Only events of a series, host or model matching this glob
        #[arg(long, value_name = "GLOB", default_value = "")]
        series: String,
        #[arg(long, value_name = "GLOB", default_value = "")]
        host: String,
        #[arg(long, value_name = "GLOB", default_value = "")]
        model: String,
        /// More events than this waiting (a channel that was down) go as one digest
        #[arg(long, default_value_t = 5)]
        digest_after: u32,
        #[command(flatten)]
        store: StoreArg,
    },
    /// Every rule with what it selects (secrets never shown, only where they are read).
    List {
        #[arg(long, default_value = "table", value_parser = offered(&["table", "json"]))]
        output: Format,
        #[command(flatten)]
        store: StoreArg,
    },
    /// Send a test message through a rule now, from here, and say how it went (logged).
    Test {
        name: String,
        /// The console's address, for the message's link
        #[arg(long, env = "PLATTER_PUBLIC_URL", default_value = "")]
        public_url: String,
        #[command(flatten)]
        store: StoreArg,
    },
    /// Remove a rule and what it still owes (its log stays).
    Remove {
        name: String,
        #[command(flatten)]
        store: StoreArg,
    },
    /// The delivery log, newest first: each event and rule, its key, state and tries.
    Log {
        #[arg(long, value_name = "RULE")]
        rule: Option<String>,
        #[arg(long, default_value_t = 50)]
        limit: usize,
        #[arg(long, default_value = "table", value_parser = offered(&["table", "json"]))]
        output: Format,
        #[command(flatten)]
        store: StoreArg,
    },
    /// Silence events (a maintenance window) by host, series, model or kind until an end:
    /// they are logged as silenced, never sent.
    Silence {
        /// The silence's name
        name: String,
        #[arg(long, value_name = "GLOB", default_value = "")]
        host: String,
        #[arg(long, value_name = "GLOB", default_value = "")]
        series: String,
        #[arg(long, value_name = "GLOB", default_value = "")]
        model: String,
        #[arg(long, value_name = "KIND", default_value = "")]
        kind: String,
        /// How long from now: 2h, 30m, 1d
        #[arg(long = "for", value_name = "DURATION")]
        duration: humantime::Duration,
        #[arg(long, default_value = "")]
        note: String,
        #[command(flatten)]
        store: StoreArg,
    },
    /// Silences, with when each ends.
    Silences {
        #[arg(long, default_value = "table", value_parser = offered(&["table", "json"]))]
        output: Format,
        #[command(flatten)]
        store: StoreArg,
    },
    /// End a silence now.
    Unsilence {
        name: String,
        #[command(flatten)]
        store: StoreArg,
    },
}
