//! Metrics (docs/http-api.md "Metrics", which lists the names): what the
//! gateway counts itself, recorded through the `metrics` facade into one
//! Prometheus recorder per process, and the text a scrape answers.
//!
//! Two kinds of families. The gateway's own counters and the per-route
//! request histograms live in the process-wide recorder: every update is an
//! atomic add on a handle (the fixed-label ones are registered once, below),
//! so the hot path pays no lookup and no database round trip. The point-in-time
//! gauges (process, pool, listener, and everything `pgcursor.metrics_snapshot()`
//! says) are set on a fresh recorder at each scrape and rendered after the
//! first: a deleted queue's series then disappear with it, and two scrapes
//! never see each other's half-written values.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use actix_web::http::Method;
use metrics::{counter, describe_counter, describe_histogram, histogram, Counter};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use serde::Deserialize;

/// The request latency family, the only histogram.
pub const REQUEST_DURATION: &str = "pgcursor_http_request_duration_seconds";
const REQUESTS: &str = "pgcursor_http_requests_total";
/// Seconds; from a fast ack to a long-poll that waited its full minute.
const DURATION_BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0, 60.0,
];

/// An ack item's outcome, as `pgcursor_ack_items_total{outcome}` labels it.
pub const ACK_OUTCOMES: [&str; 5] = ["completed", "failed", "retry", "dlq", "noop"];
/// docs/ack-contract.md §12's error strings (`database error: <detail>`
/// without its detail), and `other` for anything else, so the label set is
/// bounded whatever an answer says.
pub const ACK_ERRORS: [&str; 7] = [
    "invalid or expired lease",
    "transaction not found",
    "partition not found",
    "already completed",
    "superseded by an earlier nack",
    "database error",
    "other",
];

/// Marks a request no route served (app.rs `no_such_route`).
pub struct NoRoute;

/// The gateway's own counters, registered once with their fixed labels.
pub struct Counters {
    pub push_requests: Counter,
    pub push_messages: Counter,
    pub pop_requests: Counter,
    pub pop_messages: Counter,
    pub pop_looks: Counter,
    pub ack_requests: Counter,
    pub transactions: Counter,
    /// Long answers whose connection was shut down because the client took
    /// none of it in time (peer::watch_long_answers).
    pub answers_abandoned: Counter,
    /// Requests the database failed (minutes::record_db_error).
    pub db_errors: Counter,
    ack_items: [Counter; ACK_OUTCOMES.len()],
    ack_errors: [Counter; ACK_ERRORS.len()],
}

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
static COUNTERS: OnceLock<Counters> = OnceLock::new();
static STARTED: OnceLock<Instant> = OnceLock::new();
/// For `GET /metrics` (JSON): totals without reading the recorder back.
static REQUESTS_SEEN: AtomicU64 = AtomicU64::new(0);
static MESSAGES_PUSHED: AtomicU64 = AtomicU64::new(0);

/// Installs the process-wide recorder (once; later calls answer the same
/// handle) and registers every counter at 0, so each family is there from
/// the first scrape.
pub fn install() -> PrometheusHandle {
    let handle = HANDLE.get_or_init(|| {
        STARTED.get_or_init(Instant::now);
        let builder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Full(REQUEST_DURATION.into()), &DURATION_BUCKETS)
            .expect("the buckets are not empty");
        let handle = builder
            .install_recorder()
            .expect("no other metrics recorder is installed");
        describe();
        handle
    });
    counters();
    handle.clone()
}

/// The counters; before `install` (unit tests) they count into nothing.
pub fn counters() -> &'static Counters {
    COUNTERS.get_or_init(|| {
        let c = |name: &'static str| {
            let counter = counter!(name);
            counter.increment(0);
            counter
        };
        Counters {
            push_requests: c("pgcursor_http_push_requests_total"),
            push_messages: c("pgcursor_http_push_messages_total"),
            pop_requests: c("pgcursor_http_pop_requests_total"),
            pop_messages: c("pgcursor_http_pop_messages_total"),
            pop_looks: c("pgcursor_pop_looks_total"),
            ack_requests: c("pgcursor_http_ack_requests_total"),
            transactions: c("pgcursor_http_transactions_total"),
            answers_abandoned: c("pgcursor_http_answers_abandoned_total"),
            db_errors: c("pgcursor_db_errors_total"),
            ack_items: ACK_OUTCOMES.map(|outcome| {
                let counter = counter!("pgcursor_ack_items_total", "outcome" => outcome);
                counter.increment(0);
                counter
            }),
            ack_errors: ACK_ERRORS.map(|error| {
                let counter = counter!("pgcursor_ack_errors_total", "error" => error);
                counter.increment(0);
                counter
            }),
        }
    })
}

