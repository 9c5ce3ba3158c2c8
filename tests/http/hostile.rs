//! Hand-picked hostile inputs in every field of every route of
//! gateway/openapi.json: NUL characters, 1 MB strings, SQL-injection text,
//! enormous / negative / fractional numbers and ones past PostgreSQL's numeric
//! (compared with PostgreSQL itself), nesting 10,000 deep, duplicate
//! keys, invalid UTF-8, odd path segments. The rules are fuzz.rs's: never a
//! 5xx, every 4xx is `{"error"}` and changes nothing, the gateway survives.

use pgcursor_tests::{db, Gateway};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use uuid::Uuid;

use crate::broker::{get, post, send};
use crate::fuzz::{check, encode_pairs};
use crate::operations::{encode, operations, without_cluster_switches, Operation, Scene};

const INJECTIONS: [&str; 6] = [
    "'; DROP TABLE pgcursor.messages; --",
    "Robert'); DROP TABLE pgcursor.queues;--",
    "$$",
    "$1",
    "\\",
    "' OR '1'='1",
];

const NUMBERS: [&str; 10] = [
    "1e400",
    "-1e400",
    // Past PostgreSQL's numeric, which jsonb's numbers are (the property
    // test below tries the other limits, against PostgreSQL itself).
    UNSTORABLE,
    "18446744073709551616",
    "-9223372036854775809",
    "-1",
    "0",
    "1.5",
    "1e-400",
    "2147483648",
];

/// A gateway (authentication off) with a scene and the document's operations.
struct Bench {
    gw: Gateway,
    scene: Scene,
    db: tokio_postgres::Client,
    operations: Vec<Operation>,
    dead_letter: String,
}

/// Where a value goes in an otherwise valid request.
#[derive(Clone, Debug, PartialEq)]
enum Slot {
    /// Nowhere: the valid request itself.
    Nothing,
    Path(String),
    /// The index of a valid query pair.
    Query(usize),
    /// A JSON pointer into the valid body.
    Body(String),
}

impl Bench {
    async fn start() -> Bench {
        let gw = Gateway::start_with(&[("PGCURSOR_HOUSEKEEPING_SECONDS", "3600")]).await;
        let scene = Scene::create(&gw, "hostile", None).await;
        let operations = without_cluster_switches(operations(&gw).await);
        let dead_letter = scene.dead_letter().await;
        Bench {
            db: db().await,
            gw,
            scene,
            operations,
            dead_letter,
        }
    }

    /// Every slot of `op`'s valid request: path, query, and the body's leaves
    /// (only its strings when `strings_only`).
    fn slots(&self, op: &Operation, strings_only: bool) -> Vec<Slot> {
        let (query, body) = self.scene.valid_query_and_body(op);
        let mut slots: Vec<Slot> = op.path_params.iter().cloned().map(Slot::Path).collect();
        slots.extend((0..query.len()).map(Slot::Query));
        if let Some(body) = body {
            let mut leaves = Vec::new();
            body_leaves(&body, String::new(), strings_only, &mut leaves);
            slots.extend(leaves.into_iter().map(Slot::Body));
        }
        slots
    }

    /// What an error about `slot` calls it: the path parameter, the query
    /// parameter, or the body field (the last name in its pointer).
    fn slot_name(&self, op: &Operation, slot: &Slot) -> String {
        match slot {
            Slot::Nothing => String::new(),
            Slot::Path(name) => name.clone(),
            Slot::Query(i) => self.scene.valid_query_and_body(op).0[*i].0.clone(),
            Slot::Body(pointer) => pointer
                .rsplit('/')
                .find(|s| s.parse::<usize>().is_err())
                .unwrap_or_default()
                .to_string(),
        }
    }

