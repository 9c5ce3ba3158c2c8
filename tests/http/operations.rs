//! The ONE table of routes: the gateway's own `GET /openapi.json`
//! (gateway/openapi.json). The access matrix and the fuzz tests walk its
//! operations, so a new route cannot be left out of them. This module reads
//! the document, builds a valid minimal request for every operation against
//! a `Scene`, and fingerprints the scene's rows to prove a refused request
//! changed nothing.

use pgcursor_tests::{client, db, Gateway};
use reqwest::{Method, RequestBuilder};
use serde_json::{json, Value};
use uuid::Uuid;

use crate::broker::{fresh_queue, send};

/// `x-access-level`, in order: a higher level includes the lower.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Access {
    None,
    ReadOnly,
    ReadWrite,
    Admin,
}

impl Access {
    fn parse(s: &str) -> Access {
        match s {
            "none" => Access::None,
            "read-only" => Access::ReadOnly,
            "read-write" => Access::ReadWrite,
            "admin" => Access::Admin,
            other => panic!("unknown x-access-level {other:?}"),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Access::None => "none",
            Access::ReadOnly => "read-only",
            Access::ReadWrite => "read-write",
            Access::Admin => "admin",
        }
    }
}

/// One operation of the document.
#[derive(Clone, Debug)]
pub struct Operation {
    pub id: String,
    pub method: Method,
    /// The template, e.g. `/api/v1/resources/queues/{queue}`.
    pub path: String,
    pub access: Access,
    pub path_params: Vec<String>,
    pub query_params: Vec<String>,
    pub has_body: bool,
    /// The documented success status (the lowest 2xx response; 201 for a trace).
    pub success: u16,
    /// Whether that success answer is JSON (the Prometheus exposition is text).
    pub json_success: bool,
}

impl Operation {
    /// The path with each `{name}` replaced by `value(name)`, percent-encoded.
    pub fn fill(&self, mut value: impl FnMut(&str) -> String) -> String {
        self.path
            .split('/')
            .map(|segment| match segment.strip_prefix('{') {
                Some(name) => encode(&value(name.trim_end_matches('}'))),
                None => segment.to_string(),
            })
            .collect::<Vec<_>>()
            .join("/")
    }
}

/// Percent-encodes everything but RFC 3986's unreserved characters.
pub fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The served document's operations (the route needs no token).
pub async fn operations(gw: &Gateway) -> Vec<Operation> {
    let (status, doc) = send(client().get(gw.url("/openapi.json"))).await;
    assert_eq!(status, 200, "GET /openapi.json: {doc}");
    let resolve = |p: &Value| -> Value {
        match p["$ref"].as_str() {
            Some(r) => doc.pointer(r.trim_start_matches('#')).unwrap().clone(),
            None => p.clone(),
        }
    };
    let mut operations = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("a path item") {
            let params: Vec<Value> = op["parameters"]
                .as_array()
                .map(|ps| ps.iter().map(resolve).collect())
                .unwrap_or_default();
            let names = |place: &str| -> Vec<String> {
                params
                    .iter()
                    .filter(|p| p["in"] == place)
                    .map(|p| p["name"].as_str().unwrap().to_string())
                    .collect()
            };
            let success: u16 = op["responses"]
                .as_object()
                .into_iter()
                .flat_map(|r| r.keys())
                .filter_map(|code| code.parse().ok())
                .filter(|code| (200..300).contains(code))
                .min()
                .unwrap_or(200);
            let json_success = op["responses"][success.to_string()]["content"]
                .as_object()
                .is_none_or(|types| types.contains_key("application/json"));
            operations.push(Operation {
                id: op["operationId"].as_str().expect("operationId").to_string(),
                method: method.to_uppercase().parse().expect("an HTTP method"),
                path: path.clone(),
                access: Access::parse(op["x-access-level"].as_str().unwrap_or_default()),
                path_params: names("path"),
                query_params: names("query"),
                has_body: op.get("requestBody").is_some(),
                success,
                json_success,
            });
        }
    }
    assert!(operations.len() > 10, "too few operations: {operations:?}");
    operations
}

/// A request about to be sent: the path already filled in.
#[derive(Clone, Debug)]
pub struct Call {
    pub method: Method,
    pub path: String,
    pub query: Vec<(String, String)>,
    pub body: Option<Vec<u8>>,
}

