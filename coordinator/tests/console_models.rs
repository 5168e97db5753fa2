//! The console's model page (`/models/MODEL`) and its JSON twin over HTTP, with a fleet of
//! 40 drives simulated through the store's write path (`common::fleet`), 2 of them 15%
//! slower: a viewer reads the page (a strip plot with a linked dot per drive, the slow two
//! marked), the JSON (`platter peers --format json`'s document), the filters, a model
//! nobody has (404) and one never measured, and where a drive stands on its own page.
//! The same page in a real browser: `tests/console_browser.rs`.

mod common;

use common::fleet::{drive, forty, seen, MODEL};
use common::web::{add_user, call, http_addr, sign_in, urlencode};
use platter::store::Store;

/// A model the ledger knows (one drive seen) that no run measured.
const UNMEASURED: &str = "INTEL SSDSC2KB960G8";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_viewer_reads_a_models_drives_against_their_peers() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let slow = [5, 29];
    let (fleet, idle) = {
        let store = Store::open(&dir.join("coordinator.db")).unwrap();
        let mut fleet = forty(&store, &slow).await;
        let idle = drive(40, UNMEASURED, "ahci");
        fleet.push(idle.clone());
        seen(&store, &fleet).await;
        (fleet, idle)
    };
    let id = |d: &platter_proto::inventory::Device| format!("{}/{}", d.model, d.serial);
    let (mut coordinator, _port) = common::serve_with(dir, &["--http", "127.0.0.1:0"]);
    let http = http_addr(dir);
    add_user(dir, "vera", "viewer", "vera's long password");
    let vera = sign_in(&http, "vera", "vera's long password");
    let cookie = [("Cookie", vera.cookie.as_str())];
    let model_path = format!("/models/{}", urlencode(MODEL));

    // The page: one group, a dot per drive linking to it, the slow two marked and named.
    let page = call(&http, "GET", &model_path, &cookie, "");
    assert_eq!(page.status, 200, "{page:?}");
    let body = &page.body;
    assert!(
        body.contains(&format!(
            "<p id=\"headline\">40 drive(s) of {MODEL} in 1 peer group(s); 2 outliers: "
        )),
        "{body}"
    );
    assert_eq!(body.matches("<figure class=\"strip\"").count(), 1, "{body}");
    assert_eq!(body.matches("<a class=\"dot").count(), 40, "{body}");
    assert_eq!(
        body.matches("<a class=\"dot outlier\"").count(),
        2,
        "{body}"
    );
    for &d in &slow {
        let href = format!("/drives/{}", urlencode(&id(&fleet[d].1)));
        assert!(
            body.contains(&format!("<a class=\"dot outlier\" href=\"{href}\">")),
            "{href}\n{body}"
        );
        assert!(
            body.contains(&format!(
                "<tr class=\"outlier\"><td><a href=\"{href}\">{}</a></td>",
                id(&fleet[d].1)
            )),
            "{body}"
        );
        // Named beside its dot by its serial.
        assert!(
            body.contains(&format!(">{}</text>", fleet[d].1.serial)),
            "{body}"
        );
    }
    assert!(body.contains("class=\"band\""), "{body}");
    assert!(body.contains("sd&#62;ahci (40)</text>"), "{body}");
    assert_eq!(body.matches("slower OUTLIER</td>").count(), 2, "{body}");

    // Its JSON twin: `platter peers --format json`'s document.
    let json = call(&http, "GET", &format!("/api/v1{model_path}"), &cookie, "");
    assert_eq!(json.status, 200, "{json:?}");
    assert_eq!(json.header("content-type"), Some("application/json"));
    let v: serde_json::Value = serde_json::from_str(&json.body).unwrap();
    assert_eq!(v["model"], MODEL);
    let drives = v["groups"][0]["drives"].as_array().unwrap();
    assert_eq!(drives.len(), 40);
    let mut flagged: Vec<&str> = drives
        .iter()
        .filter(|d| d["outlier"] == true)
        .map(|d| d["drive"].as_str().unwrap())
        .collect();
    flagged.sort();
    let mut want: Vec<String> = slow.iter().map(|&d| id(&fleet[d].1)).collect();
    want.sort();
    assert_eq!(flagged, want);

    // Filters: a firmware none has, a metric none measured: said, not a failure.
    let none = call(
        &http,
        "GET",
        &format!("{model_path}?firmware=NOPE&metric=&series="),
        &cookie,
        "",
    );
    assert_eq!(none.status, 200, "{none:?}");
    assert!(
        none.body.contains(&format!(
            "id=\"no-groups\">No run of a {MODEL} drive with firmware NOPE has ended yet"
        )),
        "{}",
        none.body
    );
    assert!(none.body.contains("value=\"NOPE\""), "{}", none.body);
    let none = call(
        &http,
        "GET",
        &format!("/api/v1{model_path}?metric=latency.p99"),
        &cookie,
        "",
    );
    assert_eq!(none.status, 200, "{none:?}");
    let v: serde_json::Value = serde_json::from_str(&none.body).unwrap();
    assert_eq!(v["groups"], serde_json::json!([]));
    let series = call(
        &http,
        "GET",
        &format!("/api/v1{model_path}?series=fleet-qualification&firmware=HXT7404Q"),
        &cookie,
        "",
    );
    let v: serde_json::Value = serde_json::from_str(&series.body).unwrap();
    assert_eq!(v["groups"][0]["drives"].as_array().unwrap().len(), 40);

    // A model the ledger knows but no run measured, and one nobody has.
    let unmeasured = call(
        &http,
        "GET",
        &format!("/models/{}", urlencode(UNMEASURED)),
        &cookie,
        "",
    );
    assert_eq!(unmeasured.status, 200, "{unmeasured:?}");
    assert!(
        unmeasured.body.contains("id=\"no-groups\""),
        "{}",
        unmeasured.body
    );
    let nobody = call(&http, "GET", "/models/NO%20SUCH%20MODEL", &cookie, "");
    assert_eq!(nobody.status, 404, "{nobody:?}");
    assert!(
        nobody
            .body
            .contains("no drive of model &#34;NO SUCH MODEL&#34; in the ledger"),
        "{}",
        nobody.body
    );
    let nobody = call(
        &http,
        "GET",
        "/api/v1/models/NO%20SUCH%20MODEL",
        &cookie,
        "",
    );
    assert_eq!(nobody.status, 404, "{nobody:?}");
    let v: serde_json::Value = serde_json::from_str(&nobody.body).unwrap();
    assert_eq!(
        v["error"],
        "no drive of model \"NO SUCH MODEL\" in the ledger"
    );
    // Nobody signed in: nothing.
    let anonymous = call(&http, "GET", &format!("/api/v1{model_path}"), &[], "");
    assert_eq!(anonymous.status, 401, "{anonymous:?}");

    // The Drives page links each model to its page.
    let list = call(&http, "GET", "/drives", &cookie, "");
    assert!(
        list.body
            .contains(&format!("<a href=\"{model_path}\">{MODEL}</a>")),
        "{}",
        list.body
    );
    // A slow drive's page says where it stands, a typical one too, each linking to the
    // model's page; a drive never measured says so.
    let slow_page = call(
        &http,
        "GET",
        &format!("/drives/{}", urlencode(&id(&fleet[slow[0]].1))),
        &cookie,
        "",
    );
    assert_eq!(slow_page.status, 200, "{slow_page:?}");
    let b = &slow_page.body;
    assert!(
        b.contains("<h2>Among its peers</h2><ul id=\"peers\"><li class=\"fail\">"),
        "{b}"
    );
    assert!(b.contains("[bs=4k] wall: median "), "{b}");
    assert!(b.contains("slower OUTLIER</li>"), "{b}");
    assert!(
        b.contains(&format!("<a href=\"{model_path}\" id=\"model-page\">")),
        "{b}"
    );
    let typical = call(
        &http,
        "GET",
        &format!("/drives/{}", urlencode(&id(&fleet[0].1))),
        &cookie,
        "",
    );
    assert!(
        typical.body.contains("<ul id=\"peers\"><li>"),
        "{}",
        typical.body
    );
    assert!(!typical.body.contains("OUTLIER"), "{}", typical.body);
    let idle_page = call(
        &http,
        "GET",
        &format!("/drives/{}", urlencode(&id(&idle.1))),
        &cookie,
        "",
    );
    assert!(
        idle_page
            .body
            .contains("id=\"no-peers\">No run of it has ended yet"),
        "{}",
        idle_page.body
    );
    coordinator.kill9();
}