fn describe() {
    describe_counter!(
        "pgcursor_http_push_requests_total",
        "Push requests this gateway process received past authentication"
    );
    describe_counter!(
        "pgcursor_http_push_messages_total",
        "Messages this gateway process stored through push (duplicates and refused items not counted)"
    );
    describe_counter!(
        "pgcursor_http_pop_requests_total",
        "Pop requests this gateway process received past authentication (a long-poll counts once)"
    );
    describe_counter!(
        "pgcursor_http_pop_messages_total",
        "Messages this gateway process delivered through pop"
    );
    describe_counter!(
        "pgcursor_pop_looks_total",
        "Pop statements this gateway process ran: one per pop, more for a long-poll that looked again"
    );
    describe_counter!(
        "pgcursor_http_ack_requests_total",
        "Ack requests (single and batch) this gateway process received past authentication"
    );
    describe_counter!(
        "pgcursor_http_transactions_total",
        "Transaction requests this gateway process received past authentication"
    );
    describe_counter!(
        "pgcursor_http_answers_abandoned_total",
        "Answers of 1 MiB or more whose client took none of them for PGCURSOR_SEND_TIMEOUT_MS: their connection was shut down"
    );
    describe_counter!(
        "pgcursor_db_errors_total",
        "Database calls of requests to this gateway process that failed for the database's reason (lost or no connection, timeout, out of resources, an unexpected SQL error)"
    );
    describe_counter!(
        "pgcursor_ack_items_total",
        "Acknowledged items by outcome: completed, failed, retry, dlq (dead-lettered by this ack), noop (changed nothing)"
    );
    describe_counter!(
        "pgcursor_ack_errors_total",
        "Ack items answered with an error, by error string (docs/ack-contract.md §12)"
    );
    describe_counter!(
        REQUESTS,
        "HTTP requests answered, by matched route pattern, method and status"
    );
    describe_histogram!(
        REQUEST_DURATION,
        "HTTP request latency in seconds, by matched route pattern and method"
    );
}

/// Seconds since the recorder was installed (the process started serving).
pub fn uptime() -> Duration {
    STARTED.get().map(Instant::elapsed).unwrap_or_default()
}

/// Requests answered and messages pushed since start, for `GET /metrics`.
pub fn totals() -> (u64, u64) {
    (
        REQUESTS_SEEN.load(Ordering::Relaxed),
        MESSAGES_PUSHED.load(Ordering::Relaxed),
    )
}

/// A method as a label: the standard ones by name, any other as `other`
/// (a client may send any token as a method; labels must stay few).
pub fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::PATCH => "PATCH",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

/// Records one answered request. `route` is the matched route pattern
/// (`None`: no route matched), never the path, so series stay few.
pub fn record_request(route: Option<String>, method: &Method, status: u16, took: Duration) {
    REQUESTS_SEEN.fetch_add(1, Ordering::Relaxed);
    let route = route.unwrap_or_else(|| "unmatched".to_string());
    let method = method_label(method);
    counter!(REQUESTS, "route" => route.clone(), "method" => method, "status" => status.to_string())
        .increment(1);
    histogram!(REQUEST_DURATION, "route" => route, "method" => method).record(took.as_secs_f64());
}

/// A request on its way through the handlers: counted as a 499 (client
/// closed) if dropped before `answered`, as actix drops the handler of a
/// client that resets its connection.
pub struct Unanswered {
    route: Option<String>,
    method: Method,
    started: Instant,
    answered: bool,
}

impl Unanswered {
    pub fn new(route: Option<String>, method: &Method, started: Instant) -> Unanswered {
        Unanswered {
            route,
            method: method.clone(),
            started,
            answered: false,
        }
    }

    /// Answered after all: its route pattern, for its count.
    pub fn answered(&mut self) -> Option<String> {
        self.answered = true;
        self.route.take()
    }
}

impl Drop for Unanswered {
    fn drop(&mut self) {
        if !self.answered {
            record_request(self.route.take(), &self.method, 499, self.started.elapsed());
        }
    }
}

/// Messages a push stored.
pub fn count_stored(stored: u64) {
    MESSAGES_PUSHED.fetch_add(stored, Ordering::Relaxed);
    counters().push_messages.increment(stored);
}

