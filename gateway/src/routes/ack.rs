//! POST /api/v1/ack and /api/v1/ack/batch (docs/ack-contract.md).
//!
//! The gateway validates (the same rules ack_group enforces, §13), normalises
//! status, groups items by (partitionId, leaseId) and runs one
//! `pgcursor.ack_group` call per group, each on its own pooled connection:
//! groups of different partitions concurrently, groups of one partition in
//! request order (§15). The answers are merged back into request order.
//! Every rule about what an ack does lives in SQL. On a Citus coordinator
//! (Deployment::Delegating) each call is `pgcursor_citus.ack_group`, which
//! Citus runs whole on the worker holding the partition.

use std::collections::HashMap;

use actix_web::{web, HttpRequest, HttpResponse};
use futures::stream::{self, StreamExt};
use serde::Serialize;
use serde_json::{json, Map, Value};
use tokio_postgres::types::Json;
use uuid::Uuid;

use crate::app::AppState;
use crate::auth::Level;
use crate::body::read_json_except;
use crate::db::Deployment;
use crate::error::ApiError;
use crate::minutes::{record, Target};
use crate::routes::call::RawJson;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/api/v1/ack").post(ack_single))
        .service(web::resource("/api/v1/ack/batch").post(ack_batch));
}

/// One validated acknowledgement.
#[derive(Debug, Clone, PartialEq)]
pub struct AckItem {
    pub index: usize,
    pub transaction_id: String,
    pub partition_id: Uuid,
    pub lease_id: Option<Uuid>,
    pub status: &'static str,
    pub error: Option<String>,
}

/// A validated request: the top-level consumer group and its items.
#[derive(Debug, PartialEq)]
pub struct AckRequest {
    pub consumer_group: Option<String>,
    pub items: Vec<AckItem>,
}

/// §2: exact and case-sensitive; absent or null is completed; anything else
/// (another spelling, a number, an object) is an explicit failure.
pub fn normalise_status(status: Option<&Value>) -> &'static str {
    match status {
        None | Some(Value::Null) => "completed",
        Some(Value::String(s)) => match s.as_str() {
            "completed" => "completed",
            "failed" => "failed",
            "retry" => "retry",
            "dlq" => "dlq",
            _ => "failed",
        },
        Some(_) => "failed",
    }
}

async fn ack_single(
    req: HttpRequest,
    state: web::Data<AppState>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    state.auth.require(&req, Level::ReadWrite)?;
    crate::metrics::counters().ack_requests.increment(1);
    let request = parse_single(&read_json_except(&body, Some("status")).await?)?;
    respond(&state, request).await
}

async fn ack_batch(
    req: HttpRequest,
    state: web::Data<AppState>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    state.auth.require(&req, Level::ReadWrite)?;
    crate::metrics::counters().ack_requests.increment(1);
    let request = parse_batch(&read_json_except(&body, Some("status")).await?, state.config.max_ack_items)?;
    respond(&state, request).await
}

async fn respond(state: &AppState, request: AckRequest) -> Result<HttpResponse, ApiError> {
    let mut outcomes = run_groups(state, &request).await?;
    tally(&request, &outcomes).record();
    match outcomes.as_mut_slice() {
        // One group answers for every item, in request order: its answer is
        // the response, passed on unread.
        [(_, Ok(answer))] => Ok(std::mem::take(answer).respond()),
        _ => Ok(HttpResponse::Ok().json(merge(request.items.len(), outcomes))),
    }
}

/// The single route: the item's fields at top level, answered as a
/// one-element array.
pub fn parse_single(body: &Value) -> Result<AckRequest, ApiError> {
    let object = body
        .as_object()
        .ok_or_else(|| ApiError::BadRequest("request body must be a JSON object".into()))?;
    Ok(AckRequest {
        consumer_group: consumer_group(object)?,
        items: vec![parse_item(object, 0, None)?],
    })
}

