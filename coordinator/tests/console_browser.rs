//! The fleet console in a real browser (headless Chromium through chromedriver), with a
//! coordinator and agents started here: sign in, the overview lists the hosts, a
//! campaign's progress and a killed agent appear without a reload, a hostile host name
//! runs nothing, sign out; a drive model's page with 40 simulated drives; and flags triaged
//! and an alert rule tested by the roles that may. With
//! `PLATTER_UPDATE_SCREENSHOTS=1` it also rewrites `examples/screenshots/console-*.png`
//! (1280 px wide), which docs/console.md links.

mod common;

use std::path::Path;
use std::time::Duration;

use common::browser::Browser;
use common::flagged::Receiver;
use common::web::{add_user, call, http_addr};
use common::*;
use serde_json::json;

const XSS_HOST: &str = "<img src=x onerror=alert(1)>";

/// Where screenshots go when asked for.
fn screenshots() -> Option<std::path::PathBuf> {
    std::env::var_os("PLATTER_UPDATE_SCREENSHOTS")
        .is_some_and(|v| v == "1")
        .then(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/screenshots"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_follows_the_fleet_live_in_a_browser() {
    let Some(b) = Browser::start().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let (mut coordinator, port) =
        serve_with(dir, &["--http", "127.0.0.1:0", "--heartbeat-timeout", "10"]);
    let http = http_addr(dir);
    assert!(http.starts_with("https://"), "{http}");
    let site = http.clone();
    add_user(dir, "alice", "operator", "correct horse battery");
    let _h1 = agent(dir, port, "h1", &[]);
    let mut h2 = agent(dir, port, "h2", &[]);
    let _xss = agent(dir, port, XSS_HOST, &[]);
    wait_agents(dir, 3);

    // Signing in from a page asked for leads back to it.
    b.goto(&format!("{site}/hosts")).await;
    assert!(b.url().await.contains("/login?next="), "{}", b.url().await);
    b.fill("input[name=name]", "alice").await;
    b.fill("input[name=password]", "correct horse battery")
        .await;
    b.submit("#login").await;
    b.wait_for_text("#count", "3 of 3 host(s)").await;
    assert!(b.cookie("platter_session").await.is_some());

    // The hostile host name is shown as text and runs nothing: no alert, no image.
    let text = b.page_text().await;
    assert!(text.contains(XSS_HOST), "{text}");
    assert_eq!(b.dialog().await, None);
    let images = b
        .script(
            "return document.querySelectorAll('#hosts img').length;",
            vec![],
        )
        .await;
    assert_eq!(images, serde_json::json!(0));
    if let Some(shots) = screenshots() {
        b.screenshot(&shots.join("console-hosts.png")).await;
    }

    // The overview lists the three hosts.
    b.goto(&format!("{site}/")).await;
    b.wait_for_text("#fleet", "3 host(s)").await;

    // A campaign's progress advances on its page without a reload; once it ends, the page
    // opens with what it found, above its state.
    let steady = write(
        dir,
        "steady.yaml",
        "name: steady\nhosts: { names: [h1] }\nmatrix: { ms: [\"2\", \"4\"] }\n\
         workload: { command: { run: \"sleep 0.${ms}\" } }\nrepeat: 6\n",
    );
    let id = submit(dir, port, &steady);
    b.goto(&format!("{site}/campaigns/{id}")).await;
    b.wait_for_text("#state", "running").await;
    b.mark().await;
    b.wait_for_text_within("#state", "done", Duration::from_secs(60))
        .await;
    assert!(b.text("#steps").await.contains("(100%)"));
    // 0.4 s against 0.2 s, six runs each: significant alone, so no `~`.
    let found = b.wait_for_text("#findings", "ms=4 vs 2: ×").await;
    assert!(found.starts_with("Findings (wall)"), "{found}");
    assert!(!found.contains(" ~"), "{found}");
    let first = b
        .script(
            "return document.querySelector('main #findings')
                .compareDocumentPosition(document.querySelector('#state'))
                === Node.DOCUMENT_POSITION_FOLLOWING;",
            vec![],
        )
        .await;
    assert_eq!(first, serde_json::json!(true), "the findings come first");
    assert!(b.still_marked().await, "the page reloaded itself");
    if let Some(shots) = screenshots() {
        b.screenshot(&shots.join("console-campaign.png")).await;
    }

    // A host's page: its drives, tools and the campaign it ran.
    b.goto(&format!("{site}/hosts/h1")).await;
    b.wait_for_text("#host-campaigns", "steady").await;
    b.wait_for_text("#ran-on", "kernel: ").await;
    if let Some(shots) = screenshots() {
        b.screenshot(&shots.join("console-host.png")).await;
    }

    // Compare: `platter compare`'s answer as a page.
    b.goto(&format!("{site}/compare?a=steady&b={id}")).await;
    b.wait_for_text("#comparison", "B = ").await;
    if let Some(shots) = screenshots() {
        b.screenshot(&shots.join("console-compare.png")).await;
    }

    // Submit: a mistake is shown at its line and column before anything is submitted;
    // a good campaign shows what it would plan, then runs.
    b.goto(&format!("{site}/submit")).await;
    b.fill(
        "textarea[name=yaml]",
        "name: checked\nhosts: { names: [h1] }\nworkload: { comand: { run: \"true\" } }\n",
    )
    .await;
    b.click("button[value=check]").await;
    let mistake = b.wait_for_text("#outcome", "campaign.yaml:3:").await;
    assert!(mistake.contains("comand"), "{mistake}");
    assert_eq!(
        query_i64(dir, "SELECT COUNT(*) FROM campaigns WHERE name = 'checked'"),
        0
    );
    b.fill(
        "textarea[name=yaml]",
        "name: checked\nhosts: { names: [h1] }\nworkload: { command: { run: \"true\" } }\nrepeat: 2\n",
    )
    .await;
    b.click("button[value=check]").await;
    b.wait_for_text("#outcome", "h1").await;
    if let Some(shots) = screenshots() {
        b.screenshot(&shots.join("console-submit.png")).await;
    }
    b.click("button[value=submit]").await;
    b.wait_for_text_within("#state", "done", Duration::from_secs(60))
        .await;
    assert!(b.url().await.contains("/campaigns/"), "{}", b.url().await);

    // A step failing with a script in its stderr: shown on the campaign's page as it
    // fails, as text, and nothing runs.
    let failing = write(
        dir,
        "failing.yaml",
        "name: failing\nhosts: { names: [h1] }\nworkload: { command: { run: \"echo '<script>alert(1)</script>' >&2; exit 3\" } }\nrepeat: 1\n",
    );
    let failing = submit(dir, port, &failing);
    b.goto(&format!("{site}/campaigns/{failing}")).await;
    b.wait_for_text_within(
        "#failures",
        "<script>alert(1)</script>",
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(b.dialog().await, None);

    // Eight live pages open at once, each holding its event stream: the last loads and
    // follows like the first (over HTTP/1.1 a browser opens six connections to a site).
    for _ in 0..8 {
        b.new_tab(&format!("{site}/")).await;
        b.wait_for_text("#fleet", "3 host(s)").await;
    }

    // An agent killed while holding a plan appears under "needing attention" within the
    // heartbeat timeout and 2 s, without a reload.
    let held = write(
        dir,
        "held.yaml",
        "name: held\nhosts: { names: [h2] }\nworkload: { command: { run: \"sleep 120\" } }\nrepeat: 1\n",
    );
    submit(dir, port, &held);
    b.goto(&format!("{site}/")).await;
    b.wait_for_text("#running", "held").await;
    b.mark().await;
    wait_in(dir, "h2 to hold its plan", Duration::from_secs(20), || {
        (query_i64(
            dir,
            "SELECT COUNT(*) FROM plans WHERE host = 'h2' AND state = 'accepted'",
        ) == 1)
            .then_some(())
    });
    h2.kill9();
    let attention = b
        .wait_for_text_within("#attention", "h2", Duration::from_secs(10 + 2))
        .await;
    assert!(
        attention.contains("holding a plan of campaign held"),
        "{attention}"
    );
    assert!(b.still_marked().await, "the page reloaded itself");
    if let Some(shots) = screenshots() {
        b.screenshot(&shots.join("console-overview.png")).await;
    }

    // Signing out ends the session: the cookie no longer opens a page.
    let cookie = b.cookie("platter_session").await.unwrap();
    b.click("header form.who button").await;
    b.wait_for_text("#login", "Sign in").await;
    let after = call(
        &http,
        "GET",
        "/",
        &[("Cookie", &format!("platter_session={cookie}"))],
        "",
    );
    assert_eq!(after.status, 303, "{after:?}");
    coordinator.kill9();
}

/// A model's page in a browser: 40 drives simulated through the store's write path
/// (`common::fleet`), 2 of them 15% slower. The strip plot draws a dot per drive, the slow
/// two red and named, each a link to its drive's page; that page says the drive is an
/// outlier among its peers and links back. A viewer reads it all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_models_page_shows_its_two_slow_drives_among_forty() {
    use common::fleet::{forty, MODEL};
    use common::web::urlencode;
    let Some(b) = Browser::start().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let slow = [5, 29];
    let fleet = {
        let store = platter::store::Store::open(&dir.join("coordinator.db")).unwrap();
        forty(&store, &slow).await
    };
    let id = |d: usize| format!("{MODEL}/{}", fleet[d].1.serial);
    let (mut coordinator, _port) = serve_with(dir, &["--http", "127.0.0.1:0"]);
    let site = http_addr(dir);
    add_user(dir, "vera", "viewer", "vera's long password");
    let model_page = format!("{site}/models/{}", urlencode(MODEL));
    b.goto(&model_page).await;
    b.fill("input[name=name]", "vera").await;
    b.fill("input[name=password]", "vera's long password").await;
    b.submit("#login").await;
    b.wait_for_text(
        "#headline",
        "40 drive(s) of SAMSUNG MZ7LH960HAJR in 1 peer group(s); 2 outliers",
    )
    .await;

    // A dot per drive in the plot, the two slow ones red, each linking to its drive.
    let dots = b
        .script(
            "return Array.from(document.querySelectorAll('#strip-0 svg a.dot')).map(a => [a.getAttribute('href'), a.classList.contains('outlier'), a.querySelector('circle').getAttribute('fill')]);",
            vec![],
        )
        .await;
    let dots = dots.as_array().unwrap();
    assert_eq!(dots.len(), 40, "{dots:?}");
    let mut outliers: Vec<String> = dots
        .iter()
        .filter(|d| d[1] == true)
        .map(|d| {
            assert_eq!(d[2], "#D62728", "{d}");
            d[0].as_str().unwrap().to_string()
        })
        .collect();
    outliers.sort();
    let mut want: Vec<String> = slow
        .iter()
        .map(|&d| format!("/drives/{}", urlencode(&id(d))))
        .collect();
    want.sort();
    assert_eq!(outliers, want);
    for d in dots.iter().filter(|d| d[1] == false) {
        assert_eq!(d[2], "#1F77B4", "{d}");
    }
    // The plot is drawn (laid out with a size), and the outliers are named beside their dots.
    let shown = b
        .script(
            "const r = document.querySelector('#strip-0 svg').getBoundingClientRect(); return [r.width > 600, r.height > 80, Array.from(document.querySelectorAll('#strip-0 .outlier-label')).map(t => t.textContent)];",
            vec![],
        )
        .await;
    assert_eq!(shown[0], true, "{shown}");
    assert_eq!(shown[1], true, "{shown}");
    let mut labels: Vec<&str> = shown[2]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    labels.sort();
    let mut serials: Vec<&str> = slow.iter().map(|&d| fleet[d].1.serial.as_str()).collect();
    serials.sort();
    assert_eq!(labels, serials);
    assert_eq!(
        b.text("#peers-0").await.matches("slower OUTLIER").count(),
        2
    );
    assert_eq!(b.dialog().await, None);
    if let Some(shots) = screenshots() {
        b.screenshot(&shots.join("console-model.png")).await;
    }

    // A slow drive's dot leads to its page, which says it stands out and links back.
    let first = &want[0];
    b.click(&format!("#strip-0 a.outlier[href=\"{first}\"] circle"))
        .await;
    let stands = b.wait_for_text("#peers", "OUTLIER").await;
    assert!(stands.contains("[bs=4k] wall: median "), "{stands}");
    assert!(b.url().await.ends_with(first.as_str()), "{}", b.url().await);
    b.click("#model-page").await;
    b.wait_for_text("#headline", "2 outliers").await;

    // The Drives page links the model to its page.
    b.goto(&format!("{site}/drives")).await;
    b.click(&format!("#drives a[href=\"/models/{}\"]", urlencode(MODEL)))
        .await;
    b.wait_for_text("#headline", "2 outliers").await;
    coordinator.kill9();
}

/// Signs in from `page` (the sign-in form it leads to) as `name`.
async fn sign_in_at(b: &Browser, page: &str, name: &str, password: &str) {
    b.goto(page).await;
    b.fill("input[name=name]", name).await;
    b.fill("input[name=password]", password).await;
    b.submit("#login").await;
}

async fn sign_out(b: &Browser) {
    b.click("header form.who button").await;
    b.wait_for_text("#login", "Sign in").await;
}

/// Flags in a browser, put into the store as the coordinators raise them: a viewer reads
/// the list (open first, then acknowledged, then fixed) and a flag's evidence, with no form
/// to change it; an operator acknowledges one through its page's form and the list says
/// so; the list and the overview follow flags changed elsewhere without a reload; an admin adds a webhook rule pointing at a receiver this test starts, presses its
/// test button, and the receiver gets the message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flags_are_triaged_and_an_alert_rule_is_tested_in_a_browser() {
    let Some(b) = Browser::start().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let f = common::flagged::raise(&dir.join("coordinator.db"));
    let receiver = Receiver::start();
    let public = "https://platter.lab.example:9461";
    let (mut coordinator, _port) =
        serve_with(dir, &["--http", "127.0.0.1:0", "--public-url", public]);
    let site = http_addr(dir);
    add_user(dir, "vic", "viewer", "vic's long password");
    add_user(dir, "otto", "operator", "otto's long password");
    add_user(dir, "ada", "admin", "ada's long password");

    // A viewer: the list, live ones first; a flag's evidence; no form to change it.
    sign_in_at(&b, &format!("{site}/flags"), "vic", "vic's long password").await;
    b.wait_for_text(
        "#count",
        "2 open, 1 acknowledged, 0 false positive, 1 fixed",
    )
    .await;
    let rows = "return Array.from(document.querySelectorAll('#flags tr[data-state]')).map(r => [r.id, r.dataset.state]);";
    let listed = b.script(rows, vec![]).await;
    let row = |id: &str, state: &str| json!([format!("flag-{id}"), state]);
    assert_eq!(
        listed,
        json!([
            row(&f.fail, "open"),
            row(&f.regression, "open"),
            row(&f.health, "acknowledged"),
            row(&f.drift, "fixed"),
        ])
    );
    b.click(&format!("#flag-{} td:last-child a", f.regression))
        .await;
    b.wait_for_text("#evidence", "20.00 ms → 23.10 ms (+15.5%)")
        .await;
    assert!(b.text("#evidence").await.contains("kernel: 6.1.0 → 6.12.1"));
    let forms = b
        .script(
            "return document.querySelectorAll('main form').length;",
            vec![],
        )
        .await;
    assert_eq!(forms, json!(0));
    sign_out(&b).await;

    // An operator acknowledges it through its page's form, in the operator's name.
    let page = format!("{site}/flags/{}", f.regression);
    sign_in_at(&b, &page, "otto", "otto's long password").await;
    b.wait_for_text("#state", "open").await;
    b.fill("#ack input[name=note]", "bisecting the kernel")
        .await;
    b.click("#ack button").await;
    b.wait_for_text("#state", "acknowledged by otto: bisecting the kernel")
        .await;
    assert!(b.url().await.ends_with(&format!("/flags/{}", f.regression)));
    if let Some(shots) = screenshots() {
        b.screenshot(&shots.join("console-flag.png")).await;
    }
    assert_eq!(
        query_i64(
            dir,
            &format!(
                "SELECT COUNT(*) FROM flags WHERE flag_id = '{}' AND state = 'acknowledged' AND state_by = 'otto'",
                f.regression
            )
        ),
        1
    );
    b.goto(&format!("{site}/flags")).await;
    b.wait_for_text(
        &format!("#flag-{} .state", f.regression),
        "acknowledged by otto: bisecting the kernel",
    )
    .await;
    b.wait_for_text("#count", "1 open, 2 acknowledged").await;
    if let Some(shots) = screenshots() {
        b.screenshot(&shots.join("console-flags.png")).await;
    }
    // The list is live: a flag fixed elsewhere (`platter flag`) shows so without a reload.
    b.mark().await;
    run_ok(
        platter()
            .args([
                "flag",
                &f.health,
                "fixed",
                "--note",
                "drive replaced",
                "--by",
                "ana",
                "--db",
            ])
            .arg(dir.join("coordinator.db")),
    );
    b.wait_for_text(
        &format!("#flag-{} .state", f.health),
        "fixed by ana: drive replaced",
    )
    .await;
    assert!(b.still_marked().await, "the flags page reloaded itself");
    // The overview lists the one still open first; fixed elsewhere (`platter flag`, on
    // the store), it leaves the overview without a reload.
    b.goto(&format!("{site}/")).await;
    b.wait_for_text("#open-flags-count", "1 open flag(s)").await;
    assert!(b.text("#open-flags").await.contains("FAIL nightly"));
    b.mark().await;
    run_ok(
        platter()
            .args(["flag", &f.fail, "fixed", "--note", "new firmware", "--db"])
            .arg(dir.join("coordinator.db")),
    );
    let until = std::time::Instant::now() + Duration::from_secs(10);
    while b
        .script(
            "return document.getElementById('open-flags') !== null;",
            vec![],
        )
        .await
        == json!(true)
    {
        assert!(
            std::time::Instant::now() < until,
            "the overview still lists open flags: {}",
            b.page_text().await
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(b.still_marked().await, "the overview reloaded itself");
    sign_out(&b).await;

    // An admin adds a webhook rule pointing at the receiver and presses its test button.
    sign_in_at(&b, &format!("{site}/admin"), "ada", "ada's long password").await;
    // Signing in navigates: wait for the admin page before clicking on it (the click once
    // looked on the sign-in page still showing).
    b.wait_for_text("#admin-nav", "Alerts").await;
    b.click("#admin-nav a[href=\"/admin/alerts\"]").await;
    b.wait_for_text("#rules", "No alert rules").await;
    b.fill("#add-rule input[name=name]", "ops").await;
    b.fill("#add-rule input[name=target]", &receiver.url).await;
    b.click("#add-rule button").await;
    let rules = b
        .wait_for_text("#rules", "every kind; warning or worse")
        .await;
    let shown = receiver.url.trim_end_matches("/hook");
    assert!(rules.contains(&format!("{shown}/…")), "{rules}");
    b.click("#rule-ops form.test button").await;
    b.wait_for_text(
        "#message",
        "test message sent through ops: the channel took it",
    )
    .await;
    let got = receiver
        .received()
        .into_iter()
        .find(|r| r.body.contains("a test message of alert rule ops"))
        .unwrap_or_else(|| panic!("the receiver got {:#?}", receiver.received()));
    assert_eq!(got.path, "/hook");
    assert!(got.header("idempotency-key").is_some(), "{got:?}");
    assert!(
        got.body.contains(&format!("{public}/flags")),
        "{}",
        got.body
    );
    b.wait_for_text("#log", "a test message of alert rule ops")
        .await;
    if let Some(shots) = screenshots() {
        b.screenshot(&shots.join("console-alerts.png")).await;
    }
    assert_eq!(b.dialog().await, None);
    coordinator.kill9();
}