    /// The valid request with `slot` set to `value`: a string for a path or
    /// query slot; for a body slot, raw JSON text when `raw`, else a string.
    fn render(
        &self,
        op: &Operation,
        slot: &Slot,
        value: &str,
        raw: bool,
    ) -> (String, String, Option<Vec<u8>>) {
        let scene = &self.scene;
        let path = op.fill(|name| match slot {
            Slot::Path(p) if p == name => value.to_string(),
            _ => scene.path_value(op, name, &self.dead_letter),
        });
        let (mut query, body) = scene.valid_query_and_body(op);
        if let Slot::Query(i) = slot {
            query[*i].1 = value.to_string();
        }
        let body = body.map(|mut body| match slot {
            Slot::Body(pointer) if raw => {
                *body.pointer_mut(pointer).unwrap() = json!(HOLE);
                body.to_string()
                    .replace(&json!(HOLE).to_string(), value)
                    .into_bytes()
            }
            Slot::Body(pointer) => {
                *body.pointer_mut(pointer).unwrap() = json!(value);
                body.to_string().into_bytes()
            }
            _ => body.to_string().into_bytes(),
        });
        (path, encode_pairs(&query), body)
    }

    /// Sends; panics on a 5xx, a non-JSON answer, or a 4xx that changed state.
    async fn expect_sane(
        &self,
        op: &Operation,
        request: (String, String, Option<Vec<u8>>),
    ) -> (u16, Value) {
        let shown = format!("{} {:.200}?{:.200}", op.method, request.0, request.1);
        match check(&self.gw, &self.scene, op, request).await {
            Ok(answer) => answer,
            Err(why) => panic!("{shown}: {why}"),
        }
    }

    /// The gateway is still healthy and never panicked; the tables are there.
    async fn finish(self) {
        let (status, body) = get(&self.gw, "/health").await;
        assert_eq!(status, 200, "{body}");
        assert!(
            !self.gw.stderr().contains("panicked"),
            "{}",
            self.gw.stderr()
        );
        assert_tables_exist(&self.db).await;
    }
}

const HOLE: &str = "\u{1}hole\u{1}";

/// JSON pointers of the leaves of `value` (strings only, if asked).
fn body_leaves(value: &Value, at: String, strings_only: bool, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => map
            .iter()
            .for_each(|(k, v)| body_leaves(v, format!("{at}/{k}"), strings_only, out)),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .for_each(|(i, v)| body_leaves(v, format!("{at}/{i}"), strings_only, out)),
        Value::String(_) => out.push(at),
        _ if !strings_only => out.push(at),
        _ => {}
    }
}

async fn assert_tables_exist(db: &tokio_postgres::Client) {
    for table in [
        "queues",
        "partitions",
        "messages",
        "transaction_index",
        "cursors",
        "dead_letters",
    ] {
        let row = db
            .query_one(
                "SELECT to_regclass($1) IS NOT NULL",
                &[&format!("pgcursor.{table}")],
            )
            .await
            .unwrap();
        assert!(row.get::<_, bool>(0), "pgcursor.{table} is gone");
    }
}

/// `len` bytes of letters that do not compress (so an index sees them all).
fn incompressible(len: usize) -> String {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (b'a' + (x % 26) as u8) as char
        })
        .collect()
}

#[tokio::test]
async fn nul_huge_and_injected_strings_in_every_string_field() {
    let bench = Bench::start().await;
    let prefix = &bench.scene.prefix;
    // Every value starts with the scene's prefix: whatever it creates is in the digest.
    let mut values = vec![format!("{prefix}a\0b"), format!("{prefix}\0")];
    values.extend(INJECTIONS.iter().map(|s| format!("{prefix}{s}")));
    // A URL is at most 64 KiB (the http crate), so 1 MB goes in bodies only.
    let huge = format!("{prefix}{}", incompressible(1 << 20));
    let long = format!("{prefix}{}", incompressible(30_000));
    for op in &bench.operations {
        for slot in bench.slots(op, true) {
            let big = if matches!(slot, Slot::Body(_)) {
                &huge
            } else {
                &long
            };
            for value in values.iter().chain([big]) {
                let request = bench.render(op, &slot, value, false);
                let (status, answer) = bench.expect_sane(op, request).await;
                // PostgreSQL holds no U+0000 and indexes no key past about
                // 2.7 kB: a 400 for either names the field. (A lookup may
                // answer 404; a flag such as deleteMetadata reads it as false.)
                if status == 400 && (value.contains('\0') || value.len() > 10_000) {
                    let name = bench.slot_name(op, &slot);
                    let error = answer["error"].as_str().unwrap_or_default();
                    assert!(
                        error.contains(&name),
                        "{} {}, {} bytes into {name}: {answer}",
                        op.method,
                        op.path,
                        value.len()
                    );
                }
            }
        }
    }
    bench.finish().await;
}

