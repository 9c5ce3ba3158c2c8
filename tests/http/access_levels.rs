//! Every produce/consume/resources route checks its access level first:
//! no token 401, a weaker token 403, a sufficient one 200.

use pgcursor_tests::Gateway;
use reqwest::Method;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::broker::{fresh_queue, request, send};

const TOKENS: [(&str, Level); 3] = [
    ("ro-token", Level::ReadOnly),
    ("rw-token", Level::ReadWrite),
    ("admin-token", Level::Admin),
];

#[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
enum Level {
    ReadOnly,
    ReadWrite,
    Admin,
}

struct Route {
    method: Method,
    path: String,
    body: Option<Value>,
    needs: Level,
}

fn route(method: Method, path: String, body: Option<Value>, needs: Level) -> Route {
    Route {
        method,
        path,
        body,
        needs,
    }
}

fn routes(queue: &str, doomed: &str) -> Vec<Route> {
    use Level::*;
    use Method as M;
    vec![
        route(
            M::POST,
            "/api/v1/configure".into(),
            Some(json!({"queue": queue})),
            Admin,
        ),
        route(
            M::POST,
            "/api/v1/push".into(),
            Some(json!({"items": [{"queue": queue, "payload": 1}]})),
            ReadWrite,
        ),
        route(
            M::GET,
            format!("/api/v1/pop/queue/{queue}"),
            None,
            ReadWrite,
        ),
        route(
            M::GET,
            format!("/api/v1/pop/queue/{queue}/partition/Default"),
            None,
            ReadWrite,
        ),
        route(
            M::GET,
            format!("/api/v1/pop?namespace={queue}"),
            None,
            ReadWrite,
        ),
        route(
            M::POST,
            format!("/api/v1/lease/{}/extend", Uuid::now_v7()),
            None,
            ReadWrite,
        ),
        route(M::GET, "/api/v1/resources/queues".into(), None, ReadOnly),
        route(
            M::GET,
            format!("/api/v1/resources/queues/{queue}"),
            None,
            ReadOnly,
        ),
        route(M::GET, "/api/v1/resources/overview".into(), None, ReadOnly),
        route(
            M::DELETE,
            format!("/api/v1/resources/queues/{doomed}"),
            None,
            Admin,
        ),
    ]
}

async fn status(gw: &Gateway, r: &Route, token: Option<&str>) -> (u16, Value) {
    let builder = request(gw, r.method.clone(), &r.path, token);
    match &r.body {
        Some(body) => send(builder.json(body)).await,
        None => send(builder).await,
    }
}

#[tokio::test]
async fn each_route_answers_401_403_or_200_by_token_level() {
    let tokens = "ro-token:read-only,rw-token:read-write,admin-token:admin";
    let gw = Gateway::start_with(&[("PGCURSOR_TOKENS", tokens)]).await;
    let (queue, doomed) = (fresh_queue("auth"), fresh_queue("doomed"));
    for q in [&queue, &doomed] {
        let configure = route(
            Method::POST,
            "/api/v1/configure".into(),
            Some(json!({"queue": q})),
            Level::Admin,
        );
        assert_eq!(status(&gw, &configure, Some("admin-token")).await.0, 200);
    }
    for r in routes(&queue, &doomed) {
        let (code, body) = status(&gw, &r, None).await;
        assert_eq!(
            (code, body),
            (401, json!({"error": "missing bearer token"})),
            "{} {}",
            r.method,
            r.path
        );
        let (code, _) = status(&gw, &r, Some("stolen-token")).await;
        assert_eq!(code, 401, "{} {}", r.method, r.path);
        for (token, level) in TOKENS {
            let (code, body) = status(&gw, &r, Some(token)).await;
            let want = if level >= r.needs { 200 } else { 403 };
            assert_eq!(code, want, "{} {} with {token}: {body}", r.method, r.path);
        }
    }
}