impl Call {
    pub fn builder(&self, gw: &Gateway, token: Option<&str>) -> RequestBuilder {
        let mut url = gw.url(&self.path);
        if !self.query.is_empty() {
            let pairs: Vec<String> = self
                .query
                .iter()
                .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
                .collect();
            url = format!("{url}?{}", pairs.join("&"));
        }
        let mut builder = client().request(self.method.clone(), url);
        if let Some(t) = token {
            builder = builder.bearer_auth(t);
        }
        if let Some(body) = &self.body {
            builder = builder
                .header("content-type", "application/json")
                .body(body.clone());
        }
        builder
    }
}

/// A queue of our own with messages in two partitions, a live lease, a
/// namespace; every queue name it makes starts with `prefix`, so `digest`
/// sees exactly its rows while other tests share the database.
pub struct Scene {
    pub prefix: String,
    pub queue: String,
    pub namespace: String,
    pub partition_id: String,
    pub transaction_id: String,
    pub lease_id: String,
    /// The gateway and the token that set things up (None: authentication off).
    base: String,
    setup_token: Option<String>,
    /// The scene's own connection, and `digest`'s statement prepared on it.
    db: tokio_postgres::Client,
    digest_query: tokio_postgres::Statement,
}

impl Scene {
    pub async fn create(gw: &Gateway, label: &str, setup_token: Option<&str>) -> Scene {
        let prefix = fresh_queue(label);
        let db = db().await;
        let digest_query = db.prepare(DIGEST).await.expect("prepare the digest");
        let mut scene = Scene {
            queue: format!("{prefix}-q"),
            namespace: format!("{prefix}-ns"),
            prefix,
            partition_id: String::new(),
            transaction_id: String::new(),
            lease_id: String::new(),
            base: gw.base.clone(),
            setup_token: setup_token.map(str::to_string),
            db,
            digest_query,
        };
        let configure = json!({"queue": scene.queue, "namespace": scene.namespace});
        scene
            .expect_ok(Method::POST, "/api/v1/configure", configure)
            .await;
        let items: Vec<Value> = (1..=6)
            .map(|i| {
                let partition = if i % 2 == 0 { "Default" } else { "other" };
                json!({"queue": scene.queue, "partition": partition,
                       "transactionId": format!("tx-{i}"), "payload": {"i": i}})
            })
            .collect();
        let pushed = scene
            .expect_ok(Method::POST, "/api/v1/push", json!({ "items": items }))
            .await;
        scene.partition_id = pushed[1]["partitionId"].as_str().unwrap().into();
        scene.transaction_id = "tx-2".into();
        let pop = format!("/api/v1/pop/queue/{}/partition/Default", scene.queue);
        let popped = scene.expect_ok(Method::GET, &pop, Value::Null).await;
        scene.lease_id = popped["leaseId"].as_str().expect("a lease").into();
        scene
    }

    /// Sends with the setup token and asserts a 200.
    async fn expect_ok(&self, method: Method, path: &str, body: Value) -> Value {
        let mut request = client().request(method.clone(), format!("{}{path}", self.base));
        if let Some(t) = &self.setup_token {
            request = request.bearer_auth(t);
        }
        if !body.is_null() {
            request = request.json(&body);
        }
        let (status, answer) = send(request).await;
        assert_eq!(status, 200, "{method} {path}: {answer}");
        answer
    }

    /// A fresh dead letter of the scene's queue (its id).
    pub async fn dead_letter(&self) -> String {
        self.dead_letter_of_message().await.0
    }

    /// A fresh dead letter of the scene's queue: (its id, its message's
    /// partitionId, its message's transactionId).
    pub async fn dead_letter_of_message(&self) -> (String, String, String) {
        let txid = format!("dead-{}", Uuid::now_v7());
        let push = json!({"items": [{"queue": self.queue, "partition": "dead",
                                      "transactionId": txid, "payload": "poison"}]});
        let pushed = self.expect_ok(Method::POST, "/api/v1/push", push).await;
        let partition_id = &pushed[0]["partitionId"];
        let ack = json!({"transactionId": txid, "partitionId": partition_id,
                         "consumerGroup": "scene-dlq", "status": "dlq"});
        let acked = self.expect_ok(Method::POST, "/api/v1/ack", ack).await;
        assert_eq!(acked[0]["dlq"], true, "{acked}");
        let row = self
            .db
            .query_one(
                "SELECT id::text FROM pgcursor.dead_letters
                  WHERE partition_id = $1::text::uuid AND transaction_id = $2",
                &[&partition_id.as_str().unwrap(), &txid],
            )
            .await
            .unwrap();
        let partition_id = partition_id.as_str().unwrap().to_string();
        (row.get(0), partition_id, txid)
    }

