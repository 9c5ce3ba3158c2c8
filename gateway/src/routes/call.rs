//! What every thin route does: read a JSON object body, call one `pgcursor`
//! SQL function on a pooled connection, answer its jsonb as it is.

use deadpool_postgres::{Client, Pool};
use serde_json::Value;
use tokio_postgres::types::ToSql;

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

/// Runs `sql` (one SQL function call returning one value) on a pooled
/// connection. No connection: 503; SQLSTATE 22023: 400; P0002: 404.
pub async fn call_json(
    pool: &Pool,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Value, ApiError> {
    let client = pool.get().await?;
    call_json_on(&client, sql, params).await
}

/// `call_json` on a connection the caller already holds.
pub async fn call_json_on(
    client: &Client,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Value, ApiError> {
    let statement = client.prepare_cached(sql).await?;
    let row = client.query_one(&statement, params).await?;
    Ok(row.get(0))
}
