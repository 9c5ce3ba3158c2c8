//! Every route of gateway/openapi.json × {no token, unknown token,
//! read-only, read-write, admin}: 401 without a known token, 403 below the
//! route's `x-access-level`, its documented 2xx for a valid request at or above it, and
//! a refused request changes nothing. The routes come from the gateway's
//! own document, so a new route is in this matrix the day it is added.

use pgcursor_tests::{db, Gateway};
use serde_json::{json, Value};

use crate::broker::send;
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
    let db = db().await;
    for op in &operations {
        for (token, has) in CALLERS {
            let call = scene.valid_call(op).await;
            let before = scene.digest(&db).await;
            let (status, body) = send(call.builder(&gw, token)).await;
            let (want, refusal) = expected(op.access, op.success, token, has);
            let who = format!("{} {} ({}) with {token:?}", op.method, call.path, op.id);
            assert_eq!(status, want, "{who}: {body}");
            if let Some(refusal) = refusal {
                assert_eq!(body, refusal, "{who}");
                if let Err(changes) = before.unchanged(&scene.digest(&db).await) {
                    panic!("{who} changed state:{changes}");
                }
            }
        }
    }
}