    /// A fresh message of the scene's queue, for a request that deletes it:
    /// (partitionId, transactionId).
    pub async fn doomed_message(&self) -> (String, String) {
        let txid = format!("doomed-{}", Uuid::now_v7());
        let push = json!({"items": [{"queue": self.queue, "partition": "doomed",
                                      "transactionId": txid, "payload": "bye"}]});
        let pushed = self.expect_ok(Method::POST, "/api/v1/push", push).await;
        (pushed[0]["partitionId"].as_str().unwrap().to_string(), txid)
    }

    /// A valid minimal request for `op` that should answer 200 for a caller
    /// allowed to make it.
    pub async fn valid_call(&self, op: &Operation) -> Call {
        let dead_letter = if op.path_params.iter().any(|p| p == "id") {
            self.dead_letter().await // a requeue consumes its dead letter
        } else {
            String::new()
        };
        // Deleting or retrying a message consumes it: each call its own.
        let message = match op.id.as_str() {
            "deleteMessage" => Some(self.doomed_message().await),
            "retryMessage" => {
                let (_, pid, txid) = self.dead_letter_of_message().await;
                Some((pid, txid))
            }
            _ => None,
        };
        let (query, body) = self.valid_query_and_body(op);
        Call {
            method: op.method.clone(),
            path: op.fill(|name| match (&message, name) {
                (Some((pid, _)), "partitionId") => pid.clone(),
                (Some((_, txid)), "transactionId") => txid.clone(),
                _ => self.path_value(op, name, &dead_letter),
            }),
            query,
            body: body.map(|b| b.to_string().into_bytes()),
        }
    }

    /// A valid value for one path parameter (`dead_letter`: an id for `{id}`).
    pub fn path_value(&self, op: &Operation, name: &str, dead_letter: &str) -> String {
        match (op.id.as_str(), name) {
            // Never the scene's own queue; deleting an unknown queue is a 200.
            ("deleteQueue", "queue") => format!("{}-doomed-{}", self.prefix, Uuid::now_v7()),
            // Deleting a group that never existed is a 200 and leaves the scene's groups be.
            ("deleteConsumerGroup" | "deleteConsumerGroupOnQueue", "group") => {
                format!("{}-doomed-{}", self.prefix, Uuid::now_v7())
            }
            // The scene's own: a subscription update acts on every queue.
            (_, "group") => format!("{}-seeks", self.prefix),
            (_, "queue") => self.queue.clone(),
            (_, "partition") => "Default".into(),
            (_, "partitionId") => self.partition_id.clone(),
            (_, "transactionId") => self.transaction_id.clone(),
            (_, "leaseId") => self.lease_id.clone(),
            (_, "id") => dead_letter.into(),
            (_, "traceName") => format!("{}-trace", self.prefix),
            (id, other) => panic!("{id}: no value for path parameter {other}"),
        }
    }

