//! Request bodies: read as bytes and parsed here, so every malformed body
//! gets our own 400 naming what is wrong (never actix's extractor errors).
//! PostgreSQL cannot store U+0000 in text or jsonb: a body, path segment or
//! query value with one is refused up front, naming where it was found,
//! rather than failing half-way in the database with no name.

use actix_web::HttpRequest;
use serde_json::Value;

use crate::error::ApiError;

/// Parses a request body as JSON. serde_json's recursion limit (128) turns
/// absurdly deep nesting into an ordinary 400.
pub fn parse_json(bytes: &[u8]) -> Result<Value, ApiError> {
    let value: Value = serde_json::from_slice(bytes)
        .map_err(|e| ApiError::BadRequest(format!("request body is not valid JSON: {e}")))?;
    if may_hold_nul(bytes) {
        reject_nul(&value, "body")?;
    }
    Ok(value)
}

/// Whether a JSON text may hold U+0000: JSON carries it only as the escape
/// \u0000 (a raw control character is invalid), so without one it cannot.
pub fn may_hold_nul(json: &[u8]) -> bool {
    json.windows(6).any(|w| w == br"\u0000")
}

/// A 400 naming `name` when `value` holds U+0000.
pub fn no_nul(name: &str, value: &str) -> Result<(), ApiError> {
    if value.contains('\0') {
        return Err(ApiError::BadRequest(format!(
            "{name} contains a NUL character"
        )));
    }
    Ok(())
}

/// Every path segment of the route matched (`{queue}`, `{group}`, ...)
/// without U+0000 (`%00`); else a 400 naming the segment.
pub fn path_without_nul(req: &HttpRequest) -> Result<(), ApiError> {
    req.match_info()
        .iter()
        .try_for_each(|(name, value)| no_nul(name, value))
}

fn reject_nul(value: &Value, path: &str) -> Result<(), ApiError> {
    match value {
        Value::String(s) => no_nul(path, s),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .try_for_each(|(i, v)| reject_nul(v, &format!("{path}[{i}]"))),
        Value::Object(map) => map.iter().try_for_each(|(k, v)| {
            no_nul(&format!("a key in {path}"), k)?;
            reject_nul(v, &format!("{path}.{k}"))
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(r: Result<Value, ApiError>) -> String {
        match r {
            Err(ApiError::BadRequest(m)) => m,
            other => panic!("expected a 400, got {other:?}"),
        }
    }

    #[test]
    fn invalid_json_is_a_bad_request() {
        assert!(message(parse_json(b"{nope")).starts_with("request body is not valid JSON"));
        assert!(message(parse_json(&[0xff, 0xfe])).starts_with("request body is not valid JSON"));
    }

    #[test]
    fn deep_nesting_is_a_bad_request() {
        let deep = "[".repeat(200) + &"]".repeat(200);
        assert!(message(parse_json(deep.as_bytes())).contains("recursion limit"));
    }

    #[test]
    fn nul_characters_are_named_by_path() {
        let m = message(parse_json(br#"{"acknowledgments":[{"error":"a\u0000b"}]}"#));
        assert_eq!(m, "body.acknowledgments[0].error contains a NUL character");
        let m = message(parse_json(br#"{"k\u0000":1}"#));
        assert_eq!(m, "a key in body contains a NUL character");
    }

    #[test]
    fn an_escaped_backslash_before_u0000_is_no_nul() {
        let value = parse_json(br#"{"a":"\\u0000"}"#).unwrap();
        assert_eq!(value["a"], "\\u0000");
    }

    #[test]
    fn ordinary_json_passes() {
        assert_eq!(parse_json(br#"{"a":[1,"x",null]}"#).unwrap()["a"][1], "x");
    }
}
