//! What every route shares: a JSON 404 for anything not routed.

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

#[tokio::test]
async fn a_known_path_with_another_method_is_no_such_route() {
    let gw = Gateway::start().await;
    let response = client().delete(gw.url("/health")).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 404);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body, json!({"error": "no such route"}));
}
