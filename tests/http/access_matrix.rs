//! Every route of gateway/openapi.json × {no token, unknown token,
//! read-only, read-write, admin}: 401 without a known token, 403 below the
//! route's `x-access-level`, its documented 2xx for a valid request at or above it, and
//! a refused request changes nothing. The routes come from the gateway's
//! own document, so a new route is in this matrix the day it is added.

use std::time::Duration;

use pgcursor_tests::Gateway;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::broker::{answer_within, post_head, send};
use crate::operations::{operations, Access, Scene};

const TOKENS: &str = "ro-token:read-only,rw-token:read-write,admin-token:admin";

/// The callers, with the level each one has (None: no valid token).
const CALLERS: [(Option<&str>, Option<Access>); 5] = [
    (None, None),
    (Some("stolen-token"), None),
    (Some("ro-token"), Some(Access::ReadOnly)),
    (Some("rw-token"), Some(Access::ReadWrite)),
    (Some("admin-token"), Some(Access::Admin)),
];

/// What a caller must get: (status, the exact body when refused).
fn expected(
    needs: Access,
    success: u16,
    token: Option<&str>,
    has: Option<Access>,
) -> (u16, Option<Value>) {
    if needs == Access::None {
        return (success, None);
    }
    match (token, has) {
        (None, _) => (401, Some(json!({"error": "missing bearer token"}))),
        (Some(_), None) => (401, Some(json!({"error": "unknown bearer token"}))),
        (Some(_), Some(level)) if level < needs => (
            403,
            Some(json!({"error": format!("this route needs {} access", needs.name())})),
        ),
        _ => (success, None),
    }
}

#[tokio::test]
async fn every_route_answers_by_token_level() {
    let gw = Gateway::start_with(&[("PGCURSOR_TOKENS", TOKENS)]).await;
    let scene = Scene::create(&gw, "matrix", Some("admin-token")).await;
    let operations = operations(&gw).await;
    for op in &operations {
        for (token, has) in CALLERS {
            let call = scene.valid_call(op).await;
            let before = scene.digest().await;
            let (status, body) = send(call.builder(&gw, token)).await;
            let (want, refusal) = expected(op.access, op.success, token, has);
            let who = format!("{} {} ({}) with {token:?}", op.method, call.path, op.id);
            assert_eq!(status, want, "{who}: {body}");
            if let Some(refusal) = refusal {
                assert_eq!(body, refusal, "{who}");
                if let Err(changes) = before.unchanged(&scene.digest().await) {
                    panic!("{who} changed state:{changes}");
                }
            }
        }
    }
}