/// What the per-item ack answer says that the counters need.
#[derive(Deserialize)]
struct AckAnswer<'a> {
    index: usize,
    success: bool,
    #[serde(borrow)]
    error: Option<std::borrow::Cow<'a, str>>,
    dlq: bool,
    noop: bool,
}

/// Ack item outcomes and errors of one request, counted before they are
/// added to the counters once per label.
#[derive(Debug, Default, PartialEq)]
pub struct AckTally {
    outcomes: [u64; ACK_OUTCOMES.len()],
    errors: [u64; ACK_ERRORS.len()],
}

impl AckTally {
    /// One group's answer (`ack_group`'s JSON array); `status(index)` is
    /// the normalised status the request gave item `index`. An answer that
    /// cannot be read counts nothing (the route passes it on regardless).
    pub fn add_answer<'s>(&mut self, answer: &str, status: impl Fn(usize) -> Option<&'s str>) {
        let mut facts = Vec::new();
        if !scan_ack_answer(answer, &mut facts) {
            // Not jsonb's layout after all: read it properly.
            let Some(parsed) = parse_ack_answer(answer) else {
                return;
            };
            facts = parsed;
        }
        for (index, success, dlq, noop, error) in facts {
            if let Some(outcome) = ack_outcome(status(index), success, dlq, noop) {
                self.outcomes[outcome] += 1;
            }
            if let Some(error) = error {
                self.errors[error] += 1;
            }
        }
    }

    /// A group whose call failed: each item answers `database error: ...`.
    pub fn add_failed_group(&mut self, items: usize) {
        self.errors[ack_error("database error")] += items as u64;
    }

    /// Items answered with an error so far.
    pub fn errors(&self) -> u64 {
        self.errors.iter().sum()
    }

    /// Adds the tally to the counters.
    pub fn record(&self) {
        let dlq = ACK_OUTCOMES
            .iter()
            .position(|o| *o == "dlq")
            .map_or(0, |i| self.outcomes[i]);
        crate::process::record_dead_lettered(dlq);
        let counters = counters();
        for (counter, n) in counters.ack_items.iter().zip(self.outcomes) {
            if n > 0 {
                counter.increment(n);
            }
        }
        for (counter, n) in counters.ack_errors.iter().zip(self.errors) {
            if n > 0 {
                counter.increment(n);
            }
        }
    }
}

/// (index, success, dlq, noop, error as an ACK_ERRORS index) of one item.
type ItemFacts = (usize, bool, bool, bool, Option<usize>);

/// The facts of an ack answer read with a full parse (the slow path, when
/// the answer is not in jsonb's key order); None when it is not an answer.
fn parse_ack_answer(answer: &str) -> Option<Vec<ItemFacts>> {
    let items = serde_json::from_str::<Vec<AckAnswer>>(answer).ok()?;
    Some(
        items
            .into_iter()
            .map(|i| {
                (
                    i.index,
                    i.success,
                    i.dlq,
                    i.noop,
                    i.error.map(|e| ack_error(&e)),
                )
            })
            .collect(),
    )
}

/// Reads an ack_group answer the way jsonb prints it, without building it:
/// jsonb orders keys by length, then bytes, so every item begins
/// `{"dlq": B, "noop": B, "error": null|"...", "index": N, "success": B`,
/// and the one string a client chose (`transactionId`) comes after. Inside a
/// string every `"` is escaped, so `{"dlq": ` only ever starts an item. False
/// when the text is not laid out so (the caller then parses it).
fn scan_ack_answer(answer: &str, facts: &mut Vec<ItemFacts>) -> bool {
    const START: &str = r#"{"dlq": "#;
    let mut rest = answer;
    while let Some(at) = rest.find(START) {
        let mut item = &rest[at + START.len()..];
        let Some(fact) = scan_item(&mut item) else {
            return false;
        };
        facts.push(fact);
        rest = item;
    }
    !facts.is_empty()
}