/// The batch route: `{"consumerGroup", "acknowledgments": [...]}`. A
/// per-item consumerGroup is not read.
pub fn parse_batch(body: &Value, max_items: usize) -> Result<AckRequest, ApiError> {
    let object = body
        .as_object()
        .ok_or_else(|| ApiError::BadRequest("request body must be a JSON object".into()))?;
    let list = match object.get("acknowledgments") {
        Some(Value::Array(list)) if !list.is_empty() => list,
        Some(Value::Array(_)) => {
            return Err(ApiError::BadRequest(
                "acknowledgments must not be empty".into(),
            ))
        }
        Some(_) => {
            return Err(ApiError::BadRequest(
                "acknowledgments must be an array".into(),
            ))
        }
        None => return Err(ApiError::BadRequest("acknowledgments is required".into())),
    };
    if list.len() > max_items {
        return Err(ApiError::PayloadTooLarge(format!(
            "acknowledgments has {} items; the limit is {max_items}",
            list.len()
        )));
    }
    let items = list
        .iter()
        .enumerate()
        .map(|(index, item)| match item.as_object() {
            Some(fields) => parse_item(fields, index, Some(index)),
            None => Err(ApiError::BadRequest(format!(
                "acknowledgments[{index}] must be an object"
            ))),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(AckRequest {
        consumer_group: consumer_group(object)?,
        items,
    })
}

/// Longest name a cursor row's key takes, in bytes (as
/// `pgcursor_internal.too_long_for_a_key`).
const MAX_NAME_BYTES: usize = 1024;

/// The request's consumerGroup: a string of at most MAX_NAME_BYTES, or
/// none. Checked here so that a name too long is the request's 400, before
/// any group runs, as on the other routes (ack_group refuses it too).
fn consumer_group(object: &Map<String, Value>) -> Result<Option<String>, ApiError> {
    let group = optional_string(object, "consumerGroup", None)?;
    if group.as_ref().is_some_and(|g| g.len() > MAX_NAME_BYTES) {
        return Err(ApiError::BadRequest(format!(
            "consumerGroup must be at most {MAX_NAME_BYTES} bytes"
        )));
    }
    Ok(group)
}

/// One item; `at` is its place in `acknowledgments` (None: the single
/// route), used only to name a bad field.
fn parse_item(
    fields: &Map<String, Value>,
    index: usize,
    at: Option<usize>,
) -> Result<AckItem, ApiError> {
    let transaction_id = match fields.get("transactionId") {
        Some(Value::String(s)) => s.clone(),
        _ => {
            return Err(ApiError::BadRequest(format!(
                "{} must be a string",
                item_field(at, "transactionId")
            )))
        }
    };
    let partition_id = optional_uuid(fields, "partitionId", at)?.ok_or_else(|| {
        ApiError::BadRequest(format!(
            "{} must be a UUID string",
            item_field(at, "partitionId")
        ))
    })?;
    Ok(AckItem {
        index,
        transaction_id,
        partition_id,
        lease_id: optional_uuid(fields, "leaseId", at)?,
        status: normalise_status(fields.get("status")),
        error: optional_string(fields, "error", at)?,
    })
}

/// A field's name in error messages: `acknowledgments[3].leaseId`, or just
/// `leaseId` on the single route. Built only when there is an error.
fn item_field(at: Option<usize>, field: &str) -> String {
    match at {
        Some(i) => format!("acknowledgments[{i}].{field}"),
        None => field.to_string(),
    }
}

/// A string field that may be absent or null.
fn optional_string(
    fields: &Map<String, Value>,
    name: &str,
    at: Option<usize>,
) -> Result<Option<String>, ApiError> {
    match fields.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(ApiError::BadRequest(format!(
            "{} must be a string",
            item_field(at, name)
        ))),
    }
}

/// A UUID field that may be absent or null.
fn optional_uuid(
    fields: &Map<String, Value>,
    name: &str,
    at: Option<usize>,
) -> Result<Option<Uuid>, ApiError> {
    match optional_string(fields, name, at) {
        Ok(None) => Ok(None),
        Ok(Some(s)) => crate::body::plain_uuid(&s).map(Some).ok_or_else(|| {
            ApiError::BadRequest(format!("{} must be a UUID string", item_field(at, name)))
        }),
        Err(_) => Err(ApiError::BadRequest(format!(
            "{} must be a UUID string",
            item_field(at, name)
        ))),
    }
}

/// Items sharing (partitionId, leaseId), in order of first appearance; a
/// missing leaseId is a group of its own.
pub fn group_items(items: &[AckItem]) -> Vec<Vec<&AckItem>> {
    let mut slot: HashMap<(Uuid, Option<Uuid>), usize> = HashMap::new();
    let mut groups: Vec<Vec<&AckItem>> = Vec::new();
    for item in items {
        let at = *slot
            .entry((item.partition_id, item.lease_id))
            .or_insert_with(|| {
                groups.push(Vec::new());
                groups.len() - 1
            });
        groups[at].push(item);
    }
    groups
}

/// The `ack_group` argument for one group.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupRequest<'a> {
    partition_id: Uuid,
    lease_id: Option<Uuid>,
    consumer_group: Option<&'a str>,
    items: Vec<GroupItem<'a>>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct GroupItem<'a> {
    index: usize,
    transaction_id: &'a str,
    status: &'static str,
    error: Option<&'a str>,
}

pub fn group_request<'a>(
    consumer_group: Option<&'a str>,
    group: &[&'a AckItem],
) -> GroupRequest<'a> {
    GroupRequest {
        partition_id: group[0].partition_id,
        lease_id: group[0].lease_id,
        consumer_group,
        items: group
            .iter()
            .map(|i| GroupItem {
                index: i.index,
                transaction_id: &i.transaction_id,
                status: i.status,
                error: i.error.as_deref(),
            })
            .collect(),
    }
}