/// The one of NUMBERS PostgreSQL's numeric cannot hold.
const UNSTORABLE: &str = "1e131072";

#[tokio::test]
async fn enormous_negative_and_fractional_numbers_in_every_field() {
    let bench = Bench::start().await;
    for op in &bench.operations {
        for slot in bench.slots(op, false) {
            for number in NUMBERS {
                let raw = matches!(slot, Slot::Body(_));
                let request = bench.render(op, &slot, number, raw);
                let (status, answer) = bench.expect_sane(op, request).await;
                // In a body it is a number: one PostgreSQL cannot store is
                // refused, naming the field, before anything reads it. But
                // an ack's status, never stored: no status is a validation
                // error (docs/ack-contract.md §2), it is a failure.
                let name = bench.slot_name(op, &slot);
                if raw
                    && number == UNSTORABLE
                    && op.path.starts_with("/api/v1/ack")
                    && name.ends_with("status")
                {
                    assert_eq!(status, 200, "{} {name}: {answer}", op.path);
                } else if raw && number == UNSTORABLE {
                    let error = answer["error"].as_str().unwrap_or_default();
                    assert!(
                        status == 400 && error.contains(&name) && error.contains("cannot store"),
                        "{} {}, {number} in {name}: {status} {answer}",
                        op.method,
                        op.path
                    );
                }
            }
        }
    }
    bench.finish().await;
}

/// The gateway decodes no compression: a body sent with a Content-Encoding
/// other than identity is a 415 naming it, before anything reads it, on
/// every route with a body; with `identity` the same request succeeds.
#[tokio::test]
async fn a_compressed_body_is_a_415_naming_its_encoding() {
    let bench = Bench::start().await;
    for op in bench.operations.iter().filter(|op| op.has_body) {
        let (path, query, body) = bench.render(op, &Slot::Nothing, "", false);
        let url = match query.as_str() {
            "" => bench.gw.url(&path),
            q => format!("{}?{q}", bench.gw.url(&path)),
        };
        let body = body.unwrap();
        let send_as = |encoding: &'static str| {
            send(
                pgcursor_tests::client()
                    .request(op.method.clone(), &url)
                    .header("content-type", "application/json")
                    .header("content-encoding", encoding)
                    .body(body.clone()),
            )
        };
        let before = bench.scene.digest().await;
        let (status, answer) = send_as("gzip").await;
        assert_eq!(status, 415, "{} {path}: {answer}", op.method);
        assert_eq!(
            answer["error"],
            r#"Content-Encoding "gzip" is not supported: send the body uncompressed"#,
            "{} {path}",
            op.method
        );
        assert!(
            bench.scene.digest().await == before,
            "{} {path} changed something",
            op.method
        );
        let (status, answer) = send_as("identity").await;
        assert_eq!(
            status, op.success,
            "{} {path}, identity: {answer}",
            op.method
        );
    }
    bench.finish().await;
}

/// A string escaping half of a UTF-16 surrogate pair is JSON that
/// PostgreSQL's jsonb refuses (and serde_json's parse too, but not its raw
/// values, which push reads payloads as): a 400 wherever it is.
#[tokio::test]
async fn lone_surrogate_escapes_in_every_body_field() {
    let bench = Bench::start().await;
    for op in bench.operations.iter().filter(|op| op.has_body) {
        for slot in bench.slots(op, false) {
            if !matches!(slot, Slot::Body(_)) {
                continue;
            }
            for text in [r#""a\ud800b""#, r#""\udc00""#, r#"{"\ud83d": 1}"#] {
                let request = bench.render(op, &slot, text, true);
                let (status, answer) = bench.expect_sane(op, request).await;
                assert_eq!(status, 400, "{} {}, {text}: {answer}", op.method, op.path);
            }
        }
    }
    bench.finish().await;
}