fn scan_item(s: &mut &str) -> Option<ItemFacts> {
    let dlq = scan_bool(s)?;
    *s = s.strip_prefix(r#", "noop": "#)?;
    let noop = scan_bool(s)?;
    *s = s.strip_prefix(r#", "error": "#)?;
    let error = if let Some(after) = s.strip_prefix("null") {
        *s = after;
        None
    } else {
        let text = s.strip_prefix('"')?;
        // docs/ack-contract.md §12's strings hold no `"`: an escaped one would
        // end the string early here, and the next strip_prefix declines.
        let end = text.find('"')?;
        let error = &text[..end];
        *s = &text[end + 1..];
        Some(ack_error(error))
    };
    *s = s.strip_prefix(r#", "index": "#)?;
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    let index = s[..digits].parse().ok()?;
    *s = s[digits..].strip_prefix(r#", "success": "#)?;
    let success = scan_bool(s)?;
    Some((index, success, dlq, noop, error))
}

fn scan_bool(s: &mut &str) -> Option<bool> {
    if let Some(after) = s.strip_prefix("true") {
        *s = after;
        Some(true)
    } else {
        *s = s.strip_prefix("false")?;
        Some(false)
    }
}

/// The outcome an answered item counts as (an index into ACK_OUTCOMES):
/// `noop` when it changed nothing, `dlq` when it dead-lettered its message,
/// else, when it succeeded, the status it asked for. A failure that did
/// change something (only a failed database call) has no outcome.
fn ack_outcome(status: Option<&str>, success: bool, dlq: bool, noop: bool) -> Option<usize> {
    let label = if noop {
        "noop"
    } else if dlq {
        "dlq"
    } else if success {
        status?
    } else {
        return None;
    };
    ACK_OUTCOMES.iter().position(|o| *o == label)
}

/// The ACK_ERRORS index of an answer's error string.
fn ack_error(error: &str) -> usize {
    let known = if error.starts_with("database error") {
        "database error"
    } else {
        error
    };
    ACK_ERRORS
        .iter()
        .position(|e| *e == known)
        .unwrap_or(ACK_ERRORS.len() - 1)
}

/// The process's resident and virtual size in bytes, from /proc/self/status
/// (`None` where there is no procfs).
pub fn memory() -> Option<(u64, u64)> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    Some((kb_field(&status, "VmRSS:")?, kb_field(&status, "VmSize:")?))
}

/// CPU time this process has used, user and system, in microseconds.
#[cfg(unix)]
pub fn cpu_times() -> Option<(u64, u64)> {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::uninit();
    // SAFETY: getrusage writes the whole struct when it answers 0.
    let usage = unsafe {
        if libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) != 0 {
            return None;
        }
        usage.assume_init()
    };
    let micros = |t: libc::timeval| {
        u64::try_from(t.tv_sec)
            .ok()?
            .checked_mul(1_000_000)?
            .checked_add(u64::try_from(t.tv_usec).ok()?)
    };
    Some((micros(usage.ru_utime)?, micros(usage.ru_stime)?))
}

#[cfg(not(unix))]
pub fn cpu_times() -> Option<(u64, u64)> {
    None
}

/// A `Name:   1234 kB` line of /proc/self/status, in bytes.
fn kb_field(status: &str, name: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with(name))?;
    let kb: u64 = line[name.len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tally(answer: &str, statuses: &[&'static str]) -> AckTally {
        let mut tally = AckTally::default();
        tally.add_answer(answer, |i| statuses.get(i).copied());
        tally
    }

    fn outcome(name: &str) -> usize {
        ACK_OUTCOMES.iter().position(|o| *o == name).unwrap()
    }

    fn error(name: &str) -> usize {
        ACK_ERRORS.iter().position(|e| *e == name).unwrap()
    }

    #[test]
    fn ack_items_count_by_outcome_and_error() {
        // As ack_group answers: jsonb's key order, one item per case.
        let answer = r#"[
            {"dlq": false, "noop": false, "error": null, "index": 0, "success": true, "leaseReleased": true, "transactionId": "a"},
            {"dlq": false, "noop": false, "error": null, "index": 1, "success": true, "leaseReleased": true, "transactionId": "b\"c"},
            {"dlq": true, "noop": false, "error": null, "index": 2, "success": true, "leaseReleased": true, "transactionId": "c"},
            {"dlq": false, "noop": true, "error": "invalid or expired lease", "index": 3, "success": false, "leaseReleased": false, "transactionId": "d"},
            {"dlq": false, "noop": true, "error": null, "index": 4, "success": true, "leaseReleased": true, "transactionId": "e"},
            {"dlq": false, "noop": false, "error": null, "index": 5, "success": true, "leaseReleased": true, "transactionId": "f"}
        ]"#;
        let t = tally(
            answer,
            &[
                "completed",
                "retry",
                "failed",
                "completed",
                "completed",
                "failed",
            ],
        );
        assert_eq!(t.outcomes[outcome("completed")], 1);
        assert_eq!(t.outcomes[outcome("retry")], 1);
        assert_eq!(t.outcomes[outcome("dlq")], 1);
        assert_eq!(t.outcomes[outcome("noop")], 2);
        assert_eq!(t.outcomes[outcome("failed")], 1);
        assert_eq!(t.errors[error("invalid or expired lease")], 1);
        assert_eq!(t.errors.iter().sum::<u64>(), 1);
    }

    #[test]
    fn the_scan_reads_what_a_parse_reads() {
        let answer = r#"[{"dlq": true, "noop": false, "error": null, "index": 7, "success": true, "leaseReleased": true, "transactionId": "{\"dlq\": false"},
            {"dlq": false, "noop": true, "error": "superseded by an earlier nack", "index": 12, "success": false, "leaseReleased": false, "transactionId": "x"}]"#;
        let mut facts = Vec::new();
        assert!(scan_ack_answer(answer, &mut facts));
        assert_eq!(Some(facts.clone()), parse_ack_answer(answer));
        assert_eq!(
            facts.len(),
            2,
            "the escaped pattern in a transactionId is no item"
        );
        // Another layout (keys reordered): the scan declines, the parse counts.
        let reordered =
            r#"[{"index": 0, "success": true, "error": null, "dlq": false, "noop": false}]"#;
        assert!(!scan_ack_answer(reordered, &mut Vec::new()));
        let t = tally(reordered, &["retry"]);
        assert_eq!(t.outcomes[outcome("retry")], 1);
    }

    #[test]
    fn errors_are_a_bounded_set() {
        assert_eq!(
            ack_error("transaction not found"),
            error("transaction not found")
        );
        assert_eq!(
            ack_error("database error: connection reset"),
            error("database error")
        );
        assert_eq!(ack_error("something new"), error("other"));
        let mut t = AckTally::default();
        t.add_failed_group(3);
        assert_eq!(t.errors[error("database error")], 3);
        // A failed call's item has no outcome; an unreadable answer counts nothing.
        assert_eq!(ack_outcome(Some("completed"), false, false, false), None);
        assert_eq!(tally("not json", &["completed"]), AckTally::default());
    }

    #[test]
    fn methods_outside_the_standard_set_share_a_label() {
        assert_eq!(method_label(&Method::GET), "GET");
        assert_eq!(method_label(&Method::from_bytes(b"BREW").unwrap()), "other");
    }

    /// What the hot path pays (run by hand: `cargo test -p gateway
    /// cost_of_recording -- --ignored --nocapture`; debug builds are slower).
    #[test]
    #[ignore]
    fn cost_of_recording() {
        install();
        let n = 100_000u32;
        let started = Instant::now();
        for i in 0..n {
            record_request(
                Some("/api/v1/pop/queue/{queue}".to_string()),
                &Method::GET,
                200 + (i % 2) as u16,
                Duration::from_micros(u64::from(i % 5000)),
            );
        }
        let per_request = started.elapsed() / n;
        let item = r#"{"dlq": false, "noop": false, "error": null, "index": 0, "success": true, "leaseReleased": true, "transactionId": "0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90"}"#;
        let answer = format!("[{}]", vec![item; 100].join(", "));
        let rounds = 2_000u32;
        let started = Instant::now();
        for _ in 0..rounds {
            let mut tally = AckTally::default();
            tally.add_answer(&answer, |_| Some("completed"));
            tally.record();
        }
        let per_ack = started.elapsed() / rounds;
        println!("per request: {per_request:?}; per 100-item ack answer: {per_ack:?}");
    }

    #[test]
    fn cpu_time_grows_with_work() {
        let (user, _) = cpu_times().expect("getrusage answers");
        let started = Instant::now();
        let mut x = 0u64;
        while started.elapsed() < Duration::from_millis(30) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        let (later, _) = cpu_times().unwrap();
        assert!(later > user, "{user} -> {later} after 30 ms of spinning");
    }

    #[test]
    fn proc_status_sizes_are_read_in_bytes() {
        let status = "Name:\tgateway\nVmSize:\t  123456 kB\nVmRSS:\t    2048 kB\n";
        assert_eq!(kb_field(status, "VmRSS:"), Some(2048 * 1024));
        assert_eq!(kb_field(status, "VmSize:"), Some(123456 * 1024));
        assert_eq!(kb_field(status, "VmSwap:"), None);
        let (rss, virt) = memory().expect("Linux has /proc/self/status");
        assert!(rss > 0 && virt >= rss);
    }
}
