//! Fuzzing every route of gateway/openapi.json with proptest: valid
//! requests with fields replaced by values of the wrong type, removed or
//! added; random JSON; random bytes; deep nesting; hostile strings in path
//! segments; random query strings (negative, enormous, non-numeric `batch`,
//! `timeout`, `partitions`, ...). Against a gateway with authentication off:
//!
//! - never a 5xx (not even 503: the database is up), and every answer is JSON;
//! - every 4xx is `{"error": "..."}` and changes nothing (the scene's digest
//!   is the same after it);
//! - afterwards the gateway is still healthy and never panicked.
//!
//! `FUZZ_CASES` overrides the default number of cases.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use pgcursor_tests::{client, Gateway};
use proptest::collection::{btree_map, vec};
use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{Map, Value};
use tokio::runtime::Runtime;

use crate::operations::{encode, operations, without_cluster_switches, Operation, Scene};

const DEFAULT_CASES: u32 = 600;
/// Long enough for any answer but a long-poll, which the cases never make.
const ANSWER_WITHIN: Duration = Duration::from_secs(20);
/// Longer URLs are refused by the HTTP client itself (the http crate's
/// limit); hostile.rs sends them raw.
const MAX_URL: usize = 60_000;

/// Field names the routes read, so mutations often hit a real field. The
/// retention options are left out on purpose: a fuzzed configure could set
/// a 1 s retention on a scene queue, and another test's housekeeping clock
/// would then change the digest under a 4xx.
const FIELDS: &[&str] = &[
    "queue",
    "partition",
    "payload",
    "transactionId",
    "traceId",
    "items",
    "partitionId",
    "leaseId",
    "status",
    "error",
    "consumerGroup",
    "acknowledgments",
    "operations",
    "type",
    "requiredLeases",
    "namespace",
    "task",
    "options",
    "leaseTime",
    "retryLimit",
    "deadLetterQueue",
    "dlqAfterMaxRetries",
    "delayedProcessing",
    "maxSize",
    "priority",
    "seconds",
];

/// Every query parameter of the document.
const QUERY: &[&str] = &[
    "batch",
    "partitions",
    "consumerGroup",
    "autoAck",
    "subscriptionMode",
    "subscriptionFrom",
    "wait",
    "timeout",
    "autopilot",
    "conflation",
    "namespace",
    "task",
    "queue",
    "partition",
    "from",
    "to",
    "limit",
    "offset",
];

const HOSTILE: &[&str] = &[
    "",
    " ",
    "\0",
    "a\0b",
    "-1",
    "0",
    "1",
    "2147483647",
    "2147483648",
    "-2147483649",
    "18446744073709551616",
    "99999999999999999999999",
    "1e400",
    "1.5",
    "-0",
    "NaN",
    "true",
    "false",
    "null",
    "[]",
    "{}",
    "'; DROP TABLE pgcursor.messages; --",
    "$$",
    "\\",
    "%",
    "%00",
    "..",
    "../..",
    "/",
    "?",
    "#",
    "é",
    "\u{1F600}",
    "\u{FEFF}",
    "\u{202E}",
    "now",
    "infinity",
    "2025-01-01T00:00:00Z",
    "99999-12-31",
    "all",
    "new",
    "__QUEUE_MODE__",
    "Default",
    "00000000-0000-0000-0000-000000000000",
    "0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90",
];

/// What the scene offers as plausible values.
#[derive(Clone, Debug)]
struct Names {
    prefix: String,
    known: Vec<String>,
}

fn hostile_string(names: &Names) -> BoxedStrategy<String> {
    let prefix = names.prefix.clone();
    prop_oneof![
        3 => select(names.known.clone()),
        2 => "[a-z0-9]{1,8}".prop_map(move |s| format!("{prefix}-{s}")),
        3 => select(HOSTILE).prop_map(str::to_string),
        2 => vec(any::<char>(), 0..24).prop_map(|c| c.into_iter().collect()),
        1 => any::<i64>().prop_map(|n| n.to_string()),
        // Past PostgreSQL's btree limit (2704 bytes), and random enough
        // not to be compressed below it.
        1 => "[a-zA-Z0-9é\u{1F600}]{1500,3000}",
    ]
    .boxed()
}

