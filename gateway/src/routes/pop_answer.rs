//! The HTTP pop's answer, written here from `pgcursor.pop_batch`'s row of
//! arrays: PostgreSQL, which every gateway shares, builds no JSON for a pop.
//! The answer is the one `pgcursor.pop` gives psql (tests/http/pop.rs
//! compares the two).

use std::fmt::{self, Write};

use tokio_postgres::Row;
use uuid::Uuid;

use crate::error::ApiError;
use crate::routes::call::{RawJson, RawJsonRef};

/// The statement the gateway pops with.
pub const POP_BATCH_SQL: &str = "SELECT paused, lease_id, consumer_group, partitions_claimed, \
     queue, partition, partition_id, queues, partitions, partition_ids, ids, transaction_ids, \
     offsets, payloads, created_ats, trace_ids, retry_counts FROM pgcursor.pop_batch($1::jsonb)";

/// Per queue an answer delivered from: (queue, messages, and the sum and
/// maximum of their age at pop in ms).
pub type Delivered = (String, i64, i64, i64);

/// One pop, as pop_batch answers it: one element per message in every array.
/// Text is borrowed from the row, not copied per message.
pub struct PopBatch<'a> {
    pub paused: bool,
    lease_id: Option<Uuid>,
    consumer_group: Option<&'a str>,
    pub partitions_claimed: i32,
    queue: Option<&'a str>,
    partition: Option<&'a str>,
    partition_id: Option<Uuid>,
    queues: Vec<&'a str>,
    partitions: Vec<&'a str>,
    partition_ids: Vec<Uuid>,
    ids: Vec<Option<Uuid>>,
    transaction_ids: Vec<&'a str>,
    offsets: Vec<i64>,
    payloads: Vec<Option<RawJsonRef<'a>>>,
    /// Microseconds since 1970, UTC.
    created_ats: Vec<i64>,
    trace_ids: Vec<Option<Uuid>>,
    retry_counts: Vec<i32>,
}

impl<'a> PopBatch<'a> {
    pub fn from_row(row: &'a Row) -> Result<PopBatch<'a>, ApiError> {
        let batch = PopBatch {
            paused: row.try_get(0)?,
            lease_id: row.try_get(1)?,
            consumer_group: row.try_get(2)?,
            partitions_claimed: row.try_get(3)?,
            queue: row.try_get(4)?,
            partition: row.try_get(5)?,
            partition_id: row.try_get(6)?,
            queues: row.try_get(7)?,
            partitions: row.try_get(8)?,
            partition_ids: row.try_get(9)?,
            ids: row.try_get(10)?,
            transaction_ids: row.try_get(11)?,
            offsets: row.try_get(12)?,
            payloads: row.try_get(13)?,
            created_ats: row.try_get(14)?,
            trace_ids: row.try_get(15)?,
            retry_counts: row.try_get(16)?,
        };
        let n = batch.offsets.len();
        let lengths = [
            batch.queues.len(),
            batch.partitions.len(),
            batch.partition_ids.len(),
            batch.ids.len(),
            batch.transaction_ids.len(),
            batch.payloads.len(),
            batch.created_ats.len(),
            batch.trace_ids.len(),
            batch.retry_counts.len(),
        ];
        if lengths.iter().any(|&len| len != n) {
            return Err(ApiError::Internal(format!(
                "pop_batch answered arrays of different lengths: {n} offsets, {lengths:?}"
            )));
        }
        Ok(batch)
    }

    /// Messages in the answer.
    pub fn message_count(&self) -> usize {
        self.offsets.len()
    }

    /// Per queue delivered from, in order of first appearance: the messages
    /// and the sum and maximum of their age at `now_us`, in ms.
    pub fn delivered(&self, now_us: i64) -> Vec<Delivered> {
        let mut per_queue: Vec<Delivered> = Vec::new();
        for (queue, created) in self.queues.iter().zip(&self.created_ats) {
            let age = (now_us.saturating_sub(*created) / 1000).max(0);
            match per_queue.iter_mut().find(|d| d.0 == *queue) {
                Some(d) => {
                    d.1 += 1;
                    d.2 += age;
                    d.3 = d.3.max(age);
                }
                None => per_queue.push((queue.to_string(), 1, age, age)),
            }
        }
        per_queue
    }

    /// The HTTP answer (docs/http-api.md "Popping"), as `pgcursor.pop`
    /// writes it.
    pub fn to_json(&self) -> RawJson {
        if self.paused {
            return RawJson(r#"{"success":true,"messages":[],"paused":true}"#.into());
        }
        if self.partitions_claimed == 0 {
            return RawJson(r#"{"success":true,"messages":[]}"#.into());
        }
        let lease = JsonUuid(self.lease_id.as_ref());
        let group = JsonText(self.consumer_group);
        let mut out = String::with_capacity(256 + self.message_count() * 512);
        let _ = write!(
            out,
            r#"{{"success":true,"queue":{},"partition":{},"partitionId":{},"leaseId":{lease},"consumerGroup":{group},"partitionsClaimed":{},"messages":["#,
            JsonText(self.queue),
            JsonText(self.partition),
            JsonUuid(self.partition_id.as_ref()),
            self.partitions_claimed
        );
        // Written straight into `out`: a String per field and message was
        // most of the gateway's allocations on a pop.
        for i in 0..self.message_count() {
            if i > 0 {
                out.push(',');
            }
            let payload = self.payloads[i].map_or("null", |p| p.0);
            let _ = write!(
                out,
                r#"{{"id":{},"transactionId":{},"partitionId":"{}","partition":{},"queue":{},"offset":{},"leaseId":{lease},"consumerGroup":{group},"data":{payload},"payload":{payload},"createdAt":"{}","traceId":{},"retryCount":{}}}"#,
                JsonUuid(self.ids[i].as_ref()),
                JsonText(Some(self.transaction_ids[i])),
                self.partition_ids[i],
                JsonText(Some(self.partitions[i])),
                JsonText(Some(self.queues[i])),
                self.offsets[i],
                Rfc3339Micros(self.created_ats[i]),
                JsonUuid(self.trace_ids[i].as_ref()),
                self.retry_counts[i],
            );
        }
        out.push_str("]}");
        RawJson(out)
    }
}

/// A string as a JSON string, or null: what serde_json writes, without
/// allocating when nothing needs escaping (no control character, quote or
/// backslash; serde_json leaves every other character as it is).
struct JsonText<'a>(Option<&'a str>);

impl fmt::Display for JsonText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            None => f.write_str("null"),
            Some(text) if text.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') => {
                write!(f, "\"{text}\"")
            }
            Some(text) => f.write_str(&serde_json::Value::from(text).to_string()),
        }
    }
}

