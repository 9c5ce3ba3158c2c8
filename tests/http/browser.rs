//! A small WebDriver client for the dashboard test: chromedriver (started
//! here) driving headless Chromium, spoken to over plain HTTP with reqwest,
//! so the test needs no browser-automation crate. Every wait polls with a
//! deadline; none is a bare sleep.

use std::process::Stdio;
use std::time::{Duration, Instant};

use base64::Engine;
use pgcursor_tests::{client, free_port};
use serde_json::{json, Value};
use tokio::process::{Child, Command};

/// How long a page may take to show what a wait expects.
pub const PATIENCE: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(100);
/// The W3C key of an element reference.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

pub struct Browser {
    driver: Child,
    session: String,
    http: reqwest::Client,
    /// Whether `quit` ended the session already.
    ended: bool,
}

impl Browser {
    /// chromedriver on a free port and a headless session of `width`×`height`.
    pub async fn start(width: u32, height: u32) -> Browser {
        let port = free_port();
        let driver = Command::new(chromedriver())
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn chromedriver (install chromium and chromium-driver: `make deps`)");
        let mut browser = Browser {
            driver,
            session: format!("http://127.0.0.1:{port}"),
            http: client(),
            ended: false,
        };
        browser.wait_driver_ready().await;
        browser.new_session(width, height).await;
        browser
    }

