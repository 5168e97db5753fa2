//! Flags put into a store as the coordinators raise them (`Store::raise_flags`), for the
//! console's tests, and a webhook receiver the test starts: a plain HTTP/1.1 server on
//! loopback that keeps every request and answers 200.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use platter::store::flags::{flag_id, Fixed, FlagKind, FlagState, NewFlag, Severity};
use platter::store::Store;
use serde_json::json;

/// The ids of the flags `raise` stored.
pub struct Raised {
    /// Critical, open: a qualification FAIL on h1.
    pub fail: String,
    /// Warning, open: a regression of series nightly on h2, with a run-to-run evidence.
    pub regression: String,
    /// Warning, acknowledged by ana: a drive's health.
    pub health: String,
    /// Info, fixed by platter: a drift.
    pub drift: String,
}

fn flag(kind: FlagKind, severity: Severity, key: &str, host: &str, summary: &str) -> NewFlag {
    NewFlag {
        kind,
        severity,
        evidence_key: key.into(),
        series: "nightly".into(),
        host: host.into(),
        model: String::new(),
        drive: String::new(),
        metric: "wall".into(),
        cell: "bs=4k".into(),
        campaign_id: "c-2".into(),
        summary: summary.into(),
        evidence: json!({ "campaign": "c-2" }),
        link: "/campaigns/c-2".into(),
    }
}

/// `raise_in` the SQLite store at `db`.
pub fn raise(db: &Path) -> Raised {
    raise_in(&Store::open(db).unwrap())
}

/// Raises four flags in `store` — two open (one critical, one warning), one acknowledged,
/// one fixed — as a coordinator would, and returns their ids.
pub fn raise_in(store: &Store) -> Raised {
    let fail = flag(
        FlagKind::Qualification,
        Severity::Critical,
        "qualification|nightly|h1|sda|bs=4k|wall.median < 1ms",
        "h1",
        "FAIL nightly: wall.median < 1ms 20.00 ms on h1 (bs=4k)",
    );
    let regression = NewFlag {
        evidence: json!({
            "runs": ["c-1", "c-2"],
            "before": 0.020,
            "after": 0.0231,
            "unit": "s",
            "threshold_pct": 3.0,
            "since": {
                "baseline": "c-1",
                "change_pct": 15.5,
                "ci_pct": [12.0, 19.25],
                "significant": true,
                "changed": ["kernel: 6.1.0 → 6.12.1"],
            },
        }),
        ..flag(
            FlagKind::Regression,
            Severity::Warning,
            "regression|nightly|h2|bs=4k|wall|c-2",
            "h2",
            "REGRESSION nightly on h2 (bs=4k): wall 20.00 ms → 23.10 ms, +15.5%; changed: kernel: 6.1.0 → 6.12.1",
        )
    };
    let health = NewFlag {
        model: "SAMSUNG MZ7LH960HAJR".into(),
        drive: "SAMSUNG MZ7LH960HAJR S4XYZ".into(),
        metric: "media_errors".into(),
        cell: String::new(),
        ..flag(
            FlagKind::Health,
            Severity::Warning,
            "health|SAMSUNG MZ7LH960HAJR S4XYZ|media_errors",
            "h1",
            "health of SAMSUNG MZ7LH960HAJR S4XYZ on h1: media errors 0 → 2",
        )
    };
    let drift = flag(
        FlagKind::Drift,
        Severity::Info,
        "drift|nightly|h3|bs=4k|wall|c-0",
        "h3",
        "DRIFT nightly on h3 (bs=4k): +4% over runs 1–6",
    );
    let all = [fail, regression, health, drift];
    let ids: Vec<String> = all.iter().map(|f| flag_id(&f.evidence_key)).collect();
    store.raise_flags(None, &all, &[]).unwrap();
    store
        .set_flag_state(&ids[2], FlagState::Acknowledged, "replacing it", "ana")
        .unwrap();
    store
        .raise_flags(
            None,
            &[],
            &[Fixed {
                flag_id: ids[3].clone(),
                note: "run c-3 is back within 3%".into(),
            }],
        )
        .unwrap();
    Raised {
        fail: ids[0].clone(),
        regression: ids[1].clone(),
        health: ids[2].clone(),
        drift: ids[3].clone(),
    }
}

/// A request the receiver got.
#[derive(Debug, Clone)]
pub struct Received {
    pub path: String,
    /// Header names in lower case.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A webhook receiver on 127.0.0.1 (a port of the kernel's choosing), answering every
/// request 200 and keeping it; it runs as long as the test's process.
pub struct Receiver {
    pub url: String,
    got: Arc<Mutex<Vec<Received>>>,
}

impl Receiver {
    pub fn start() -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let got = Arc::new(Mutex::new(Vec::new()));
        let kept = got.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                if reader.read_line(&mut line).is_err() {
                    continue;
                }
                let path = line.split(' ').nth(1).unwrap_or("").to_string();
                let mut headers = Vec::new();
                loop {
                    let mut h = String::new();
                    if reader.read_line(&mut h).unwrap_or(0) == 0 || h.trim().is_empty() {
                        break;
                    }
                    if let Some((k, v)) = h.split_once(':') {
                        headers.push((k.trim().to_lowercase(), v.trim().to_string()));
                    }
                }
                let length = headers
                    .iter()
                    .find(|(k, _)| k == "content-length")
                    .and_then(|(_, v)| v.parse().ok())
                    .unwrap_or(0);
                let mut body = vec![0; length];
                let _ = reader.read_exact(&mut body);
                kept.lock().unwrap().push(Received {
                    path,
                    headers,
                    body: String::from_utf8_lossy(&body).into_owned(),
                });
                let _ = stream.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                );
            }
        });
        Receiver { url, got }
    }

    /// Everything received so far.
    pub fn received(&self) -> Vec<Received> {
        self.got.lock().unwrap().clone()
    }

    /// The first request whose body holds `text`, waiting up to `within` for it.
    pub fn wait_for(&self, text: &str, within: Duration) -> Received {
        let start = Instant::now();
        loop {
            if let Some(r) = self.received().into_iter().find(|r| r.body.contains(text)) {
                return r;
            }
            assert!(
                start.elapsed() < within,
                "no request with {text:?} within {within:?}; got {:#?}",
                self.received()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}
