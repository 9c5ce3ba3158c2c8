//! The HTTP pop's answer, written here from `pgcursor.pop_messages`' rows
//! (one per message): PostgreSQL, which every gateway shares, builds no
//! JSON for a pop. The answer is the one `pgcursor.pop` gives psql
//! (tests/http/produce_consume.rs compares the two).

use std::fmt::{self, Write};
use std::time::{SystemTime, UNIX_EPOCH};

use tokio_postgres::Row;
use uuid::Uuid;

use crate::error::ApiError;
use crate::routes::call::{RawJson, RawJsonRef};

/// A pop's answer when nothing was available.
pub const NOTHING: &str = r#"{"success":true,"messages":[]}"#;

/// The statement the gateway pops with.
pub const POP_MESSAGES_SQL: &str = "SELECT paused, lease_id, consumer_group, partitions_claimed, \
     queue, partition, partition_id, retry_count, message_id, transaction_id, msg_offset, payload, \
     created_at, trace_id, window_buffer_active FROM pgcursor.pop_messages($1::jsonb)";

/// Per queue an answer delivered from: (queue, messages, and the sum and
/// maximum of their age at pop in ms).
pub type Delivered = (String, i64, i64, i64);

/// One pop, as pop_messages answers it. Text is borrowed from the rows, not
/// copied per message.
pub struct PopBatch<'a> {
    pub paused: bool,
    lease_id: Option<Uuid>,
    consumer_group: Option<&'a str>,
    pub partitions_claimed: i32,
    /// Nothing claimed from a named partition its windowBuffer holds back.
    window_buffer_active: bool,
    /// The first claimed partition: (queue, partition, partition id).
    first: (Option<&'a str>, Option<&'a str>, Option<Uuid>),
    messages: Vec<Popped<'a>>,
}

/// One delivered message and the partition it came from.
struct Popped<'a> {
    queue: &'a str,
    partition: &'a str,
    partition_id: Uuid,
    retry_count: i32,
    id: Option<Uuid>,
    transaction_id: &'a str,
    offset: i64,
    payload: Option<RawJsonRef<'a>>,
    /// Microseconds since 1970, UTC.
    created_at: i64,
    trace_id: Option<Uuid>,
}

