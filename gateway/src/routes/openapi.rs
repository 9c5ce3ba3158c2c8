//! GET /openapi.json (no token needed): the OpenAPI 3 document of every
//! route, hand-written in `gateway/openapi.json` and embedded in the binary.
//! Each operation names its token level in `x-access-level`; the black-box
//! access matrix and fuzz tests are generated from this document.
//!
//! Kept in sync by the tests below: the document's paths must be exactly the
//! app's route patterns, and on each path exactly the documented methods may
//! be routed.

use actix_web::{web, HttpResponse};

/// The document, as served.
pub const DOCUMENT: &str = include_str!("../../openapi.json");

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/openapi.json").get(openapi));
}

async fn openapi() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/json")
        .body(DOCUMENT)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use actix_web::http::Method;
    use actix_web::test::{call_and_read_body, call_service, init_service, read_body, TestRequest};
    use actix_web::{App, HttpRequest};
    use serde_json::{json, Value};

    use super::*;

    /// The methods the sync test tries on every documented path.
    const METHODS: [&str; 5] = ["GET", "POST", "PUT", "PATCH", "DELETE"];

    fn document() -> Value {
        serde_json::from_str(DOCUMENT).expect("openapi.json is valid JSON")
    }

    /// (METHOD, path) of every documented operation.
    fn documented() -> BTreeSet<(String, String)> {
        let doc = document();
        let mut operations = BTreeSet::new();
        for (path, item) in doc["paths"].as_object().expect("paths") {
            for method in item.as_object().expect("a path item").keys() {
                operations.insert((method.to_uppercase(), path.clone()));
            }
        }
        operations
    }

    /// `{name}` segments replaced by a plain value, so the path can be requested.
    fn concrete(path: &str) -> String {
        path.split('/')
            .map(|s| if s.starts_with('{') { "x" } else { s })
            .collect::<Vec<_>>()
            .join("/")
    }

    #[test]
    fn every_operation_names_its_access_level_and_a_unique_id() {
        let doc = document();
        let mut ids = BTreeSet::new();
        for (method, path) in documented() {
            let op = &doc["paths"][&path][method.to_lowercase()];
            let level = op["x-access-level"].as_str().unwrap_or_default();
            assert!(
                ["none", "read-only", "read-write", "admin"].contains(&level),
                "{method} {path}: x-access-level {level:?}"
            );
            let id = op["operationId"].as_str().expect("an operationId");
            assert!(ids.insert(id.to_string()), "operationId {id} twice");
        }
    }

    #[test]
    fn every_reference_resolves() {
        let doc = document();
        let mut refs = Vec::new();
        collect_refs(&doc, &mut refs);
        assert!(!refs.is_empty());
        for r in refs {
            let pointer = r.strip_prefix('#').expect("a local $ref");
            assert!(doc.pointer(pointer).is_some(), "dangling $ref {r}");
        }
    }

    fn collect_refs(value: &Value, refs: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                if let Some(Value::String(r)) = map.get("$ref") {
                    refs.push(r.clone());
                }
                map.values().for_each(|v| collect_refs(v, refs));
            }
            Value::Array(items) => items.iter().for_each(|v| collect_refs(v, refs)),
            _ => {}
        }
    }

    /// Every route pattern the app registers. actix has no public listing,
    /// so this reads the patterns out of the resource map's Debug output;
    /// should that format ever change, the comparison below fails loudly
    /// rather than passing on an empty list.
    async fn app_patterns() -> BTreeSet<String> {
        let app = init_service(App::new().configure(crate::routes::configure).default_service(
            web::to(|req: HttpRequest| async move {
                HttpResponse::Ok().body(format!("{:?}", req.resource_map()))
            }),
        ))
        .await;
        let req = TestRequest::get().uri("/not/a/route").to_request();
        let body = call_and_read_body(&app, req).await;
        let map = String::from_utf8(body.to_vec()).unwrap();
        map.split("Single(\"")
            .skip(1)
            .filter_map(|s| s.split_once("\")").map(|(p, _)| p.to_string()))
            .filter(|p| !p.is_empty())
            .collect()
    }

    #[actix_web::test]
    async fn documented_paths_are_exactly_the_app_routes() {
        let documented: BTreeSet<String> = documented().into_iter().map(|(_, p)| p).collect();
        assert_eq!(
            app_patterns().await,
            documented,
            "gateway/openapi.json and the routes registered in gateway/src/routes disagree"
        );
    }

    /// Without `AppState` a routed handler fails in its extractors; an
    /// unrouted path reaches the default service's "no such route", and a
    /// routed path asked with another method is a 405 whose Allow header
    /// names the path's documented methods.
    #[actix_web::test]
    async fn each_documented_path_routes_exactly_its_documented_methods() {
        let app = init_service(App::new().configure(crate::app::configure)).await;
        let documented = documented();
        let paths: BTreeSet<&String> = documented.iter().map(|(_, p)| p).collect();
        for path in paths {
            for method in METHODS {
                let req = TestRequest::default()
                    .method(Method::from_bytes(method.as_bytes()).unwrap())
                    .uri(&concrete(path))
                    .to_request();
                let response = call_service(&app, req).await;
                let status = response.status().as_u16();
                let response_allow = response
                    .headers()
                    .get("allow")
                    .map(|v| v.to_str().unwrap().to_string());
                let body: Value = serde_json::from_slice(&read_body(response).await)
                    .unwrap_or(Value::Null);
                let allow = response_allow.unwrap_or_default();
                let routed = !(status == 404 && body == json!({"error": "no such route"}))
                    && status != 405;
                let expected = documented.contains(&(method.to_string(), path.clone()));
                assert_eq!(routed, expected, "{method} {path}: routed by the app vs documented");
                if !expected {
                    assert_eq!(status, 405, "{method} {path}: a path's other methods");
                    let path_methods: BTreeSet<&str> = documented
                        .iter()
                        .filter(|(_, p)| p == path)
                        .map(|(m, _)| m.as_str())
                        .collect();
                    let allowed: BTreeSet<&str> = allow.split(", ").collect();
                    assert_eq!(allowed, path_methods, "{method} {path}: the 405's Allow");
                }
            }
        }
    }

    #[actix_web::test]
    async fn the_document_is_served_as_json() {
        let app = init_service(App::new().configure(crate::routes::configure)).await;
        let req = TestRequest::get().uri("/openapi.json").to_request();
        let response = call_service(&app, req).await;
        assert_eq!(response.status().as_u16(), 200);
        assert_eq!(
            response.headers().get("content-type").unwrap().to_str().unwrap(),
            "application/json"
        );
        let body: Value = serde_json::from_slice(&read_body(response).await).unwrap();
        assert_eq!(body, document());
    }
}