fn json_leaf(names: &Names) -> BoxedStrategy<Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from), // NaN and infinities become null
        select(vec![1e308, -1e308, 5e-324, -1.0, 0.5, 2147483648.0]).prop_map(Value::from),
        // Numbers past f64 and past PostgreSQL's numeric (the first two fit it).
        select(vec![
            "1e400",
            "-1e-400",
            "1e131072",
            "-1e-16384",
            "0e1073741823"
        ])
        .prop_map(|n| serde_json::from_str::<Value>(n).unwrap()),
        hostile_string(names).prop_map(Value::String),
    ]
    .boxed()
}

fn json_key(names: &Names) -> BoxedStrategy<String> {
    prop_oneof![3 => select(FIELDS).prop_map(str::to_string), 1 => hostile_string(names)].boxed()
}

fn json_value(names: &Names) -> BoxedStrategy<Value> {
    let key = json_key(names);
    json_leaf(names)
        .prop_recursive(4, 40, 6, move |inner| {
            prop_oneof![
                vec(inner.clone(), 0..6).prop_map(Value::Array),
                btree_map(key.clone(), inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
            ]
        })
        .boxed()
}

/// One change to a valid body; `at` picks a node (modulo their number).
#[derive(Clone, Debug)]
enum Mutation {
    Replace { at: usize, with: Value },
    Remove { at: usize },
    Insert { at: usize, key: String, with: Value },
}

#[derive(Clone, Debug)]
enum Body {
    /// The valid body (none for a route without one).
    Valid,
    Mutated(Vec<Mutation>),
    Json(Value),
    Bytes(Vec<u8>),
    /// `n` nested arrays around the valid body's first field.
    Deep(usize),
}

#[derive(Clone, Debug)]
enum Query {
    Valid,
    /// The valid pairs and then these (the gateway takes the last of a repeated key).
    Extra(Vec<(String, String)>),
    /// A raw query string, not percent-encoded by us.
    Raw(String),
}

#[derive(Clone, Debug)]
struct Case {
    op: usize,
    /// A replacement for each path parameter (`None`: the valid value).
    path: Vec<Option<String>>,
    query: Query,
    body: Body,
}

fn mutation(names: &Names) -> BoxedStrategy<Mutation> {
    prop_oneof![
        (any::<usize>(), json_value(names)).prop_map(|(at, with)| Mutation::Replace { at, with }),
        any::<usize>().prop_map(|at| Mutation::Remove { at }),
        (any::<usize>(), json_key(names), json_value(names))
            .prop_map(|(at, key, with)| Mutation::Insert { at, key, with }),
    ]
    .boxed()
}

fn body(names: &Names) -> BoxedStrategy<Body> {
    prop_oneof![
        1 => Just(Body::Valid),
        6 => vec(mutation(names), 1..4).prop_map(Body::Mutated),
        2 => json_value(names).prop_map(Body::Json),
        1 => vec(any::<u8>(), 0..64).prop_map(Body::Bytes),
        1 => (100usize..200).prop_map(Body::Deep),
    ]
    .boxed()
}

fn query_value(names: &Names) -> BoxedStrategy<String> {
    prop_oneof![
        3 => hostile_string(names),
        2 => any::<i64>().prop_map(|n| n.to_string()),
        1 => any::<u64>().prop_map(|n| format!("{n}{n}")),
        1 => select(vec!["true", "false", "TRUE", "1", "yes"]).prop_map(str::to_string),
    ]
    .boxed()
}

fn query(names: &Names) -> BoxedStrategy<Query> {
    let key = prop_oneof![4 => select(QUERY).prop_map(str::to_string), 1 => hostile_string(names)];
    prop_oneof![
        1 => Just(Query::Valid),
        4 => vec((key, query_value(names)), 1..6).prop_map(Query::Extra),
        // No `w`: a raw query can never spell wait=true (see tame_long_polls).
        1 => "[%&=;+?/ 0-9a-fA-FzZé\\x00]{0,40}".prop_map(Query::Raw),
    ]
    .boxed()
}

fn case(names: &Names, operations: usize) -> BoxedStrategy<Case> {
    (
        0..operations,
        vec(proptest::option::weighted(0.4, hostile_string(names)), 2),
        query(names),
        body(names),
    )
        .prop_map(|(op, path, query, body)| Case {
            op,
            path,
            query,
            body,
        })
        .boxed()
}

/// JSON pointers of every node of `value`, root first.
fn pointers(value: &Value, at: String, out: &mut Vec<String>) {
    out.push(at.clone());
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                let k = k.replace('~', "~0").replace('/', "~1");
                pointers(v, format!("{at}/{k}"), out);
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                pointers(v, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

fn mutate(mut body: Value, mutations: &[Mutation]) -> Value {
    for m in mutations {
        let mut all = Vec::new();
        pointers(&body, String::new(), &mut all);
        match m {
            Mutation::Replace { at, with } => {
                *body.pointer_mut(&all[at % all.len()]).unwrap() = with.clone();
            }
            Mutation::Remove { at } if all.len() > 1 => {
                let target = &all[1 + at % (all.len() - 1)];
                let (parent, last) = target.rsplit_once('/').unwrap();
                match body.pointer_mut(parent).unwrap() {
                    Value::Object(map) => {
                        map.remove(&last.replace("~1", "/").replace("~0", "~"));
                    }
                    Value::Array(items) => {
                        items.remove(last.parse::<usize>().unwrap());
                    }
                    _ => unreachable!("a parent is a container"),
                }
            }
            Mutation::Remove { .. } => {}
            Mutation::Insert { at, key, with } => {
                match body.pointer_mut(&all[at % all.len()]).unwrap() {
                    Value::Object(map) => {
                        map.insert(key.clone(), with.clone());
                    }
                    Value::Array(items) => items.push(with.clone()),
                    _ => {}
                }
            }
        }
    }
    body
}

/// The request a case makes: (path, query string, body bytes).
fn render(
    scene: &Scene,
    op: &Operation,
    dead_letter: &str,
    case: &Case,
) -> (String, String, Option<Vec<u8>>) {
    let mut replacement = case.path.iter();
    let path = op.fill(|name| match replacement.next().cloned().flatten() {
        Some(hostile) if acts_on_every_queue(op, name) => format!("{}-{hostile}", scene.prefix),
        Some(hostile) => hostile,
        None => scene.path_value(op, name, dead_letter),
    });
    let (valid_query, valid_body) = scene.valid_query_and_body(op);
    let query = match &case.query {
        Query::Valid => encode_pairs(&tame_long_polls(valid_query)),
        Query::Extra(extra) => {
            let mut pairs = valid_query;
            pairs.extend(extra.iter().cloned());
            encode_pairs(&tame_long_polls(pairs))
        }
        Query::Raw(raw) => raw.clone(),
    };
    let template = valid_body.unwrap_or_else(|| Value::Object(Map::new()));
    let body = match &case.body {
        Body::Valid if op.has_body => Some(template.to_string().into_bytes()),
        Body::Valid => None,
        Body::Mutated(m) => Some(mutate(template, m).to_string().into_bytes()),
        Body::Json(v) => Some(v.to_string().into_bytes()),
        Body::Bytes(b) => Some(b.clone()),
        Body::Deep(n) => {
            let first = template.as_object().and_then(|m| m.keys().next().cloned());
            let key = first.unwrap_or_else(|| "items".into());
            let inner = format!("{}{}", "[".repeat(*n), "]".repeat(*n));
            Some(format!("{{{}:{inner}}}", Value::String(key)).into_bytes())
        }
    };
    (path, query, body)
}

/// Deleting a group, or starting its subscriptions anew, acts on every
/// queue: a fuzzed `__QUEUE_MODE__` or `Default` there would delete or move
/// the cursors of tests running beside this one (a namespace pop elsewhere
/// then found its messages skipped). Such a group name is kept the scene's
/// own by its prefix; the hostile part still reaches the route.
fn acts_on_every_queue(op: &Operation, name: &str) -> bool {
    name == "group" && matches!(op.id.as_str(), "deleteConsumerGroup" | "updateSubscription")
}

/// A case must never wait out a long-poll: with `wait=true` anywhere, every
/// `timeout` is replaced by one of at most 200 ms.
fn tame_long_polls(mut pairs: Vec<(String, String)>) -> Vec<(String, String)> {
    if pairs.iter().any(|(k, v)| k == "wait" && v == "true") {
        pairs.retain(|(k, _)| k != "timeout");
        pairs.push(("timeout".into(), "200".into()));
    }
    pairs
}

pub fn encode_pairs(pairs: &[(String, String)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// Sends one case and checks the answer; Err describes the violation.
pub async fn check(
    gw: &Gateway,
    scene: &Scene,
    op: &Operation,
    (path, query, body): (String, String, Option<Vec<u8>>),
) -> Result<(u16, Value), String> {
    let url = match query.as_str() {
        "" => gw.url(&path),
        q => format!("{}?{q}", gw.url(&path)),
    };
    let mut request = client()
        .request(op.method.clone(), &url)
        .timeout(ANSWER_WITHIN);
    if let Some(body) = body.clone() {
        request = request
            .header("content-type", "application/json")
            .body(body);
    }
    if url.len() > MAX_URL {
        return Ok((0, Value::Null)); // the client could not send it
    }
    let before = scene.digest().await;
    let response = request
        .send()
        .await
        .map_err(|e| format!("no answer: {e:.300}"))?;
    let status = response.status().as_u16();
    let bytes = response
        .bytes()
        .await
        .map_err(|e| format!("no body: {e}"))?;
    let answer: Result<Value, _> = serde_json::from_slice(&bytes);
    let shown = String::from_utf8_lossy(&bytes[..bytes.len().min(300)]).to_string();
    let what = format!("{} {url:.300} -> {status} {shown}", op.method);
    if status >= 500 {
        return Err(format!("a 5xx: {what}"));
    }
    let Ok(answer) = answer else {
        if status < 300 && !op.json_success {
            return Ok((status, Value::Null)); // documented as text
        }
        return Err(format!("not JSON: {what}"));
    };
    if (400..500).contains(&status) {
        if !answer["error"].is_string() {
            return Err(format!("a 4xx without {{\"error\"}}: {what}"));
        }
        if let Err(changes) = before.unchanged(&scene.digest().await) {
            return Err(format!("a 4xx changed state: {what}{changes}"));
        }
    }
    Ok((status, answer))
}

#[test]
fn fuzzed_requests_never_5xx_and_a_4xx_changes_nothing() {
    let rt = Runtime::new().unwrap();
    // Its own housekeeping clock never runs during the test (see FIELDS).
    let gw = rt.block_on(Gateway::start_with(&[(
        "PGCURSOR_HOUSEKEEPING_SECONDS",
        "3600",
    )]));
    let (scene, operations, dead_letter) = rt.block_on(async {
        let scene = Scene::create(&gw, "fuzz", None).await;
        let operations = without_cluster_switches(operations(&gw).await);
        let dead_letter = scene.dead_letter().await;
        (scene, operations, dead_letter)
    });
    let names = Names {
        prefix: scene.prefix.clone(),
        known: vec![
            scene.queue.clone(),
            scene.namespace.clone(),
            "Default".into(),
            "other".into(),
            scene.partition_id.clone(),
            scene.transaction_id.clone(),
            scene.lease_id.clone(),
            dead_letter.clone(),
        ],
    };
    let cases = std::env::var("FUZZ_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(DEFAULT_CASES);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 200,
        ..Config::default()
    });
    let started = Instant::now();
    let statuses = RefCell::new(BTreeMap::<u16, usize>::new());
    let outcome = runner.run(&case(&names, operations.len()), |case| {
        let op = &operations[case.op];
        let request = render(&scene, op, &dead_letter, &case);
        let status = rt
            .block_on(check(&gw, &scene, op, request))
            .map_err(TestCaseError::fail)?
            .0;
        *statuses.borrow_mut().entry(status).or_default() += 1;
        Ok(())
    });
    if let Err(e) = outcome {
        panic!("{e}\ngateway log:\n{}", gw.stderr());
    }
    eprintln!(
        "fuzz: {cases} cases in {:.1?}, answers by status: {:?}",
        started.elapsed(),
        statuses.borrow()
    );
    let (status, _) = rt.block_on(crate::broker::get(&gw, "/health"));
    assert_eq!(status, 200, "the gateway is unhealthy after fuzzing");
    assert!(!gw.stderr().contains("panicked"), "{}", gw.stderr());
}