/// Why one group's call did not answer.
#[derive(Debug)]
enum GroupFailure {
    /// No pooled connection could be had.
    NoConnection(String),
    /// The connection was had but the call failed.
    Database(String),
}

/// One group's `ack_group` call; a failure is a database error
/// (minutes::record_db_error).
async fn call_ack_group(
    state: &AppState,
    request: GroupRequest<'_>,
) -> Result<RawJson, GroupFailure> {
    let outcome = ack_group_once(state, request).await;
    if outcome.is_err() {
        crate::minutes::record_db_error();
    }
    outcome
}

async fn ack_group_once(
    state: &AppState,
    request: GroupRequest<'_>,
) -> Result<RawJson, GroupFailure> {
    let failed = |e: tokio_postgres::Error| {
        crate::db::note_if_session_setting_error(&e);
        GroupFailure::Database(crate::db::error_detail(&e))
    };
    let client = state
        .pool
        .get()
        .await
        .map_err(|e| GroupFailure::NoConnection(crate::db::pool_error_detail(&e)))?;
    if let Deployment::Delegating { lock_timeout } = &state.deployment {
        return ack_on_partition_worker(&client, request, lock_timeout.as_deref())
            .await
            .map_err(failed);
    }
    let statement = client
        .prepare_cached("SELECT pgcursor.ack_group($1::jsonb)")
        .await
        .map_err(failed)?;
    let row = client
        .query_one(&statement, &[&Json(&request)])
        .await
        .map_err(failed)?;
    row.try_get(0).map_err(failed)
}