/// A UUID as a JSON string, or null.
struct JsonUuid<'a>(Option<&'a Uuid>);

impl fmt::Display for JsonUuid<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            None => f.write_str("null"),
            Some(id) => write!(f, "\"{id}\""),
        }
    }
}

/// `2026-12-03T09:02:40.123456Z` for microseconds since 1970, as
/// `pgcursor_internal.rfc3339_utc` writes a timestamp.
pub fn rfc3339_micros(micros: i64) -> String {
    Rfc3339Micros(micros).to_string()
}

/// Microseconds since 1970 written as `rfc3339_micros` says.
struct Rfc3339Micros(i64);

impl fmt::Display for Rfc3339Micros {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let seconds = self.0.div_euclid(1_000_000);
        let fraction = self.0.rem_euclid(1_000_000);
        let (year, month, day) = civil_date(seconds.div_euclid(86_400));
        let of_day = seconds.rem_euclid(86_400);
        write!(
            f,
            "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{fraction:06}Z",
            of_day / 3600,
            of_day % 3600 / 60,
            of_day % 60
        )
    }
}

/// The date of a day counted from 1970-01-01, in the proleptic Gregorian
/// calendar (counting in 400-year eras that start on 1 March, so that leap
/// days fall last).
fn civil_date(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_written_as_pop_writes_them() {
        assert_eq!(rfc3339_micros(0), "1970-01-01T00:00:00.000000Z");
        assert_eq!(
            rfc3339_micros(951_782_400_000_001),
            "2000-02-29T00:00:00.000001Z"
        );
        assert_eq!(
            rfc3339_micros(951_868_800_000_000),
            "2000-03-01T00:00:00.000000Z"
        );
        assert_eq!(
            rfc3339_micros(1_796_288_560_123_456),
            "2026-12-03T09:02:40.123456Z"
        );
        assert_eq!(
            rfc3339_micros(4_107_542_399_999_999),
            "2100-02-28T23:59:59.999999Z"
        );
        assert_eq!(rfc3339_micros(-1), "1969-12-31T23:59:59.999999Z");
    }

    #[test]
    fn strings_are_written_as_serde_json_writes_them() {
        for text in ["plain", "a\"b\\c\n", "é ✓ /x", "\u{1f}", "", "tab\there"] {
            assert_eq!(
                JsonText(Some(text)).to_string(),
                serde_json::Value::from(text).to_string(),
                "{text:?}"
            );
        }
        assert_eq!(JsonText(None).to_string(), "null");
        assert_eq!(JsonUuid(None).to_string(), "null");
        assert_eq!(
            JsonUuid(Some(&Uuid::nil())).to_string(),
            "\"00000000-0000-0000-0000-000000000000\""
        );
    }

    fn batch<'a>(queues: &[&'a str], created_ats: &[i64]) -> PopBatch<'a> {
        let n = queues.len();
        PopBatch {
            paused: false,
            lease_id: None,
            consumer_group: Some("g"),
            partitions_claimed: 1,
            queue: Some(queues[0]),
            partition: Some("p"),
            partition_id: Some(Uuid::nil()),
            queues: queues.to_vec(),
            partitions: vec!["p"; n],
            partition_ids: vec![Uuid::nil(); n],
            ids: vec![None; n],
            transaction_ids: ["t1", "t2", "t3", "t4", "t5", "t6"][..n].to_vec(),
            offsets: (1..=n as i64).collect(),
            payloads: vec![None; n],
            created_ats: created_ats.to_vec(),
            trace_ids: vec![None; n],
            retry_counts: vec![0; n],
        }
    }

    #[test]
    fn delivered_counts_per_queue_and_ages_in_ms() {
        let b = batch(&["a", "b\"q", "a"], &[1_000_000, 4_000_000, 3_500_000]);
        assert_eq!(
            b.delivered(5_000_000),
            vec![
                ("a".to_string(), 2, 5_500, 4_000),
                ("b\"q".to_string(), 1, 1_000, 1_000)
            ]
        );
    }

    #[test]
    fn the_answer_is_json_with_every_field() {
        let answer: serde_json::Value =
            serde_json::from_str(&batch(&["q"], &[0]).to_json().0).unwrap();
        assert_eq!(
            answer,
            serde_json::json!({"success": true, "queue": "q", "partition": "p",
                "partitionId": Uuid::nil(), "leaseId": null, "consumerGroup": "g", "partitionsClaimed": 1,
                "messages": [{"id": null, "transactionId": "t1", "partitionId": Uuid::nil(), "partition": "p",
                    "queue": "q", "offset": 1, "leaseId": null, "consumerGroup": "g", "data": null,
                    "payload": null, "createdAt": "1970-01-01T00:00:00.000000Z", "traceId": null,
                    "retryCount": 0}]})
        );
    }
}