    /// The query and body of a valid request. Panics for an operation it
    /// does not know yet: a new route must be given one here.
    pub fn valid_query_and_body(&self, op: &Operation) -> (Vec<(String, String)>, Option<Value>) {
        // Every optional string field is given, so the hostile tests reach it.
        let ack = json!({"transactionId": self.transaction_id, "partitionId": self.partition_id,
                         "leaseId": null, "consumerGroup": "scene-acks", "status": "completed",
                         "error": "none"});
        let item = json!({"queue": self.queue, "partition": "Default", "payload": {"n": "x"},
                          "transactionId": "scene-push", "traceId": Uuid::nil()});
        let (query, body): (Vec<(&str, &str)>, Option<Value>) = match op.id.as_str() {
            "openapi" | "health" | "metrics" | "prometheusMetrics" | "dashboard"
            | "dashboardScript" | "dashboardStyle" | "queueDetail" | "deleteQueue" | "overview"
            | "partitionCursors" | "message" | "requeueDeadLetter" => (vec![], None),
            "listMessages" => (vec![("queue", &self.queue)], None),
            "deleteMessage" | "retryMessage" | "messageTraces" => (vec![], None),
            "recordTrace" => (
                vec![],
                Some(
                    json!({"transactionId": self.transaction_id, "partitionId": self.partition_id,
                            "data": {"text": "scene"}, "eventType": "info",
                            "consumerGroup": "scene-traces",
                            "traceNames": [format!("{}-trace", self.prefix)]}),
                ),
            ),
            "tracesByName" | "traceNames" => (vec![("limit", "10"), ("offset", "0")], None),
            "listNamespaces" | "listTasks" => (vec![], None),
            "status" | "statusAnalytics" => (
                vec![
                    ("interval", "hour"),
                    ("from", "2026-01-01T00:00:00Z"),
                    ("to", "2026-01-01T01:00:00Z"),
                    ("queue", &self.queue),
                    ("namespace", &self.namespace),
                    ("task", "scene-task"),
                ],
                None,
            ),
            "statusQueues" => (
                vec![
                    ("namespace", &self.namespace),
                    ("task", "scene-task"),
                    ("limit", "10"),
                    ("offset", "0"),
                ],
                None,
            ),
            "statusQueue" | "analyticsPostgresStats" => (vec![], None),
            "statusQueueMessages" => (vec![("limit", "10"), ("offset", "0")], None),
            "analyticsQueueOps"
            | "analyticsQueueLag"
            | "analyticsRetention"
            | "analyticsQueueParkedReplicas" => (vec![("queue", &self.queue)], None),
            "analyticsSystemMetrics" | "analyticsWorkerMetrics" => (vec![], None),
            "listQueues" => (
                vec![
                    ("search", &self.queue),
                    ("namespace", &self.namespace),
                    ("task", "scene-task"),
                    ("limit", "10"),
                    ("offset", "0"),
                ],
                None,
            ),
            "configure" => (
                vec![],
                Some(json!({"queue": self.queue, "namespace": self.namespace,
                            "task": "scene-task", "options": {"leaseTime": 300}})),
            ),
            "push" => (vec![], Some(json!({ "items": [item] }))),
            "popQueue" | "popPartition" => (vec![("consumerGroup", "scene-pops")], None),
            "popSelected" => (
                vec![
                    ("namespace", &self.namespace),
                    ("consumerGroup", "scene-pops"),
                ],
                None,
            ),
            "extendLease" => (vec![], Some(json!({"seconds": 60}))),
            "ack" => (vec![], Some(ack)),
            "ackBatch" => (
                vec![],
                Some(json!({"consumerGroup": "scene-acks", "acknowledgments": [ack]})),
            ),
            "transaction" => (
                vec![],
                Some(json!({"operations": [
                    merge(json!({"type": "ack"}), &ack),
                    {"type": "push", "items": [item]}]})),
            ),
            "listDeadLetters" => (vec![("queue", &self.queue)], None),
            "listLeases" => (vec![("queue", &self.queue), ("limit", "10")], None),
            "getMaintenance" | "getPopMaintenance" => (vec![], None),
            "listConsumerGroups" | "describeConsumerGroup" | "seekPartition" | "refreshStats" => {
                (vec![], None)
            }
            "laggingPartitions" => (vec![("minLagSeconds", "60")], None),
            "deleteConsumerGroup" | "deleteConsumerGroupOnQueue" => {
                (vec![("deleteMetadata", "true")], None)
            }
            "updateSubscription" => (
                vec![],
                Some(json!({"subscriptionTimestamp": "2026-01-01T00:00:00Z"})),
            ),
            "seekConsumerGroup" => (vec![], Some(json!({"toEnd": true}))),
            // Off, never on: the flags are cluster-wide and other tests push and pop.
            "setMaintenance" | "setPopMaintenance" => (vec![], Some(json!({"enabled": false}))),
            other => panic!(
                "no valid request known for operation {other}: add one to tests/http/operations.rs"
            ),
        };
        let query = query
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        (query, body)
    }

