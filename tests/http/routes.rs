//! What every route shares: a JSON 404 for anything not routed, and a
//! JSON 405 for a routed path asked with another method.

use pgcursor_tests::{client, Gateway};
use serde_json::{json, Value};

#[tokio::test]
async fn unknown_route_is_a_json_404() {
    let gw = Gateway::start().await;
    let response = client().get(gw.url("/no/such/thing")).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 404);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body, json!({"error": "no such route"}));
}

/// A path that exists answers another method with a 405 whose Allow header
/// names the methods it has (RFC 9110 §15.5.6), in the JSON error shape;
/// HEAD is one of those other methods (a HEAD of a pop would take a lease).
#[tokio::test]
async fn a_known_path_with_another_method_is_a_405_naming_the_methods_it_has() {
    let gw = Gateway::start().await;
    let cases = [
        (reqwest::Method::DELETE, "/health", "GET"),
        (reqwest::Method::GET, "/api/v1/push", "POST"),
        (reqwest::Method::PUT, "/api/v1/messages/p/t", "GET, DELETE"),
        (reqwest::Method::POST, "/api/v1/system/maintenance", ""),
        (reqwest::Method::HEAD, "/api/v1/pop/queue/q", "GET"),
    ];
    for (method, path, allow) in cases {
        let response = client()
            .request(method.clone(), gw.url(path))
            .send()
            .await
            .unwrap();
        if allow.is_empty() {
            // (a method the path has is not a 405)
            assert_ne!(response.status().as_u16(), 405, "{method} {path}");
            continue;
        }
        assert_eq!(response.status().as_u16(), 405, "{method} {path}");
        let allowed = response.headers()["allow"].to_str().unwrap().to_string();
        assert_eq!(allowed, allow, "{method} {path}");
        if method == reqwest::Method::HEAD {
            continue; // no body
        }
        let body: Value = response.json().await.unwrap();
        assert_eq!(
            body,
            json!({"error": format!("method {method} is not allowed here; allowed: {allow}")}),
            "{path}"
        );
    }
}
