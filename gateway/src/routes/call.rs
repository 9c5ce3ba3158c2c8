//! What every thin route does: read a JSON object body, call one `pgcursor`
//! SQL function on a pooled connection, answer its jsonb as it is.

use actix_web::HttpResponse;
use deadpool_postgres::Pool;
use serde_json::Value;
use tokio_postgres::types::{FromSql, ToSql, Type};

use crate::body::parse_json;
use crate::error::ApiError;

/// A request body that must be a JSON object (the SQL functions read fields).
pub fn object_body(bytes: &[u8]) -> Result<Value, ApiError> {
    let value = parse_json(bytes)?;
    if !value.is_object() {
        return Err(ApiError::BadRequest(
            "request body must be a JSON object".into(),
        ));
    }
    Ok(value)
}

/// The body as the text it came as, for PostgreSQL to parse: large bodies
/// go to the database as sent, not re-serialised from a tree the gateway
/// would also keep across the call (with 1,000-item pushes that tree was
/// most of the gateway's memory). Numbers reach PostgreSQL exactly. Call it
/// after `object_body` accepted the body (so it is JSON, and UTF-8).
pub fn body_text(bytes: &[u8]) -> Result<&str, ApiError> {
    std::str::from_utf8(bytes)
        .map_err(|e| ApiError::BadRequest(format!("request body is not valid UTF-8: {e}")))
}

/// A json/jsonb value kept as the text PostgreSQL sent. Answers are passed
/// on byte for byte: parsing a pop of 100 messages into a tree only to print
/// it again was most of the gateway's work (allocation alone, a third).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RawJson(pub String);

impl RawJson {
    pub fn is_null(&self) -> bool {
        self.0 == "null"
    }

    /// 200 with this JSON as the body.
    pub fn respond(self) -> HttpResponse {
        HttpResponse::Ok()
            .content_type("application/json")
            .body(self.0)
    }
}

impl<'a> FromSql<'a> for RawJson {
    fn from_sql(
        ty: &Type,
        raw: &'a [u8],
    ) -> Result<RawJson, Box<dyn std::error::Error + Sync + Send>> {
        // jsonb's binary form is a version byte (1) and then the text.
        let text = match *ty {
            Type::JSONB => match raw.split_first() {
                Some((1, text)) => text,
                _ => return Err("unsupported jsonb binary version".into()),
            },
            _ => raw,
        };
        Ok(RawJson(std::str::from_utf8(text)?.to_owned()))
    }

    fn accepts(ty: &Type) -> bool {
        matches!(*ty, Type::JSON | Type::JSONB)
    }
}

/// Runs `sql` (one SQL function call returning one value) on a pooled
/// connection. No connection: 503; SQLSTATE 22023: 400; P0002: 404.
pub async fn call_json(
    pool: &Pool,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<RawJson, ApiError> {
    let client = pool.get().await?;
    let statement = client.prepare_cached(sql).await?;
    let row = client.query_one(&statement, params).await?;
    Ok(row.try_get(0)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsonb_binary_is_its_text_after_the_version_byte() {
        let raw = b"\x01{\"a\": 1}";
        let json = RawJson::from_sql(&Type::JSONB, raw).unwrap();
        assert_eq!(json, RawJson("{\"a\": 1}".into()));
        assert!(RawJson::from_sql(&Type::JSONB, b"\x02{}").is_err());
        assert_eq!(
            RawJson::from_sql(&Type::JSON, b"null").unwrap(),
            RawJson("null".into())
        );
        assert!(RawJson::from_sql(&Type::JSON, b"null").unwrap().is_null());
    }
}
