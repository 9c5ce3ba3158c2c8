//! The tables in `tests/fixtures/` that more than one owner of a rule is
//! tested against (the gateway's Rust, the SQL, the black-box routes), so a
//! case written once is checked everywhere.

use serde_json::{json, Map, Value};

/// One malformed acknowledgement (docs/ack-contract.md §13), as
/// tests/fixtures/bad_ack_items.json describes it.
#[derive(Debug, Clone)]
pub struct BadAck {
    pub name: String,
    /// "batch" or "single".
    pub route: String,
    /// The gateway's 400 message and ack_group's 22023 message.
    pub message: String,
    /// Why no psql call can carry this case, when none can.
    pub not_in_sql: Option<String>,
    item: Option<Value>,
    top: Option<Value>,
}

/// The real ids a case's "$partition", "$lease" and "$tx" stand for.
#[derive(Debug, Clone)]
pub struct AckIds {
    pub partition: String,
    pub lease: String,
    pub tx: String,
}

pub fn bad_ack_items() -> Vec<BadAck> {
    let table: Value = serde_json::from_str(include_str!("../fixtures/bad_ack_items.json"))
        .expect("bad_ack_items.json");
    table["cases"]
        .as_array()
        .expect("cases")
        .iter()
        .map(|c| BadAck {
            name: c["name"].as_str().expect("name").into(),
            route: c["route"].as_str().expect("route").into(),
            message: c["message"].as_str().expect("message").into(),
            not_in_sql: c["sql"].as_str().map(Into::into),
            item: c.get("item").cloned(),
            top: c.get("top").cloned(),
        })
        .collect()
}

impl BadAck {
    /// The HTTP route and body.
    pub fn http(&self, ids: &AckIds) -> (&'static str, Value) {
        let item = self.bad_item(ids);
        let mut body = match self.route.as_str() {
            "single" => item,
            _ => json!({"consumerGroup": "g", "acknowledgments": [valid_item(ids), item]}),
        };
        if let (Some(fields), Some(top)) = (body.as_object_mut(), &self.top) {
            for (k, v) in substitute(top, ids).as_object().expect("top is an object") {
                fields.insert(k.clone(), v.clone());
            }
        }
        let path = if self.route == "single" {
            "/api/v1/ack"
        } else {
            "/api/v1/ack/batch"
        };
        (path, body)
    }

    /// The `pgcursor.ack_group` request of the bad item's group, or None
    /// when no psql call can carry the case.
    pub fn sql(&self, ids: &AckIds) -> Option<Value> {
        if self.not_in_sql.is_some() {
            return None;
        }
        let (_, body) = self.http(ids);
        let bad = self.bad_item(ids);
        let cursor_fields = if bad.is_object() {
            bad.clone()
        } else {
            valid_item(ids)
        };
        let source = if self.route == "single" {
            &body
        } else {
            &cursor_fields
        };
        let mut request = Map::new();
        for key in ["partitionId", "leaseId"] {
            if let Some(v) = source.get(key) {
                request.insert(key.into(), v.clone());
            }
        }
        if let Some(group) = body.get("consumerGroup") {
            request.insert("consumerGroup".into(), group.clone());
        }
        let items = match self.route.as_str() {
            "single" => vec![group_item(0, &body)],
            _ => vec![group_item(0, &valid_item(ids)), group_item(1, &bad)],
        };
        request.insert("items".into(), Value::Array(items));
        Some(Value::Object(request))
    }

    fn bad_item(&self, ids: &AckIds) -> Value {
        self.item
            .as_ref()
            .map_or_else(|| valid_item(ids), |i| substitute(i, ids))
    }
}

/// The well-formed acknowledgement every case starts from.
fn valid_item(ids: &AckIds) -> Value {
    json!({"transactionId": ids.tx, "partitionId": ids.partition, "leaseId": ids.lease})
}

/// An ack_group item from an acknowledgement: its own fields as they came
/// (a non-object stays what it is, for ack_group to refuse).
fn group_item(index: usize, ack: &Value) -> Value {
    let Some(fields) = ack.as_object() else {
        return ack.clone();
    };
    let mut item = Map::from_iter([("index".to_string(), json!(index))]);
    for key in ["transactionId", "status", "error"] {
        if let Some(v) = fields.get(key) {
            item.insert(key.into(), v.clone());
        }
    }
    Value::Object(item)
}

fn substitute(value: &Value, ids: &AckIds) -> Value {
    match value {
        Value::String(s) => Value::String(match s.as_str() {
            "$partition" => ids.partition.clone(),
            "$lease" => ids.lease.clone(),
            "$tx" => ids.tx.clone(),
            _ => s.clone(),
        }),
        Value::Array(a) => Value::Array(a.iter().map(|v| substitute(v, ids)).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, v)| (k.clone(), substitute(v, ids)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// docs/ack-contract.md §2, from tests/fixtures/status_normalisation.json:
/// (status sent, None when absent; what it becomes).
pub fn status_normalisation() -> Vec<(Option<Value>, String)> {
    let table: Value = serde_json::from_str(include_str!("../fixtures/status_normalisation.json"))
        .expect("status_normalisation.json");
    table["cases"]
        .as_array()
        .expect("cases")
        .iter()
        .map(|c| {
            (
                c.get("status").cloned(),
                c["becomes"].as_str().expect("becomes").into(),
            )
        })
        .collect()
}