/// On Citus: the group's ack_group, run whole on the worker holding the
/// partition (`pgcursor_citus.ack_group`, under `lock_timeout` there,
/// Deployment::Delegating). A nack's long-poll wake-up was
/// sent on that worker, where no gateway listens: after a group holding a
/// nack, it is sent again here, on the coordinator.
async fn ack_on_partition_worker(
    client: &deadpool_postgres::Client,
    request: GroupRequest<'_>,
    lock_timeout: Option<&str>,
) -> Result<RawJson, tokio_postgres::Error> {
    let statement = client
        .prepare_cached("SELECT pgcursor_citus.ack_group($1::uuid, $2::jsonb, $3::text)")
        .await?;
    let answer: RawJson = client
        .query_one(&statement, &[&request.partition_id, &Json(&request), &lock_timeout])
        .await?
        .try_get(0)?;
    // The ack is committed: a failed wake-up costs waiting pops their
    // re-check, and must not report a landed ack as failed.
    let nacked = request.items.iter().any(|i| i.status != "completed");
    if nacked {
        let sql = "SELECT pgcursor_citus.wake_partition($1)";
        if let Err(e) = crate::db::wake(client, sql, &request.partition_id).await {
            tracing::warn!("nack on {}: wake-up not sent: {}", request.partition_id, crate::db::error_detail(&e));
        }
    }
    Ok(answer)
}

/// Each group with the outcome of its call.
type Outcomes<'a> = Vec<(Vec<&'a AckItem>, Result<RawJson, GroupFailure>)>;

/// Groups of one partition, in order of first appearance: they lock the same
/// cursor row, so they run one after another and the request's order, not
/// scheduling, decides between them (docs/ack-contract.md §15).
pub fn partition_lanes(groups: Vec<Vec<&AckItem>>) -> Vec<Vec<Vec<&AckItem>>> {
    let mut slot: HashMap<Uuid, usize> = HashMap::new();
    let mut lanes: Vec<Vec<Vec<&AckItem>>> = Vec::new();
    for group in groups {
        let at = *slot.entry(group[0].partition_id).or_insert_with(|| {
            lanes.push(Vec::new());
            lanes.len() - 1
        });
        lanes[at].push(group);
    }
    lanes
}

/// Runs every group: the lanes of different partitions concurrently (at most
/// the worker's connections at once, so one huge batch cannot take them all), the
/// groups of one lane in order. 503 only when no group got a connection.
async fn run_groups<'a>(
    state: &AppState,
    request: &'a AckRequest,
) -> Result<Outcomes<'a>, ApiError> {
    let lanes = partition_lanes(group_items(&request.items));
    let limit = state.pool.status().max_size.max(1);
    let consumer_group = request.consumer_group.as_deref();
    let outcomes: Outcomes = stream::iter(lanes)
        .map(|lane| async move {
            let mut outcomes = Vec::with_capacity(lane.len());
            for group in lane {
                let outcome = call_ack_group(state, group_request(consumer_group, &group)).await;
                outcomes.push((group, outcome));
            }
            outcomes
        })
        .buffer_unordered(limit)
        .flat_map(stream::iter)
        .collect()
        .await;
    if outcomes
        .iter()
        .all(|(_, o)| matches!(o, Err(GroupFailure::NoConnection(_))))
    {
        let detail = match &outcomes[0].1 {
            Err(GroupFailure::NoConnection(d)) => d.clone(),
            _ => String::new(),
        };
        return Err(ApiError::Unavailable(format!(
            "database unavailable: {detail}"
        )));
    }
    Ok(outcomes)
}

/// Tallies the outcomes for the metrics (a read of the small fields of each
/// answer; the answers themselves pass on unread), and counts the request once per
/// partition it touched, with each group's items and failed items, into
/// the per-minute figures.
fn tally(request: &AckRequest, outcomes: &Outcomes) -> crate::metrics::AckTally {
    let mut tally = crate::metrics::AckTally::default();
    let status = |index: usize| request.items.get(index).map(|item| item.status);
    let mut partitions = std::collections::HashSet::new();
    for (group, outcome) in outcomes {
        let errors_before = tally.errors();
        match outcome {
            Ok(answer) => tally.add_answer(&answer.0, status),
            Err(_) => tally.add_failed_group(group.len()),
        }
        let partition = group[0].partition_id;
        let first = partitions.insert(partition);
        let failed = tally.errors() - errors_before;
        record(Target::Partition(partition), |f| {
            f.ack_requests += u64::from(first);
            f.ack_messages += group.len() as u64;
            f.ack_failed += failed;
        });
    }
    tally
}

