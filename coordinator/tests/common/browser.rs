//! A real, headless Chromium driven through `chromedriver` (WebDriver, with fantoccini), for
//! tests of the pages the coordinator serves (the fleet console, issue 29): `Browser::start`
//! opens one, each helper panics with what the page shows when it cannot do its part, and
//! dropping it ends the session and chromedriver with every browser process it started.
//!
//! Without chromedriver or Chromium the test is skipped, saying so (`skip`); with
//! `PLATTER_TEST_STRICT=1` (CI installs both) that is a failure.

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::elements::Element;
use fantoccini::wd::{Capabilities, TimeoutConfiguration};
use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{json, Value};

/// How long `wait_for_text` waits for a page to show what a test expects.
pub const WAIT: Duration = Duration::from_secs(10);
/// How long chromedriver may take to say the port it listens on.
const DRIVER_START: Duration = Duration::from_secs(20);
/// How long a page may take to load, or a script to run, before the call fails (WebDriver's
/// own defaults are 300 s and 30 s: a hung page would stall the test for minutes).
const PAGE_LOAD: Duration = Duration::from_secs(30);
/// The browser's window: wide enough for the console's tables, and the width screenshots
/// have.
pub const WINDOW: (u32, u32) = (1280, 900);

/// A headless Chromium session and the chromedriver serving it.
pub struct Browser {
    client: Client,
    /// The WebDriver session, which `drop` ends itself (fantoccini ends it from a task that
    /// a finished test's runtime may no longer run).
    session: String,
    /// chromedriver, leader of a process group of its own: Chromium and its helpers are in it.
    driver: Child,
    port: u16,
    /// The browser's profile and chromedriver's output; removed once both have ended.
    dir: tempfile::TempDir,
}

/// The first of `names` the agent would find (PATH, then the sbin directories).
fn find_any(names: &[&str]) -> Option<PathBuf> {
    names
        .iter()
        .find_map(|name| platter_agent::testing::find_program(name))
}