    /// A fingerprint of every row that belongs to the scene's queues:
    /// queues, partitions (head), message and transaction-index counts per
    /// partition, where each group stands (cursor, lease, retry counter,
    /// totals; from `cursor_rows()`, so housekeeping writing the rows a
    /// group's first pop left unwritten changes nothing), dead letters and
    /// trace events per partition.
    pub async fn digest(&self) -> Digest {
        let rows = self
            .db
            .query(&self.digest_query, &[&self.prefix])
            .await
            .expect("digest");
        Digest(rows.iter().map(|r| r.get(0)).collect())
    }
}

/// `Scene::digest`'s query, prepared once per scene: the fuzz and the
/// hostile sweeps read a digest around each of thousands of requests, and
/// planning it anew each time was 3 of its 10 ms once the tests beside them
/// had filled the database (psql: 10-11 ms unprepared, 7 ms on the generic
/// plan PostgreSQL settles on after five runs). (Joins, not a count per
/// partition in a sub-select: Citus plans no correlated sub-select beside
/// a CTE.)
const DIGEST: &str = "
    WITH q AS (SELECT * FROM pgcursor.queues WHERE starts_with(name, $1)),
         p AS (SELECT p.*, h.head FROM pgcursor.partitions p JOIN q ON q.name = p.queue
                JOIN pgcursor.partition_heads h ON h.partition_id = p.id)
    SELECT x FROM (
        SELECT 'q' || q::text FROM q
        UNION ALL SELECT 'p' || p::text FROM p
        UNION ALL SELECT format('m %s %s %s', p.id, count(m.*), max(m.msg_offset))
          FROM p LEFT JOIN pgcursor.messages m ON m.partition_id = p.id GROUP BY p.id
        UNION ALL SELECT format('t %s %s', p.id, count(t.*))
          FROM p LEFT JOIN pgcursor.transaction_index t ON t.partition_id = p.id GROUP BY p.id
        UNION ALL SELECT format('c %s', (c.partition_id, c.consumer_group, c.cursor,
                                         c.lease_id, c.lease_expires_at, c.batch_start,
                                         c.batch_end, c.retry_count, c.completed_total,
                                         c.implicitly_completed_total, c.dead_lettered_total,
                                         c.discarded_total, c.last_ack_at))
          FROM p JOIN pgcursor_internal.cursor_rows() c ON c.partition_id = p.id
        UNION ALL SELECT format('d %s %s', p.id, count(d.*))
          FROM p LEFT JOIN pgcursor.dead_letters d ON d.partition_id = p.id GROUP BY p.id
        UNION ALL SELECT format('e %s %s', p.id, count(e.*))
          FROM p LEFT JOIN pgcursor.trace_events e ON e.partition_id = p.id GROUP BY p.id
    ) rows(x) ORDER BY x";

/// The scene's rows (sorted), as `Scene::digest` reads them.
#[derive(Debug, PartialEq)]
pub struct Digest(Vec<String>);

impl Digest {
    /// `Err` naming the rows only one side has, each marked `-` (gone) or
    /// `+` (new), when `after` differs.
    pub fn unchanged(&self, after: &Digest) -> Result<(), String> {
        if self == after {
            return Ok(());
        }
        let gone = self.0.iter().filter(|r| !after.0.contains(r));
        let new = after.0.iter().filter(|r| !self.0.contains(r));
        Err(gone
            .map(|r| format!("\n  - {r:.400}"))
            .chain(new.map(|r| format!("\n  + {r:.400}")))
            .collect())
    }
}

/// Every operation but the maintenance switches: a mutated `"enabled": true`
/// would pause every push and pop of the cluster under the tests running
/// beside the fuzzers (tests/http/maintenance.rs covers the switches).
pub fn without_cluster_switches(operations: Vec<Operation>) -> Vec<Operation> {
    operations
        .into_iter()
        .filter(|op| !matches!(op.id.as_str(), "setMaintenance" | "setPopMaintenance"))
        .collect()
}

/// `base` with `extra`'s fields added.
fn merge(mut base: Value, extra: &Value) -> Value {
    for (k, v) in extra.as_object().unwrap() {
        base[k] = v.clone();
    }
    base
}
