//! CORS as Queen answers it (docs/http-api.md "CORS"), so browser clients of
//! other origins (a dashboard served elsewhere) can call the API: every
//! response carries the allow headers, and a preflight `OPTIONS` on any
//! path is answered at once, before routing and authentication.

use actix_web::http::header::{HeaderMap, HeaderName, HeaderValue};
use actix_web::http::Method;
use actix_web::HttpResponse;

const HEADERS: [(&str, &str); 4] = [
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

/// Whether a request is a preflight: any `OPTIONS`.
pub fn is_preflight(method: &Method) -> bool {
    method == Method::OPTIONS
}

/// The Prometheus exposition carries no CORS headers: browsers of
/// other origins have no business scraping it.
pub fn applies_to(path: &str) -> bool {
    path != "/metrics/prometheus"
}

/// The answer to a preflight: 200, empty, with the headers when `cors`.
pub fn preflight(cors: bool) -> HttpResponse {
    let mut response = HttpResponse::Ok().finish();
    if cors {
        add_headers(response.headers_mut());
    }
    response
}

/// Adds the CORS headers to a response's headers.
pub fn add_headers(headers: &mut HeaderMap) {
    for (name, value) in HEADERS {
        headers.insert(
            HeaderName::from_static(name),
            HeaderValue::from_static(value),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_preflight_is_an_empty_200_with_every_header() {
        let response = preflight(true);
        assert_eq!(response.status().as_u16(), 200);
        for (name, value) in HEADERS {
            assert_eq!(response.headers().get(name).unwrap(), value, "{name}");
        }
        assert!(is_preflight(&Method::OPTIONS));
        assert!(!is_preflight(&Method::GET));
    }

    #[test]
    fn the_prometheus_exposition_alone_goes_without() {
        assert!(!applies_to("/metrics/prometheus"));
        assert!(applies_to("/metrics"));
        assert!(applies_to("/metrics/prometheus/x"));
        let response = preflight(false);
        assert_eq!(response.status().as_u16(), 200);
        assert!(response.headers().is_empty());
    }
}
