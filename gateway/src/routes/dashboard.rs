//! The dashboard: one HTML page, its script and its stylesheet, embedded in
//! the binary (gateway/dashboard/). No token is needed to load them: they
//! hold no data, and every API call the page makes carries the user's token.

use actix_web::{web, HttpResponse};

const INDEX: &str = include_str!("../../dashboard/index.html");
const SCRIPT: &str = include_str!("../../dashboard/app.js");
const STYLE: &str = include_str!("../../dashboard/app.css");

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/").get(index))
        .service(web::resource("/dashboard/app.js").get(script))
        .service(web::resource("/dashboard/app.css").get(style));
}

async fn index() -> HttpResponse {
    asset("text/html; charset=utf-8", INDEX)
}

async fn script() -> HttpResponse {
    asset("text/javascript; charset=utf-8", SCRIPT)
}

async fn style() -> HttpResponse {
    asset("text/css; charset=utf-8", STYLE)
}

/// `no-cache` so a browser revalidates after an upgrade instead of running
/// an old script against a newer API.
fn asset(content_type: &str, body: &'static str) -> HttpResponse {
    HttpResponse::Ok()
        .content_type(content_type)
        .insert_header(("cache-control", "no-cache"))
        .insert_header(("x-content-type-options", "nosniff"))
        .body(body)
}