/// The levels the specs fix (shared/seed/ack-api.txt, shared/spec/wire.md,
/// wire-admin.md's tables, §4 (all read-only), §5 (none), §8.2 (all admin)
/// and §11.3: configure is read-write), written out
/// here so that the document and the router cannot drift together.
const SPEC_LEVELS: [(&str, &str, Access); 51] = [
    ("POST", "/api/v1/ack", Access::ReadWrite),
    ("POST", "/api/v1/ack/batch", Access::ReadWrite),
    ("POST", "/api/v1/configure", Access::ReadWrite),
    ("POST", "/api/v1/push", Access::ReadWrite),
    ("GET", "/api/v1/pop", Access::ReadWrite),
    ("GET", "/api/v1/pop/queue/{}", Access::ReadWrite),
    (
        "GET",
        "/api/v1/pop/queue/{}/partition/{}",
        Access::ReadWrite,
    ),
    ("POST", "/api/v1/lease/{}/extend", Access::ReadWrite),
    ("POST", "/api/v1/transaction", Access::ReadWrite),
    ("GET", "/api/v1/partitions/{}/cursors", Access::ReadOnly),
    ("GET", "/api/v1/consumer-groups", Access::ReadOnly),
    ("GET", "/api/v1/consumer-groups/lagging", Access::ReadOnly),
    ("GET", "/api/v1/consumer-groups/{}", Access::ReadOnly),
    ("DELETE", "/api/v1/consumer-groups/{}", Access::Admin),
    (
        "DELETE",
        "/api/v1/consumer-groups/{}/queues/{}",
        Access::Admin,
    ),
    (
        "POST",
        "/api/v1/consumer-groups/{}/subscription",
        Access::ReadWrite,
    ),
    (
        "POST",
        "/api/v1/consumer-groups/{}/queues/{}/seek",
        Access::ReadWrite,
    ),
    (
        "POST",
        "/api/v1/consumer-groups/{}/queues/{}/partitions/{}/seek",
        Access::ReadWrite,
    ),
    ("POST", "/api/v1/stats/refresh", Access::Admin),
    ("GET", "/api/v1/messages", Access::ReadOnly),
    ("GET", "/api/v1/messages/{}/{}", Access::ReadOnly),
    ("DELETE", "/api/v1/messages/{}/{}", Access::ReadWrite),
    ("POST", "/api/v1/traces", Access::ReadWrite),
    ("GET", "/api/v1/traces/{}/{}", Access::ReadOnly),
    ("GET", "/api/v1/traces/by-name/{}", Access::ReadOnly),
    ("GET", "/api/v1/traces/names", Access::ReadOnly),
    ("GET", "/api/v1/resources/namespaces", Access::ReadOnly),
    ("GET", "/api/v1/resources/tasks", Access::ReadOnly),
    ("GET", "/api/v1/resources/queues", Access::ReadOnly),
    ("GET", "/api/v1/resources/queues/{}", Access::ReadOnly),
    ("GET", "/api/v1/resources/overview", Access::ReadOnly),
    ("DELETE", "/api/v1/resources/queues/{}", Access::Admin),
    ("GET", "/api/v1/dlq", Access::ReadOnly),
    ("GET", "/api/v1/system/maintenance", Access::Admin),
    ("POST", "/api/v1/system/maintenance", Access::Admin),
    ("GET", "/api/v1/system/maintenance/pop", Access::Admin),
    ("POST", "/api/v1/system/maintenance/pop", Access::Admin),
    ("GET", "/metrics", Access::None),
    ("GET", "/metrics/prometheus", Access::None),
    ("GET", "/api/v1/status", Access::ReadOnly),
    ("GET", "/api/v1/status/queues", Access::ReadOnly),
    ("GET", "/api/v1/status/queues/{}", Access::ReadOnly),
    ("GET", "/api/v1/status/queues/{}/messages", Access::ReadOnly),
    ("GET", "/api/v1/status/analytics", Access::ReadOnly),
    ("GET", "/api/v1/analytics/queue-ops", Access::ReadOnly),
    ("GET", "/api/v1/analytics/queue-lag", Access::ReadOnly),
    ("GET", "/api/v1/analytics/retention", Access::ReadOnly),
    ("GET", "/api/v1/analytics/system-metrics", Access::ReadOnly),
    ("GET", "/api/v1/analytics/worker-metrics", Access::ReadOnly),
    (
        "GET",
        "/api/v1/analytics/queue-parked-replicas",
        Access::ReadOnly,
    ),
    ("GET", "/api/v1/analytics/postgres-stats", Access::ReadOnly),
];

#[tokio::test]
async fn the_routes_have_the_levels_the_specs_fix() {
    let gw = Gateway::start().await;
    let operations = operations(&gw).await;
    let shape = |path: &str| -> String {
        path.split('/')
            .map(|s| if s.starts_with('{') { "{}" } else { s })
            .collect::<Vec<_>>()
            .join("/")
    };
    for (method, path, level) in SPEC_LEVELS {
        let op = operations
            .iter()
            .find(|op| op.method.as_str() == method && shape(&op.path) == path)
            .unwrap_or_else(|| panic!("{method} {path} is not in /openapi.json"));
        assert_eq!(op.access, level, "{method} {path}");
    }
}