impl Browser {
    /// Starts chromedriver on a port of its choosing on loopback and opens a headless
    /// Chromium (fresh profile, `WINDOW` sized). `None`, saying the test is skipped and why,
    /// when chromedriver or Chromium is not installed; with `PLATTER_TEST_STRICT=1` that
    /// panics instead. A browser that is installed but does not start is a panic.
    pub async fn start() -> Option<Browser> {
        let Some(driver) = find_any(&["chromedriver"]) else {
            super::skip(
                "drives Chromium through chromedriver, which is not installed; \
                 apt install chromium-driver to include it",
            );
            return None;
        };
        let Some(chromium) = find_any(&["chromium", "chromium-browser", "google-chrome"]) else {
            super::skip(
                "drives a headless Chromium, which is not installed; apt install chromium to \
                 include it",
            );
            return None;
        };
        let dir = tempfile::tempdir().expect("a temporary directory for the browser");
        let out = dir.path().join("chromedriver.out");
        let driver = Command::new(&driver)
            // Port 0: chromedriver binds one the kernel picks and says which, so no other
            // test can take it between our choice and its bind.
            .arg("--port=0")
            .arg(format!(
                "--log-path={}",
                dir.path().join("chromedriver.log").display()
            ))
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out).expect("chromedriver's output file"))
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", driver.display()));
        let mut starting = Starting {
            driver: Some(driver),
        };
        let port = starting.port(&out).await;
        let profile = dir.path().join("profile");
        let args = [
            "--headless=new".to_string(),
            // Chromium's sandbox needs user namespaces that root (CI) and most containers do
            // not get; the pages loaded are the test's own.
            "--no-sandbox".into(),
            "--disable-gpu".into(),
            // /dev/shm is 64 MiB in a container: too small for a renderer's shared memory.
            "--disable-dev-shm-usage".into(),
            format!("--window-size={},{}", WINDOW.0, WINDOW.1),
            format!("--user-data-dir={}", profile.display()),
            "--no-first-run".into(),
            "--disable-extensions".into(),
            "--disable-background-networking".into(),
        ];
        let capabilities: Capabilities = match json!({
            "browserName": "chrome",
            // The console serves HTTPS with the test fleet's own CA, which this fresh
            // profile does not know; the tests check the certificate themselves
            // (`common::web`), the browser is there for the pages.
            "acceptInsecureCerts": true,
            "goog:chromeOptions": { "binary": chromium, "args": args },
        }) {
            Value::Object(map) => map,
            _ => unreachable!("a JSON object literal"),
        };
        let client = ClientBuilder::new(HttpConnector::new())
            .capabilities(capabilities)
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "opening a Chromium session through chromedriver: {e}\nchromedriver's log:\n{}",
                    log_tail(dir.path())
                )
            });
        client
            .update_timeouts(TimeoutConfiguration::new(
                Some(PAGE_LOAD),
                Some(PAGE_LOAD),
                Some(Duration::ZERO),
            ))
            .await
            .expect("setting the session's timeouts");
        let session = client
            .session_id()
            .await
            .expect("the session's id")
            .expect("a session has an id");
        Some(Browser {
            client,
            session,
            driver: starting.driver.take().expect("still starting"),
            port,
            dir,
        })
    }

    /// Opens a new tab, makes it the one the other methods work on, and loads `url` in it.
    pub async fn new_tab(&self, url: &str) {
        let tab = self
            .client
            .new_window(true)
            .await
            .unwrap_or_else(|e| panic!("opening a tab: {e}"));
        self.client
            .switch_to_window(tab.handle)
            .await
            .unwrap_or_else(|e| panic!("switching to the new tab: {e}"));
        self.goto(url).await;
    }

    /// Loads `url` and waits for its `load` event.
    pub async fn goto(&self, url: &str) {
        self.client
            .goto(url)
            .await
            .unwrap_or_else(|e| panic!("loading {url}: {e}"));
    }

    /// What the page shows to a reader (`document.body.innerText`), for failure messages.
    pub async fn page_text(&self) -> String {
        match self
            .client
            .execute(
                "return document.body ? document.body.innerText : ''",
                vec![],
            )
            .await
        {
            Ok(Value::String(text)) => text,
            Ok(other) => format!("(no text: {other})"),
            Err(e) => format!("(the page's text could not be read: {e})"),
        }
    }

    /// The element `selector` (CSS) finds first; panics with the page's text without one.
    pub async fn find(&self, selector: &str) -> Element {
        match self.client.find(Locator::Css(selector)).await {
            Ok(element) => element,
            Err(e) => panic!(
                "no element `{selector}` on {}: {e}\nthe page shows:\n{}",
                self.url().await,
                self.page_text().await
            ),
        }
    }

    /// The text the element `selector` shows.
    pub async fn text(&self, selector: &str) -> String {
        let element = self.find(selector).await;
        element
            .text()
            .await
            .unwrap_or_else(|e| panic!("the text of `{selector}`: {e}"))
    }

    /// Waits (up to `WAIT`, polling) until the element `selector` exists and its text
    /// contains `want`, and returns that text; panics with the page's text when it does not.
    pub async fn wait_for_text(&self, selector: &str, want: &str) -> String {
        self.wait_for_text_within(selector, want, WAIT).await
    }

    /// `wait_for_text`, waiting up to `wait`.
    pub async fn wait_for_text_within(&self, selector: &str, want: &str, wait: Duration) -> String {
        let until = Instant::now() + wait;
        loop {
            if let Ok(element) = self.client.find(Locator::Css(selector)).await {
                // The element may be replaced between finding and reading it: then the next
                // round finds the new one.
                if let Ok(text) = element.text().await {
                    if text.contains(want) {
                        return text;
                    }
                }
            }
            if Instant::now() >= until {
                panic!(
                    "`{selector}` on {} did not show {want:?} within {wait:?}; the page shows:\n{}",
                    self.url().await,
                    self.page_text().await
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Clicks the element `selector`.
    pub async fn click(&self, selector: &str) {
        let element = self.find(selector).await;
        element
            .click()
            .await
            .unwrap_or_else(|e| panic!("clicking `{selector}`: {e}"));
    }

    /// Replaces the value of the form field `selector` with `value`, typed as a user would.
    pub async fn fill(&self, selector: &str, value: &str) {
        let field = self.find(selector).await;
        field
            .clear()
            .await
            .unwrap_or_else(|e| panic!("clearing `{selector}`: {e}"));
        field
            .send_keys(value)
            .await
            .unwrap_or_else(|e| panic!("typing into `{selector}`: {e}"));
    }

    /// Submits the form `selector` with its first submit button, as a user would (its
    /// validation and `submit` handlers run).
    pub async fn submit(&self, selector: &str) {
        let form = self
            .client
            .form(Locator::Css(selector))
            .await
            .unwrap_or_else(|e| panic!("no form `{selector}`: {e}"));
        form.submit()
            .await
            .unwrap_or_else(|e| panic!("submitting `{selector}` (it needs a submit button): {e}"));
    }

    /// The value of the cookie `name` the page has, if it has one.
    pub async fn cookie(&self, name: &str) -> Option<String> {
        match self.client.get_named_cookie(name).await {
            Ok(cookie) => Some(cookie.value().to_string()),
            Err(e) if e.is_no_such_cookie() => None,
            Err(e) => panic!("reading cookie {name}: {e}"),
        }
    }

    /// The text of the JavaScript dialog (`alert`, `confirm`, `prompt`) open now, if one is.
    pub async fn dialog(&self) -> Option<String> {
        match self.client.get_alert_text().await {
            Ok(text) => Some(text),
            Err(e) if e.is_no_such_alert() => None,
            Err(e) => panic!("asking whether a dialog is open: {e}"),
        }
    }

    /// Runs `script` (a function body: `return` gives its value; `arguments` holds `args`)
    /// in the page and returns its value as JSON.
    pub async fn script(&self, script: &str, args: Vec<Value>) -> Value {
        self.client
            .execute(script, args)
            .await
            .unwrap_or_else(|e| panic!("running {script:?}: {e}"))
    }

    /// Writes what the window shows, as PNG, to `path`.
    pub async fn screenshot(&self, path: &Path) {
        let png = self
            .client
            .screenshot()
            .await
            .unwrap_or_else(|e| panic!("taking a screenshot: {e}"));
        std::fs::write(path, png).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
    }

    /// The page's address now.
    pub async fn url(&self) -> String {
        match self.client.current_url().await {
            Ok(url) => url.to_string(),
            Err(e) => format!("(an unknown page: {e})"),
        }
    }

    /// Marks the page: a reload (a new document) loses the mark.
    pub async fn mark(&self) {
        self.script("window.platterMark = 42; return null;", vec![])
            .await;
    }

    /// Whether the page is still the one `mark` marked (it did not reload).
    pub async fn still_marked(&self) -> bool {
        self.script("return window.platterMark === 42;", vec![])
            .await
            == Value::Bool(true)
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Ending the session makes chromedriver quit Chromium and wait for it.
        end_session(self.port, &self.session);
        stop(&mut self.driver);
    }
}

/// chromedriver while the session is not open yet: stopped if starting fails.
struct Starting {
    driver: Option<Child>,
}

impl Starting {
    /// The port chromedriver says it listens on ("… was started successfully on port N.").
    async fn port(&mut self, out: &Path) -> u16 {
        let until = Instant::now() + DRIVER_START;
        loop {
            let said = std::fs::read_to_string(out).unwrap_or_default();
            let port = said.lines().find_map(|l| {
                l.split_once("started successfully on port ")
                    .and_then(|(_, rest)| rest.trim_end_matches('.').parse().ok())
            });
            if let Some(port) = port {
                return port;
            }
            let driver = self.driver.as_mut().expect("still starting");
            if let Ok(Some(status)) = driver.try_wait() {
                panic!("chromedriver ended ({status}) before it listened: {said}");
            }
            if Instant::now() >= until {
                panic!("chromedriver did not say its port within {DRIVER_START:?}: {said}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Starting {
    fn drop(&mut self) {
        if let Some(driver) = &mut self.driver {
            stop(driver);
        }
    }
}

/// Kills chromedriver's process group (it and any browser it started) and reaps it.
fn stop(driver: &mut Child) {
    if let Ok(pid) = i32::try_from(driver.id()) {
        // SAFETY: kill has no memory preconditions; -pid names the group `process_group(0)`
        // made for chromedriver, which holds only what it started.
        unsafe { libc::kill(-pid, libc::SIGKILL) };
    }
    let _ = driver.wait();
}

/// `DELETE /session/ID` to chromedriver, synchronously: drop cannot await, and chromedriver
/// answers once Chromium has quit.
fn end_session(port: u16, session: &str) {
    let Ok(mut tcp) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return;
    };
    let _ = tcp.set_read_timeout(Some(Duration::from_secs(10)));
    let request = format!(
        "DELETE /session/{session} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\
         Content-Length: 0\r\nConnection: close\r\n\r\n"
    );
    if tcp.write_all(request.as_bytes()).is_ok() {
        // The answer's first bytes say the session ended; chromedriver keeps the
        // connection open after it, so reading to its end would wait for the timeout.
        let _ = tcp.read(&mut [0; 512]);
    }
}

/// The end of chromedriver's log, for a session that could not be opened.
fn log_tail(dir: &Path) -> String {
    let log = std::fs::read_to_string(dir.join("chromedriver.log")).unwrap_or_default();
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}