/// Numbers on either side of PostgreSQL's numeric limits, as text.
fn boundary_number() -> impl Strategy<Value = String> {
    let anchors = prop_oneof![
        Just(0i64),
        Just(131071),
        Just(-16383),
        Just(1073741822),
        Just(-1073741822),
        -400i64..400,
    ];
    (
        any::<bool>(),
        prop_oneof![Just(String::from("0")), "[1-9][0-9]{0,4}"],
        prop_oneof![Just(String::new()), "[0-9]{1,6}", "0{0,4}[1-9]0{0,3}"],
        anchors,
        -3i64..=3,
        any::<bool>(),
    )
        .prop_map(|(minus, whole, fraction, anchor, delta, big_e)| {
            let sign = if minus { "-" } else { "" };
            let fraction = match fraction.is_empty() {
                true => fraction,
                false => format!(".{fraction}"),
            };
            let e = if big_e { "E" } else { "e" };
            format!("{sign}{whole}{fraction}{e}{}", anchor + delta)
        })
}

/// A payload number is refused exactly when PostgreSQL's own jsonb input
/// refuses it (asked on the database itself), naming the field; one it
/// accepts is stored as it reads it, and the push answers 200.
#[tokio::test]
async fn a_payload_number_is_refused_exactly_when_postgresql_cannot_store_it() {
    let bench = Bench::start().await;
    let queue = fresh(&bench, "numbers");
    let mut runner = TestRunner::default();
    let (mut stored, mut refused) = (0, 0);
    for _ in 0..300 {
        let number = boundary_number().new_tree(&mut runner).unwrap().current();
        let postgres = bench
            .db
            .query_one("SELECT $1::text::jsonb", &[&number])
            .await;
        let body = format!(r#"{{"items":[{{"queue":"{queue}","payload":{{"n":{number}}}}}]}}"#);
        let (status, answer) = send(
            pgcursor_tests::client()
                .post(bench.gw.url("/api/v1/push"))
                .header("content-type", "application/json")
                .body(body),
        )
        .await;
        match postgres {
            Ok(_) => {
                assert_eq!(status, 200, "{number} is stored by PostgreSQL: {answer}");
                let id = answer[0]["transactionId"].as_str().unwrap();
                let same: bool = bench
                    .db
                    .query_one(
                        "SELECT m.payload -> 'n' = $1::text::jsonb FROM pgcursor.messages m \
                         JOIN pgcursor.partitions p ON p.id = m.partition_id \
                         WHERE p.queue = $2 AND m.transaction_id = $3",
                        &[&number, &queue, &id],
                    )
                    .await
                    .unwrap()
                    .get(0);
                assert!(same, "{number} is stored as PostgreSQL reads it");
                stored += 1;
            }
            Err(e) => {
                assert_eq!(
                    status, 400,
                    "{number} is refused by PostgreSQL ({e}): {answer}"
                );
                let error = answer["error"].as_str().unwrap_or_default();
                assert!(
                    error.starts_with("body.items[0].payload.n is a number"),
                    "{error}"
                );
                refused += 1;
            }
        }
    }
    // Both sides of the limits were tried.
    assert!(
        stored > 30 && refused > 30,
        "{stored} stored, {refused} refused"
    );
    bench.finish().await;
}

#[tokio::test]
async fn pop_and_listing_counts_are_a_200_or_a_400_naming_the_parameter() {
    let bench = Bench::start().await;
    let values =
        NUMBERS
            .iter()
            .chain(&["", " 1", "+1", "0x10", "１", "18446744073709551615", "abc"]);
    let counted = ["batch", "partitions", "timeout", "limit", "offset"];
    for op in &bench.operations {
        for name in op
            .query_params
            .iter()
            .filter(|p| counted.contains(&p.as_str()))
        {
            for value in values.clone() {
                let (path, valid, _) = bench.render(op, &Slot::Nothing, "", false);
                // A fresh group always finds messages: a long-poll answers at
                // once. It replaces the scene's (a parameter may be given once).
                let group = Uuid::now_v7().to_string();
                let valid: Vec<&str> = valid
                    .split('&')
                    .filter(|pair| !pair.starts_with("consumerGroup="))
                    .collect();
                let mut query = format!(
                    "{}&consumerGroup={group}&{name}={}",
                    valid.join("&"),
                    encode(value)
                );
                if name == "timeout" {
                    query.push_str("&wait=true");
                }
                let (status, body) = bench
                    .expect_sane(op, (path.clone(), query.clone(), None))
                    .await;
                let shown = format!("{path}?{query}: {status} {body}");
                assert!(status == 200 || status == 400, "{shown}");
                if status == 400 {
                    let error = body["error"].as_str().unwrap_or_default();
                    assert!(error.contains(name.as_str()), "{shown}");
                }
                // The group goes: its rows on partitions its pop did not
                // claim are still to be written, and any gateway's
                // housekeeping (other tests run theirs on this database)
                // would write them during a later check's window.
                db().await
                    .execute("SELECT pgcursor.delete_consumer_group($1)", &[&group])
                    .await
                    .unwrap();
            }
        }
    }
    bench.finish().await;
}

/// Percent-escapes that do not decode to UTF-8 are a 400 naming where, in a
/// path or a query: decoded lossily (to U+FFFD) they named other things, and
/// a pop with `consumerGroup=%FF` made a group called "\u{FFFD}".
#[tokio::test]
async fn percent_escapes_that_are_not_utf8_are_a_400_naming_where() {
    let bench = Bench::start().await;
    let queue = bench.scene.queue.clone();
    let cases = [
        (
            format!("/api/v1/pop/queue/{queue}?batch=1&consumerGroup=%FF"),
            "query parameter consumerGroup is not UTF-8 once percent-decoded",
        ),
        (
            format!("/api/v1/pop/queue/{queue}%FF?batch=1"),
            "the path is not UTF-8 once percent-decoded",
        ),
        (
            format!("/api/v1/messages?queue={queue}%C3"),
            "query parameter queue is not UTF-8 once percent-decoded",
        ),
    ];
    for (target, error) in cases {
        let (status, body) = raw_request(&bench.gw, "GET", target.as_bytes()).await;
        let text = String::from_utf8_lossy(&body);
        assert_eq!(status, 400, "{target}: {text}");
        assert!(text.contains(error), "{target}: {text}");
    }
    let groups: i64 = bench
        .db
        .query_one(
            "SELECT (SELECT count(*) FROM pgcursor.cursors c JOIN pgcursor.partitions p \
                     ON p.id = c.partition_id WHERE p.queue = $1 AND c.consumer_group LIKE '%\u{FFFD}%') \
                  + (SELECT count(*) FROM pgcursor.subscriptions s \
                     WHERE s.queue = $1 AND s.consumer_group LIKE '%\u{FFFD}%')",
            &[&queue],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(groups, 0, "no group named with U+FFFD");
    // Proper UTF-8 still reads as itself.
    let (status, body) = get(
        &bench.gw,
        &format!("/api/v1/pop/queue/{queue}?batch=1&consumerGroup=caf%C3%A9"),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["consumerGroup"], "café", "{body}");
    bench
        .db
        .execute(
            "SELECT pgcursor.delete_consumer_group('café', $1, true)",
            &[&queue],
        )
        .await
        .unwrap();
    bench.finish().await;
}

/// A query parameter given twice is a 400 naming it, and changes nothing:
/// read into a map, the last one won, so a pop with
/// `consumerGroup=a&consumerGroup=b` consumed as group b.
#[tokio::test]
async fn a_repeated_query_parameter_is_a_400_naming_it() {
    let bench = Bench::start().await;
    let queue = bench.scene.queue.clone();
    let cases = [
        (
            format!("/api/v1/pop/queue/{queue}?consumerGroup=a&consumerGroup=b&autoAck=true"),
            "consumerGroup",
        ),
        (
            format!("/api/v1/pop/queue/{queue}?consumer%47roup=a&consumerGroup=b&autoAck=true"),
            "consumerGroup",
        ),
        (
            format!("/api/v1/pop/queue/{queue}?batch=1&autoAck=true&batch=1000"),
            "batch",
        ),
        (format!("/api/v1/messages?queue={queue}&queue=x"), "queue"),
    ];
    for (target, name) in cases {
        let (status, body) = get(&bench.gw, &target).await;
        assert_eq!(status, 400, "{target}: {body}");
        assert_eq!(
            body,
            json!({"error": format!("query parameter {name} is given more than once")}),
            "{target}"
        );
    }
    bench.finish().await;
}

/// A push payload nests as deep as any body may (127 arrays and objects from
/// the body's top, so 124 in the payload), though push passes payloads on
/// unparsed: one level more is a 400 saying so, not PostgreSQL's own limit
/// (a 500 "stack depth limit exceeded" near 10,000) or a message stored.
#[tokio::test]
async fn a_push_payload_nests_at_most_as_deep_as_any_body() {
    let bench = Bench::start().await;
    let queue = fresh(&bench, "deep");
    for (levels, status) in [(124, 200), (125, 400), (20_000, 400)] {
        let payload = format!("{}{}", "[".repeat(levels), "]".repeat(levels));
        let body = format!(r#"{{"items":[{{"queue":"{queue}","payload":{payload}}}]}}"#);
        let (got, answer) = send(
            pgcursor_tests::client()
                .post(bench.gw.url("/api/v1/push"))
                .header("content-type", "application/json")
                .body(body),
        )
        .await;
        assert_eq!(got, status, "a payload {levels} deep: {answer}");
        if status == 400 {
            let error = answer["error"].as_str().unwrap_or_default();
            assert!(
                error.starts_with("request body nests more than 127"),
                "{error}"
            );
        }
    }
    let stored: i64 = bench
        .db
        .query_one(
            "SELECT count(*) FROM pgcursor.messages m JOIN pgcursor.partitions p \
             ON p.id = m.partition_id WHERE p.queue = $1",
            &[&queue],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(stored, 1, "only the payload 124 deep is stored");
    bench.finish().await;
}

#[tokio::test]
async fn deep_nesting_duplicate_keys_and_invalid_utf8_bodies() {
    let bench = Bench::start().await;
    let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
    for op in bench.operations.iter().filter(|op| op.has_body) {
        let (path, query, valid) = bench.render(op, &Slot::Nothing, "", false);
        let valid = String::from_utf8(valid.unwrap()).unwrap();
        let first_key = serde_json::from_str::<Value>(&valid)
            .unwrap()
            .as_object()
            .unwrap()
            .keys()
            .next()
            .unwrap()
            .clone();
        let refused: Vec<Vec<u8>> = vec![
            deep(10_000).into_bytes(),
            format!("{{{}:{}}}", json!(first_key), deep(10_000)).into_bytes(),
            b"{\"queue\": \"\xff\xfe\"}".to_vec(),
            (0..=255u8).collect(),
            b"\xef\xbb\xbf{}".to_vec(), // a byte-order mark
        ];
        for body in refused {
            let (status, answer) = bench
                .expect_sane(op, (path.clone(), query.clone(), Some(body)))
                .await;
            assert_eq!(status, 400, "{} {path}: {answer}", op.method);
        }
        // The last of two equal keys wins, as in PostgreSQL's jsonb.
        let duplicated = format!("{{{}:12345,{}", json!(first_key), &valid[1..]);
        let (status, answer) = bench
            .expect_sane(
                op,
                (path.clone(), query.clone(), Some(duplicated.into_bytes())),
            )
            .await;
        assert_eq!(
            status, op.success,
            "{} {path}, a duplicate {first_key}: {answer}",
            op.method
        );
    }
    let (a, b) = (fresh(&bench, "a"), fresh(&bench, "b"));
    let body = format!(r#"{{"queue": "{a}", "queue": "{b}"}}"#);
    let (status, answer) = send(
        pgcursor_tests::client()
            .post(bench.gw.url("/api/v1/configure"))
            .body(body),
    )
    .await;
    assert_eq!((status, &answer["queue"]), (200, &json!(b)), "{answer}");
    bench.finish().await;
}

fn fresh(bench: &Bench, label: &str) -> String {
    format!("{}-{label}-{}", bench.scene.prefix, Uuid::now_v7())
}

/// One request written by hand, for what an HTTP client would refuse or
/// normalise (`..`, raw bytes): (status, body). Status 0: no answer at all.
async fn raw_request(gw: &Gateway, method: &str, target: &[u8]) -> (u16, Vec<u8>) {
    let address = gw.base.trim_start_matches("http://");
    let mut stream = TcpStream::connect(address).await.unwrap();
    let mut request = format!("{method} ").into_bytes();
    request.extend_from_slice(target);
    request.extend_from_slice(
        b" HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    );
    if stream.write_all(&request).await.is_err() {
        return (0, vec![]);
    }
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer).await; // a reset after the answer is fine
    let text = String::from_utf8_lossy(&answer);
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = match answer.windows(4).position(|w| w == b"\r\n\r\n") {
        Some(at) => answer[at + 4..].to_vec(),
        None => vec![],
    };
    (status, body)
}

#[tokio::test]
async fn odd_path_segments_are_answered_not_followed() {
    let bench = Bench::start().await;
    let segments: Vec<Vec<u8>> = vec![
        b"%00".to_vec(),
        b"a%00b".to_vec(),
        b"..".to_vec(),
        b".".to_vec(),
        b"%2e%2e".to_vec(),
        b"%2F".to_vec(),
        b"a%2F..%2Fb".to_vec(),
        b"%".to_vec(),
        b"%zz".to_vec(),
        b"%ff%fe".to_vec(),
        b"%E2%80%AE".to_vec(),
        encode(&format!(
            "{}'; DROP TABLE pgcursor.messages; --",
            bench.scene.prefix
        ))
        .into_bytes(),
        incompressible(10_000).into_bytes(),
    ];
    for op in bench
        .operations
        .iter()
        .filter(|op| !op.path_params.is_empty())
    {
        for (i, segment) in segments.iter().enumerate() {
            for name in &op.path_params {
                let before = bench.scene.digest().await;
                let path = op.fill(|p| {
                    if p == name {
                        "\u{1}".into() // a placeholder, replaced by the raw bytes below
                    } else {
                        bench.scene.path_value(op, p, &bench.dead_letter)
                    }
                });
                let target = path.replace("%01", &String::from_utf8_lossy(segment));
                let (status, body) =
                    raw_request(&bench.gw, op.method.as_str(), target.as_bytes()).await;
                let shown = format!("{} {:.200} ({i})", op.method, target);
                assert!((200..500).contains(&status), "{shown}: {status}");
                if status >= 400 {
                    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    assert!(body["error"].is_string(), "{shown}: {status} {body}");
                    if let Err(changes) = before.unchanged(&bench.scene.digest().await) {
                        panic!("{shown} changed state:{changes}");
                    }
                }
            }
        }
    }
    // Outside the app: the HTTP layer refuses these before routing, with a
    // bare 400 (a URI over 64 KiB, raw non-ASCII or NUL bytes) or by closing
    // the connection (a head over 128 KiB).
    for target in [
        format!("/api/v1/resources/queues/{}", incompressible(70_000)).into_bytes(),
        format!("/api/v1/resources/queues/{}", incompressible(1 << 20)).into_bytes(),
        b"/api/v1/resources/queues/\xff\xfe".to_vec(),
        b"/api/v1/resources/queues/a\x00b".to_vec(),
    ] {
        let (status, _) = raw_request(&bench.gw, "GET", &target).await;
        assert!(status == 0 || (400..500).contains(&status), "{status}");
    }
    bench.finish().await;
}

#[tokio::test]
async fn sql_injection_names_are_stored_as_data() {
    let gw = Gateway::start().await;
    for name in INJECTIONS {
        let name = format!("{name} {}", Uuid::now_v7()); // unique, the text intact
        let (status, answer) = post(&gw, "/api/v1/configure", &json!({"queue": name})).await;
        assert_eq!((status, &answer["queue"]), (200, &json!(name)), "{answer}");
        let item = json!({"items": [{"queue": name, "partition": name, "payload": name}]});
        assert_eq!(post(&gw, "/api/v1/push", &item).await.0, 200);
        let (status, popped) = get(&gw, &format!("/api/v1/pop/queue/{}", encode(&name))).await;
        assert_eq!(status, 200, "{popped}");
        assert_eq!(popped["messages"][0]["payload"], json!(name), "{popped}");
        assert_eq!(popped["partition"], json!(name), "{popped}");
        let detail = format!("/api/v1/resources/queues/{}", encode(&name));
        let (status, answer) = get(&gw, &detail).await;
        assert_eq!((status, &answer["queue"]), (200, &json!(name)), "{answer}");
        let deleted = send(pgcursor_tests::client().delete(gw.url(&detail))).await;
        assert_eq!(deleted, (200, json!({"deleted": true, "queue": name})));
    }
    assert_tables_exist(&db().await).await;
}