impl<'a> Popped<'a> {
    /// The message of a row, or None for a row without one (nothing
    /// claimed, paused, or a claim whose messages retention deleted).
    fn from_row(row: &'a Row) -> Result<Option<Popped<'a>>, ApiError> {
        let Some(offset) = row.try_get::<_, Option<i64>>(10)? else {
            return Ok(None);
        };
        Ok(Some(Popped {
            queue: row.try_get(4)?,
            partition: row.try_get(5)?,
            partition_id: row.try_get(6)?,
            retry_count: row.try_get(7)?,
            id: row.try_get(8)?,
            transaction_id: row.try_get(9)?,
            offset,
            payload: row.try_get(11)?,
            created_at: micros_since_1970(row.try_get(12)?),
            trace_id: row.try_get(13)?,
        }))
    }
}

/// Microseconds since 1970 (negative before it).
pub fn micros_since_1970(t: SystemTime) -> i64 {
    let micros = |d: std::time::Duration| i64::try_from(d.as_micros()).unwrap_or(i64::MAX);
    match t.duration_since(UNIX_EPOCH) {
        Ok(after) => micros(after),
        Err(before) => -micros(before.duration()),
    }
}

impl<'a> PopBatch<'a> {
    pub fn from_rows(rows: &'a [Row]) -> Result<PopBatch<'a>, ApiError> {
        let head = rows
            .first()
            .ok_or_else(|| ApiError::Internal("pop_messages answered no row".into()))?;
        let mut messages = Vec::with_capacity(rows.len());
        for row in rows {
            messages.extend(Popped::from_row(row)?);
        }
        Ok(PopBatch {
            paused: head.try_get(0)?,
            lease_id: head.try_get(1)?,
            consumer_group: head.try_get(2)?,
            partitions_claimed: head.try_get(3)?,
            window_buffer_active: head.try_get(14)?,
            first: (head.try_get(4)?, head.try_get(5)?, head.try_get(6)?),
            messages,
        })
    }

    /// The lease the pop took and its group: None when it leased nothing
    /// (nothing claimed, paused, or autoAck).
    pub fn lease(&self) -> Option<(Uuid, &'a str)> {
        let claimed = self.partitions_claimed > 0;
        self.lease_id.zip(self.consumer_group).filter(|_| claimed)
    }

    /// The partitions the pop claimed, each once, from every row (a claim
    /// whose messages retention deleted has a row without messages).
    pub fn claimed_partitions(rows: &[Row]) -> Result<Vec<Uuid>, ApiError> {
        let mut ids = Vec::with_capacity(rows.len());
        for row in rows {
            ids.extend(row.try_get::<_, Option<Uuid>>(6)?);
        }
        ids.sort_unstable();
        ids.dedup();
        Ok(ids)
    }

    /// Messages in the answer.
    pub fn message_count(&self) -> usize {
        self.messages.len()
    }

    /// Per queue delivered from, in order of first appearance: the messages
    /// and the sum and maximum of their age at `now_us`, in ms.
    pub fn delivered(&self, now_us: i64) -> Vec<Delivered> {
        let mut per_queue: Vec<Delivered> = Vec::new();
        for m in &self.messages {
            let age = (now_us.saturating_sub(m.created_at) / 1000).max(0);
            match per_queue.iter_mut().find(|d| d.0 == m.queue) {
                Some(d) => {
                    d.1 += 1;
                    d.2 += age;
                    d.3 = d.3.max(age);
                }
                None => per_queue.push((m.queue.to_string(), 1, age, age)),
            }
        }
        per_queue
    }

    /// What the answer's length will be, about: the payload twice per
    /// message (data and payload), and its other fields' 440 bytes or so
    /// with room for longer names. Sized once, the answer is not copied
    /// again as it grows.
    fn answer_size(&self) -> usize {
        let payloads: usize = self
            .messages
            .iter()
            .map(|m| m.payload.map_or(4, |p| p.0.len()))
            .sum();
        256 + 2 * payloads + 480 * self.message_count()
    }

    /// The HTTP answer (docs/http-api.md "Popping"), as `pgcursor.pop`
    /// writes it.
    pub fn to_json(&self) -> RawJson {
        if self.paused {
            return RawJson(r#"{"success":true,"messages":[],"paused":true}"#.into());
        }
        if self.partitions_claimed == 0 && self.window_buffer_active {
            return RawJson(
                r#"{"success":true,"messages":[],"windowBufferActive":true,"leaseId":""}"#.into(),
            );
        }
        if self.partitions_claimed == 0 {
            return RawJson(NOTHING.into());
        }
        let lease = JsonUuid(self.lease_id.as_ref());
        let group = JsonText(self.consumer_group);
        let mut out = String::with_capacity(self.answer_size());
        let _ = write!(
            out,
            r#"{{"success":true,"queue":{},"partition":{},"partitionId":{},"leaseId":{lease},"consumerGroup":{group},"partitionsClaimed":{},"messages":["#,
            JsonText(self.first.0),
            JsonText(self.first.1),
            JsonUuid(self.first.2.as_ref()),
            self.partitions_claimed
        );
        // Written straight into `out`: a String per field and message was
        // most of the gateway's allocations on a pop.
        for (i, m) in self.messages.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let payload = m.payload.map_or("null", |p| p.0);
            let _ = write!(
                out,
                r#"{{"id":{},"transactionId":{},"partitionId":"{}","partition":{},"queue":{},"offset":{},"leaseId":{lease},"consumerGroup":{group},"data":{payload},"payload":{payload},"createdAt":"{}","traceId":{},"producerSub":null,"retryCount":{}}}"#,
                JsonUuid(m.id.as_ref()),
                JsonText(Some(m.transaction_id)),
                m.partition_id,
                JsonText(Some(m.partition)),
                JsonText(Some(m.queue)),
                m.offset,
                Rfc3339Micros(m.created_at),
                JsonUuid(m.trace_id.as_ref()),
                m.retry_count,
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
        let messages = queues
            .iter()
            .zip(created_ats)
            .zip(["t1", "t2", "t3", "t4", "t5", "t6"])
            .enumerate()
            .map(|(i, ((queue, created_at), transaction_id))| Popped {
                queue,
                partition: "p",
                partition_id: Uuid::nil(),
                retry_count: 0,
                id: None,
                transaction_id,
                offset: i as i64 + 1,
                payload: None,
                created_at: *created_at,
                trace_id: None,
            })
            .collect();
        PopBatch {
            paused: false,
            lease_id: None,
            consumer_group: Some("g"),
            partitions_claimed: 1,
            window_buffer_active: false,
            first: (Some(queues[0]), Some("p"), Some(Uuid::nil())),
            messages,
        }
    }

    #[test]
    fn times_before_and_after_1970_are_microseconds_from_it() {
        let second = std::time::Duration::from_secs(1);
        assert_eq!(micros_since_1970(UNIX_EPOCH + second), 1_000_000);
        assert_eq!(micros_since_1970(UNIX_EPOCH - second), -1_000_000);
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
                    "producerSub": null, "retryCount": 0}]})
        );
    }
}