/// Places each group's per-item answers at their request index; a failed
/// group answers `database error: <detail>` for its own items only.
fn merge(count: usize, outcomes: Outcomes) -> Vec<Value> {
    let mut answers = vec![Value::Null; count];
    for (group, outcome) in outcomes {
        let parsed = outcome.map(|raw| (serde_json::from_str::<Vec<Value>>(&raw.0), raw));
        match parsed {
            Ok((Ok(results), _)) if results.len() == group.len() => {
                for (item, result) in group.iter().zip(results) {
                    answers[item.index] = result;
                }
            }
            Ok((_, raw)) => fail_group(
                &mut answers,
                &group,
                &format!("unexpected answer {}", raw.0),
            ),
            Err(GroupFailure::NoConnection(d) | GroupFailure::Database(d)) => {
                fail_group(&mut answers, &group, &d)
            }
        }
    }
    answers
}

/// `noop` is false: the call's outcome is unknown (a connection lost after
/// PostgreSQL committed means the ack did land), so nothing is claimed
/// either way; the inspection routes tell.
fn fail_group(answers: &mut [Value], group: &[&AckItem], detail: &str) {
    for item in group {
        answers[item.index] = json!({
            "index": item.index, "transactionId": item.transaction_id, "success": false,
            "error": format!("database error: {detail}"), "leaseReleased": false,
            "dlq": false, "noop": false,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::body::parse_json;

    const P1: &str = "b1c2d3e4-5f60-7180-9a0b-1c2d3e4f5061";
    const P2: &str = "b1c2d3e4-5f60-7180-9a0b-1c2d3e4f5062";
    const L1: &str = "0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90";

    fn bad(r: Result<AckRequest, ApiError>) -> String {
        match r {
            Err(ApiError::BadRequest(m)) => m,
            other => panic!("expected a 400, got {other:?}"),
        }
    }

    /// docs/ack-contract.md §2, from the table pgcursor.normalise_status is
    /// tested against too (tests/fixtures/status_normalisation.json).
    #[test]
    fn status_normalisation_table() {
        let table = pgcursor_tests::fixtures::status_normalisation();
        assert!(table.len() >= 20, "the fixture lost its cases");
        for (input, expected) in table {
            assert_eq!(normalise_status(input.as_ref()), expected, "{input:?}");
        }
    }

    /// Every item rule of §13, from the table ack_group and the black-box
    /// tests read too (tests/fixtures/bad_ack_items.json).
    #[test]
    fn item_validation_names_field_and_index() {
        let ids = pgcursor_tests::fixtures::AckIds {
            partition: P1.into(),
            lease: L1.into(),
            tx: "t".into(),
        };
        for case in pgcursor_tests::fixtures::bad_ack_items() {
            let (path, body) = case.http(&ids);
            // As the routes read a body: NUL is refused while parsing it.
            let parsed = parse_json(body.to_string().as_bytes()).and_then(|v| match path {
                "/api/v1/ack" => parse_single(&v),
                _ => parse_batch(&v, 100),
            });
            assert_eq!(bad(parsed), case.message, "{}: {body}", case.name);
        }
    }

    #[test]
    fn body_level_validation() {
        let ok = json!({"transactionId": "t", "partitionId": P1});
        let cases = [
            (json!([]), "request body must be a JSON object"),
            (json!({}), "acknowledgments is required"),
            (
                json!({"acknowledgments": {}}),
                "acknowledgments must be an array",
            ),
            (
                json!({"acknowledgments": []}),
                "acknowledgments must not be empty",
            ),
            (
                json!({"acknowledgments": [ok, 5]}),
                "acknowledgments[1] must be an object",
            ),
        ];
        for (body, expected) in cases {
            assert_eq!(bad(parse_batch(&body, 100)), expected, "{body}");
        }
    }

    #[test]
    fn too_many_items_is_413() {
        let item = json!({"transactionId": "t", "partitionId": P1});
        let body = json!({"acknowledgments": [item.clone(), item.clone(), item]});
        assert!(matches!(
            parse_batch(&body, 2),
            Err(ApiError::PayloadTooLarge(_))
        ));
        assert!(parse_batch(&body, 3).is_ok());
    }

    #[test]
    fn per_item_consumer_group_is_not_read() {
        let body = json!({"consumerGroup": "billing", "acknowledgments": [
            {"transactionId": "t", "partitionId": P1, "consumerGroup": 42}]});
        assert_eq!(
            parse_batch(&body, 10).unwrap().consumer_group.as_deref(),
            Some("billing")
        );
    }

    #[test]
    fn single_route_reads_top_level_fields() {
        let body = json!({"transactionId": "t", "partitionId": P1, "leaseId": L1,
                          "status": "retry", "consumerGroup": "g", "error": "e"});
        let request = parse_single(&body).unwrap();
        assert_eq!(request.consumer_group.as_deref(), Some("g"));
        assert_eq!(request.items[0].status, "retry");
        assert_eq!(
            request.items[0].lease_id,
            Some(Uuid::parse_str(L1).unwrap())
        );
        assert_eq!(
            bad(parse_single(&json!({"partitionId": P1}))),
            "transactionId must be a string"
        );
    }

    #[test]
    fn groups_by_partition_and_lease_in_first_appearance_order() {
        let body = json!({"acknowledgments": [
            {"transactionId": "a", "partitionId": P1, "leaseId": L1},
            {"transactionId": "b", "partitionId": P2},
            {"transactionId": "c", "partitionId": P1},
            {"transactionId": "d", "partitionId": P1, "leaseId": L1},
            {"transactionId": "e", "partitionId": P2, "leaseId": null},
        ]});
        let request = parse_batch(&body, 10).unwrap();
        let groups: Vec<Vec<usize>> = group_items(&request.items)
            .iter()
            .map(|g| g.iter().map(|i| i.index).collect())
            .collect();
        assert_eq!(groups, vec![vec![0, 3], vec![1, 4], vec![2]]);
    }

    #[test]
    fn groups_of_one_partition_share_a_lane_in_request_order() {
        let body = json!({"acknowledgments": [
            {"transactionId": "a", "partitionId": P1, "leaseId": L1},
            {"transactionId": "b", "partitionId": P2},
            {"transactionId": "c", "partitionId": P1},
            {"transactionId": "d", "partitionId": P2, "leaseId": L1},
            {"transactionId": "e", "partitionId": P1, "leaseId": L1},
        ]});
        let request = parse_batch(&body, 10).unwrap();
        let lanes: Vec<Vec<Vec<usize>>> = partition_lanes(group_items(&request.items))
            .iter()
            .map(|lane| lane.iter().map(|g| g.iter().map(|i| i.index).collect()).collect())
            .collect();
        assert_eq!(lanes, vec![vec![vec![0, 4], vec![2]], vec![vec![1], vec![3]]]);
    }

    #[test]
    fn merge_restores_request_order_and_isolates_failures() {
        let body = json!({"acknowledgments": [
            {"transactionId": "a", "partitionId": P1},
            {"transactionId": "b", "partitionId": P2},
            {"transactionId": "c", "partitionId": P1},
        ]});
        let request = parse_batch(&body, 10).unwrap();
        let groups = group_items(&request.items);
        let ok = RawJson(r#"[{"index": 0, "success": true}, {"index": 2, "success": true}]"#.into());
        let outcomes = vec![
            (
                groups[1].clone(),
                Err(GroupFailure::Database("boom".into())),
            ),
            (groups[0].clone(), Ok(ok)),
        ];
        let merged = merge(3, outcomes);
        assert_eq!(merged[0]["index"], 0);
        assert_eq!(merged[2]["index"], 2);
        assert_eq!(merged[1]["error"], "database error: boom");
        assert_eq!(merged[1]["transactionId"], "b");
        assert_eq!(merged[1]["success"], false);
        assert_eq!(merged[1]["noop"], false, "a failed call's outcome is unknown");
    }
}