    async fn wait_driver_ready(&self) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let status = self
                .http
                .get(format!("{}/status", self.session))
                .send()
                .await;
            if let Ok(answer) = status {
                let body: Value = answer.json().await.unwrap_or(Value::Null);
                if body["value"]["ready"] == true {
                    return;
                }
            }
            assert!(
                Instant::now() < deadline,
                "chromedriver did not become ready"
            );
            tokio::time::sleep(POLL).await;
        }
    }

    async fn new_session(&mut self, width: u32, height: u32) {
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium(),
                // --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                         format!("--window-size={width},{height}"), "--lang=en-US"],
            },
            "goog:loggingPrefs": {"browser": "ALL"},
        }}});
        let url = format!("{}/session", self.session);
        let answer: Value = self
            .http
            .post(url)
            .json(&capabilities)
            .send()
            .await
            .expect("chromedriver answers")
            .json()
            .await
            .expect("a JSON answer");
        let id = answer["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {answer}"));
        self.session = format!("{}/session/{id}", self.session);
    }

    /// One WebDriver command; a WebDriver error is an `Err` with its message.
    async fn command(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, String> {
        let url = format!("{}{path}", self.session);
        let request = match method {
            "GET" => self.http.get(url),
            "DELETE" => self.http.delete(url),
            _ => self.http.post(url).json(&body.unwrap_or(json!({}))),
        };
        let answer: Value = request
            .send()
            .await
            .map_err(|e| e.to_string())?
            .json()
            .await
            .map_err(|e| e.to_string())?;
        match answer["value"].get("error") {
            Some(error) => Err(format!("{error}: {}", answer["value"]["message"])),
            None => Ok(answer["value"].clone()),
        }
    }

    pub async fn goto(&self, url: &str) {
        self.command("POST", "/url", Some(json!({"url": url})))
            .await
            .unwrap_or_else(|e| panic!("navigate to {url}: {e}"));
    }

    /// A CSS selector, or an XPath when it starts with `/`.
    async fn find(&self, selector: &str) -> Result<String, String> {
        let using = if selector.starts_with('/') {
            "xpath"
        } else {
            "css selector"
        };
        let found = self
            .command(
                "POST",
                "/element",
                Some(json!({"using": using, "value": selector})),
            )
            .await?;
        Ok(found[ELEMENT].as_str().unwrap_or_default().to_string())
    }

    /// The texts of a table row's cells, once the row (an XPath) exists.
    pub async fn row_cells(&self, row: &str) -> Vec<String> {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Ok(cells) = self.try_row_cells(row).await {
                return cells;
            }
            assert!(Instant::now() < deadline, "no row {row}");
            tokio::time::sleep(POLL).await;
        }
    }

    async fn try_row_cells(&self, row: &str) -> Result<Vec<String>, String> {
        let id = self.find(row).await?;
        let tds = self
            .command(
                "POST",
                &format!("/element/{id}/elements"),
                Some(json!({"using": "css selector", "value": "td"})),
            )
            .await?;
        let mut cells = Vec::new();
        for td in tds.as_array().into_iter().flatten() {
            let td = td[ELEMENT].as_str().unwrap_or_default();
            let text = self
                .command("GET", &format!("/element/{td}/text"), None)
                .await?;
            cells.push(text.as_str().unwrap_or_default().trim().to_string());
        }
        Ok(cells)
    }

    async fn try_text(&self, css: &str) -> Result<String, String> {
        let id = self.find(css).await?;
        let text = self
            .command("GET", &format!("/element/{id}/text"), None)
            .await?;
        Ok(text.as_str().unwrap_or_default().to_string())
    }

    /// Waits until the element's visible text contains `needle`; returns the text.
    pub async fn wait_text(&self, css: &str, needle: &str) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let seen = self.try_text(css).await;
            if let Ok(text) = &seen {
                if text.contains(needle) {
                    return text.clone();
                }
            }
            if Instant::now() > deadline {
                let page = self.try_text("body").await.unwrap_or_default();
                panic!("{css} never showed {needle:?} (last: {seen:?}); the page:\n{page}");
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Waits until the element exists and is shown.
    pub async fn wait_visible(&self, css: &str) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Ok(id) = self.find(css).await {
                let shown = self
                    .command("GET", &format!("/element/{id}/displayed"), None)
                    .await;
                if shown == Ok(Value::Bool(true)) {
                    return;
                }
            }
            if Instant::now() > deadline {
                let page = self.try_text("body").await;
                let console = self.console_errors().await;
                panic!("{css} never became visible; the page: {page:?}; console: {console:?}");
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// POSTs the request `request(id)` gives (path, body) for the element
    /// (CSS or XPath), finding it again if a refresh redrew it meanwhile;
    /// panics naming `what` once PATIENCE is spent.
    async fn post_to_element(
        &self,
        selector: &str,
        what: &str,
        request: impl Fn(&str) -> (String, Option<Value>),
    ) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let done = match self.find(selector).await {
                Ok(id) => {
                    let (path, body) = request(&id);
                    self.command("POST", &path, body).await
                }
                Err(e) => Err(e),
            };
            match done {
                Ok(_) => return,
                Err(e) if Instant::now() > deadline => panic!("{what} {selector}: {e}"),
                Err(_) => tokio::time::sleep(POLL).await,
            }
        }
    }

    /// Clicks the element (CSS or XPath), finding it again if a refresh redrew it meanwhile.
    pub async fn click(&self, css: &str) {
        self.post_to_element(css, "click", |id| (format!("/element/{id}/click"), None))
            .await;
    }

    /// Moves the mouse pointer onto the element's centre (no click),
    /// finding it again if a refresh redrew it meanwhile.
    pub async fn hover(&self, selector: &str) {
        self.wait_visible(selector).await;
        self.post_to_element(selector, "hover", |id| {
            let mv = json!({"type": "pointerMove", "duration": 0, "origin": { ELEMENT: id }, "x": 0, "y": 0});
            let actions = json!({"actions": [{"type": "pointer", "id": "mouse",
                                              "parameters": {"pointerType": "mouse"}, "actions": [mv]}]});
            ("/actions".to_string(), Some(actions))
        })
        .await;
    }

    /// Types into the element (a real key sequence).
    pub async fn type_into(&self, css: &str, text: &str) {
        self.wait_visible(css).await;
        let id = self.find(css).await.expect("the element");
        self.command(
            "POST",
            &format!("/element/{id}/value"),
            Some(json!({"text": text})),
        )
        .await
        .unwrap_or_else(|e| panic!("type into {css}: {e}"));
    }

    /// Sets an input's value as a picker would, and tells the page so;
    /// finding it again if a refresh redrew it meanwhile.
    pub async fn set_value(&self, selector: &str, value: &str) {
        self.wait_visible(selector).await;
        let script = "arguments[0].value = arguments[1]; \
                      arguments[0].dispatchEvent(new Event('input', {bubbles: true}));";
        self.post_to_element(selector, "set", |id| {
            let args = json!([{ ELEMENT: id }, value]);
            (
                "/execute/sync".to_string(),
                Some(json!({"script": script, "args": args})),
            )
        })
        .await;
    }

    /// Runs `script` (a function body; `return` gives its value) in the page.
    pub async fn eval(&self, script: &str) -> Result<Value, String> {
        self.command(
            "POST",
            "/execute/sync",
            Some(json!({"script": script, "args": []})),
        )
        .await
    }

    /// Waits until `script`'s value is `expected`; returns it.
    pub async fn wait_eval(&self, script: &str, expected: &Value) -> Value {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let seen = self.eval(script).await;
            if seen.as_ref() == Ok(expected) {
                return expected.clone();
            }
            if Instant::now() > deadline {
                panic!("{script} never gave {expected} (last: {seen:?})");
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Sets the window's size, as a person turning to a phone would.
    pub async fn resize(&self, width: u32, height: u32) {
        self.command(
            "POST",
            "/window/rect",
            Some(json!({"width": width, "height": height})),
        )
        .await
        .unwrap_or_else(|e| panic!("resize to {width}x{height}: {e}"));
    }

    /// The browser console's entries at level SEVERE since the last call.
    pub async fn console_errors(&self) -> Vec<String> {
        let log = self
            .command("POST", "/se/log", Some(json!({"type": "browser"})))
            .await
            .unwrap_or_else(|e| panic!("read the console log: {e}"));
        log.as_array()
            .into_iter()
            .flatten()
            .filter(|entry| entry["level"] == "SEVERE")
            .map(|entry| entry["message"].as_str().unwrap_or_default().to_string())
            .collect()
    }

    /// A PNG of the window.
    pub async fn screenshot(&self, path: &std::path::Path) {
        let shot = self
            .command("GET", "/screenshot", None)
            .await
            .expect("a screenshot");
        let png = base64::engine::general_purpose::STANDARD
            .decode(shot.as_str().unwrap_or_default())
            .expect("base64 PNG");
        std::fs::write(path, png).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    }

    /// Ends the session (Chromium exits) and chromedriver.
    pub async fn quit(mut self) {
        let _ = self.command("DELETE", "", None).await;
        self.ended = true;
    }
}

/// A test that panics never reaches `quit`, and killing chromedriver alone
/// would leave Chromium running: ending the session here closes it. Blocking
/// and by hand, as Drop cannot await.
impl Drop for Browser {
    fn drop(&mut self) {
        if !self.ended {
            end_session(&self.session);
        }
        let _ = self.driver.start_kill();
    }
}

fn end_session(session: &str) {
    use std::io::{Read, Write};
    let Some((address, path)) = session
        .strip_prefix("http://")
        .and_then(|rest| rest.split_once('/'))
    else {
        return;
    };
    let Ok(mut stream) = std::net::TcpStream::connect(address) else {
        return;
    };
    let _ = stream.set_read_timeout(Some(PATIENCE));
    let request = format!(
        "DELETE /{path} HTTP/1.1\r\nHost: {address}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
    if stream.write_all(request.as_bytes()).is_ok() {
        // The answer's first bytes come once Chromium is closed.
        let _ = stream.read(&mut [0; 64]);
    }
}

fn chromedriver() -> String {
    std::env::var("CHROMEDRIVER").unwrap_or_else(|_| "chromedriver".into())
}

fn chromium() -> String {
    std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into())
}