/// A 401 names the scheme it takes (RFC 9110 §11.6.1), a 403 does not.
#[tokio::test]
async fn a_401_asks_for_a_bearer_token() {
    let gw = Gateway::start_with(&[("PGCURSOR_TOKENS", TOKENS)]).await;
    for (token, status) in [
        (None, 401),
        (Some("stolen-token"), 401),
        (Some("ro-token"), 403),
    ] {
        let response = crate::broker::request(&gw, reqwest::Method::POST, "/api/v1/push", token)
            .json(&json!({"items": [{"queue": "q", "payload": 1}]}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), status, "{token:?}");
        let scheme = response
            .headers()
            .get("www-authenticate")
            .map(|v| v.to_str().unwrap().to_string());
        let wanted = (status == 401).then(|| "Bearer".to_string());
        assert_eq!(scheme, wanted, "{token:?}");
    }
}

/// With tokens set, a body from a caller without a known token is refused
/// before it is read: the 401 comes while most of an 8 MB upload is still
/// to be sent (the gateway would otherwise hold each such body whole, for
/// anyone who can reach it). A known token's body is read to its end first.
#[tokio::test]
async fn a_body_without_a_known_token_is_refused_before_it_is_read() {
    let gw = Gateway::start_with(&[("PGCURSOR_TOKENS", TOKENS)]).await;
    let address = gw.base.trim_start_matches("http://").to_string();
    for token in [None, Some("stolen-token")] {
        let mut stream = TcpStream::connect(&address).await.unwrap();
        stream
            .write_all(&post_head("/api/v1/push", 8_000_000, token))
            .await
            .unwrap();
        stream.write_all(&[b' '; 65536]).await.unwrap();
        let answer = answer_within(&mut stream, Duration::from_secs(10))
            .await
            .unwrap_or_else(|| panic!("{token:?}: no answer while the body is unsent"));
        assert!(answer.starts_with("HTTP/1.1 401"), "{token:?}: {answer}");
        let expected = match token {
            None => "missing bearer token",
            Some(_) => "unknown bearer token",
        };
        assert!(answer.contains(expected), "{token:?}: {answer}");
    }
    // A stranger's chunked upload gets its 401, and then the connection is
    // closed: actix-web alone would drain the unread chunks for as long as
    // they came.
    let mut stream = TcpStream::connect(&address).await.unwrap();
    let chunked =
        "POST /api/v1/push HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n10000\r\n";
    stream.write_all(chunked.as_bytes()).await.unwrap();
    stream.write_all(&[b' '; 1000]).await.unwrap();
    let answer = answer_within(&mut stream, Duration::from_secs(10))
        .await
        .expect("an answer to a stranger's chunked upload");
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    let mut rest = [0u8; 64];
    let closed = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut rest)).await;
    assert!(
        matches!(closed, Ok(Ok(0)) | Ok(Err(_))),
        "the connection stays open after a stranger's 401: {closed:?}"
    );
    // The token comes first: a stranger's compressed body is a 401, not a 415.
    let (status, answer) = send(
        pgcursor_tests::client()
            .post(gw.url("/api/v1/push"))
            .header("content-encoding", "gzip")
            .body("x"),
    )
    .await;
    assert_eq!(
        (status, answer),
        (401, json!({"error": "missing bearer token"}))
    );
    let body = r#"{"items":[{"queue":"strangers-bodies","payload":1}]}"#.as_bytes();
    let mut stream = TcpStream::connect(&address).await.unwrap();
    stream
        .write_all(&post_head("/api/v1/push", body.len(), Some("rw-token")))
        .await
        .unwrap();
    let (head, last) = body.split_at(body.len() - 1);
    stream.write_all(head).await.unwrap();
    assert_eq!(
        answer_within(&mut stream, Duration::from_secs(1)).await,
        None,
        "a known token's body is read to its end"
    );
    stream.write_all(last).await.unwrap();
    let answer = answer_within(&mut stream, Duration::from_secs(10))
        .await
        .expect("an answer once the body is complete");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}
