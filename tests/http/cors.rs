//! CORS (docs/http-api.md "CORS"): every answer carries the allow headers,
//! errors included, and a preflight OPTIONS on any path is answered without a
//! token.

use pgcursor_tests::Gateway;
use reqwest::{Method, Response};

use crate::broker::request;

const EXPECTED: [(&str, &str); 4] = [
    ("access-control-allow-origin", "*"),
    (
        "access-control-allow-methods",
        "GET, POST, PUT, DELETE, OPTIONS",
    ),
    (
        "access-control-allow-headers",
        "Content-Type, Authorization",
    ),
    ("access-control-max-age", "86400"),
];

fn assert_cors(response: &Response, what: &str) {
    for (name, value) in EXPECTED {
        assert_eq!(
            response.headers().get(name).map(|v| v.to_str().unwrap()),
            Some(value),
            "{what}: header {name}"
        );
    }
    // wire-admin §8.1: no credentials, nothing exposed.
    for name in [
        "access-control-allow-credentials",
        "access-control-expose-headers",
    ] {
        assert!(
            response.headers().get(name).is_none(),
            "{what}: header {name}"
        );
    }
}

#[tokio::test]
async fn preflights_answer_without_a_token_and_every_answer_carries_the_headers() {
    let gw =
        Gateway::start_with(&[("PGCURSOR_TOKENS", "admin-token:admin,ro-token:read-only")]).await;
    for path in ["/api/v1/push", "/api/v1/consumer-groups/g", "/not/a/route"] {
        let response = request(&gw, Method::OPTIONS, path, None)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 200, "OPTIONS {path}");
        assert_cors(&response, &format!("OPTIONS {path}"));
        assert!(
            response.bytes().await.unwrap().is_empty(),
            "OPTIONS {path}: an empty body"
        );
    }
    for (method, path, token, status) in [
        (Method::GET, "/health", None, 200),
        (
            Method::GET,
            "/api/v1/resources/overview",
            Some("admin-token"),
            200,
        ),
        (Method::POST, "/api/v1/push", None, 401),
        (Method::GET, "/not/a/route", Some("admin-token"), 404),
    ] {
        let what = format!("{method} {path}");
        let response = request(&gw, method, path, token).send().await.unwrap();
        assert_eq!(response.status().as_u16(), status, "{what}");
        assert_cors(&response, &what);
    }
    // Every other kind of error too: 400, 403, 405, 415.
    let push = || request(&gw, Method::POST, "/api/v1/push", Some("admin-token"));
    for (what, builder, status) in [
        ("a body not JSON", push().body("{"), 400),
        (
            "a read-only token pushing",
            request(&gw, Method::POST, "/api/v1/push", Some("ro-token")).body("{}"),
            403,
        ),
        (
            "GET of a POST route",
            request(&gw, Method::GET, "/api/v1/push", Some("admin-token")),
            405,
        ),
        (
            "a compressed body",
            push().header("content-encoding", "gzip").body("{}"),
            415,
        ),
    ] {
        let response = builder.send().await.unwrap();
        assert_eq!(response.status().as_u16(), status, "{what}");
        assert_cors(&response, what);
    }
}
