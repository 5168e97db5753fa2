//! The browser harness (`common::browser`) against a small site of the test's own, served
//! by axum on 127.0.0.1: each helper the console's tests use must see what a real Chromium
//! shows — text, a posted form's answer, a DOM a script changes later, a screenshot, a
//! cookie, an alert. Skipped without chromedriver or Chromium, a failure under
//! `PLATTER_TEST_STRICT=1`.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use axum::http::header;
use axum::response::{Html, IntoResponse};
use axum::routing::{get, post};
use axum::Router;
use common::browser::{Browser, WINDOW};
use futures::FutureExt;
use serde_json::json;

/// The test's site on a port the kernel chose, served until dropped.
struct Site {
    addr: SocketAddr,
    server: tokio::task::JoinHandle<()>,
}

impl Site {
    async fn serve() -> Site {
        let app = Router::new()
            .route("/hello", get(hello))
            .route("/form", get(form))
            .route("/answer", post(answer))
            .route("/later", get(later))
            .route("/alert", get(alert))
            .route("/quiet", get(quiet));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Site { addr, server }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

impl Drop for Site {
    fn drop(&mut self) {
        self.server.abort();
    }
}

fn page(title: &str, body: &str) -> Html<String> {
    Html(format!(
        "<!doctype html><html><head><title>{title}</title></head><body>{body}</body></html>"
    ))
}

async fn hello() -> impl IntoResponse {
    (
        [(header::SET_COOKIE, "platter_session=abc123; Path=/")],
        page(
            "hello",
            "<h1 id=greeting>Hello from platter</h1><p class=note>two hosts offline</p>",
        ),
    )
}

async fn form() -> Html<String> {
    page(
        "form",
        "<form id=who method=post action=/answer>\
           <input id=name name=name value=placeholder>\
           <button type=submit>Send</button>\
         </form>",
    )
}

/// Echoes the form's body as posted (`application/x-www-form-urlencoded`).
async fn answer(body: String) -> Html<String> {
    page("answer", &format!("<p id=answer>posted {body}</p>"))
}

async fn later() -> Html<String> {
    page(
        "later",
        "<p id=status>waiting</p>\
         <script>setTimeout(() => { document.getElementById('status').textContent = \
           'plan accepted by h1'; }, 1000);</script>",
    )
}

async fn alert() -> Html<String> {
    page(
        "alert",
        "<button id=go onclick=\"alert('the store is full')\">Go</button>",
    )
}

/// As `alert`, but the button writes its answer into the page instead of a dialog.
async fn quiet() -> Html<String> {
    page(
        "quiet",
        "<p id=said></p>\
         <button id=go onclick=\"document.getElementById('said').textContent = 'clicked'\">Go</button>",
    )
}

#[tokio::test]
async fn reads_the_text_and_the_cookie_a_page_has() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    let site = Site::serve().await;
    browser.goto(&site.url("/hello")).await;
    assert_eq!(browser.text("#greeting").await, "Hello from platter");
    assert_eq!(browser.text("p.note").await, "two hosts offline");
    assert!(browser.page_text().await.contains("two hosts offline"));
    assert_eq!(
        browser.cookie("platter_session").await.as_deref(),
        Some("abc123")
    );
    assert_eq!(browser.cookie("nobody_set_this").await, None);
    assert_eq!(
        browser
            .script("return [document.title, arguments[0] + 1]", vec![json!(41)])
            .await,
        json!(["hello", 42])
    );
}

#[tokio::test]
async fn fills_and_posts_a_form_and_reads_the_answer() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    let site = Site::serve().await;
    browser.goto(&site.url("/form")).await;
    browser.fill("#name", "Ada Lovelace").await;
    browser.submit("#who").await;
    // `fill` replaced the field's value rather than adding to it.
    let answer = browser.wait_for_text("#answer", "posted").await;
    assert_eq!(answer, "posted name=Ada+Lovelace");
    assert!(
        browser.url().await.ends_with("/answer"),
        "{}",
        browser.url().await
    );
}

#[tokio::test]
async fn waits_for_a_page_a_script_changes_later() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    let site = Site::serve().await;
    browser.goto(&site.url("/later")).await;
    // The script has not run yet: the wait below has something to wait for.
    assert_eq!(browser.text("#status").await, "waiting");
    let text = browser.wait_for_text("#status", "accepted").await;
    assert_eq!(text, "plan accepted by h1");

    // A wait that runs out fails the test with what the page shows.
    browser.goto(&site.url("/hello")).await;
    let failed = std::panic::AssertUnwindSafe(browser.wait_for_text_within(
        "#greeting",
        "never shown",
        Duration::from_millis(300),
    ))
    .catch_unwind()
    .await;
    let message = failed
        .expect_err("a wait for text that never comes fails")
        .downcast::<String>()
        .map(|m| *m)
        .unwrap_or_default();
    assert!(
        message.contains("did not show \"never shown\"") && message.contains("two hosts offline"),
        "{message}"
    );
}

#[tokio::test]
async fn writes_a_png_screenshot_of_the_window() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    let site = Site::serve().await;
    browser.goto(&site.url("/hello")).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hello.png");
    browser.screenshot(&path).await;
    let png = std::fs::read(&path).unwrap();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    // The first chunk is IHDR: width and height, big-endian, at bytes 16 and 20.
    assert_eq!(&png[12..16], b"IHDR");
    let width = u32::from_be_bytes(png[16..20].try_into().unwrap());
    let height = u32::from_be_bytes(png[20..24].try_into().unwrap());
    assert_eq!(width, WINDOW.0);
    assert!(height > 0 && height <= WINDOW.1, "height {height}");
}

#[tokio::test]
async fn sees_an_alert_open_and_none_where_there_is_none() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    let site = Site::serve().await;
    browser.goto(&site.url("/quiet")).await;
    browser.click("#go").await;
    assert_eq!(browser.text("#said").await, "clicked");
    assert_eq!(browser.dialog().await, None);

    browser.goto(&site.url("/alert")).await;
    assert_eq!(browser.dialog().await, None, "no alert before the click");
    browser.click("#go").await;
    assert_eq!(browser.dialog().await.as_deref(), Some("the store is full"));
}
