//! Encrypted queues (`encryptionEnabled`, docs/http-api.md "Encrypted
//! queues"): payloads are stored as an AES-256-GCM envelope that Queen MQ
//! would read, and HTTP readers get them back in plaintext.
//!
//! The envelope: the payload as compact JSON text, encrypted with the key
//! from `PGCURSOR_ENCRYPTION_KEY`; 16 random IV bytes of which only the first
//! 12 are the GCM nonce (Queen uses OpenSSL's default nonce length), no AAD,
//! a 16-byte tag. Stored as `{"encrypted", "iv", "authTag"}`, each standard
//! base64 with padding, `iv` holding all 16 bytes.
//!
//! Which queues are encrypted: the gateway does not ask before every push.
//! `pgcursor.push` itself refuses (SQLSTATE PCENC, the queue names in the
//! detail, nothing written) any item for a queue with `encryption_enabled`
//! whose payload is not an envelope, so no path stores plaintext there: not
//! a gateway without the key, not one that has not heard of the change yet,
//! not psql. A gateway with the key seals the refused queues' items and
//! tries again, and remembers those queues for `KNOWN_FOR` so that the next
//! pushes to them are sealed up front. A push to unencrypted queues thus
//! costs nothing more than the guard's index probe inside the push; a
//! remembered queue that is no longer encrypted gets envelopes for at most
//! `KNOWN_FOR`, which HTTP readers open all the same. A payload shaped like
//! an envelope passes the guard as one, so a push that may hold one (the
//! key `authTag`, maybe escaped) asks first which of its queues are
//! encrypted (`asks_before_pushing`, `encrypted_if_envelope_shaped`): a
//! gateway with the key seals their items, one without refuses the push.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use aes_gcm::aead::rand_core::RngCore;
use aes_gcm::aead::{Aead, KeyInit, OsRng};
use aes_gcm::{Aes256Gcm, Nonce};
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::error::ApiError;
use crate::routes::call::RawJson;
use deadpool_postgres::Pool;

/// The environment variable holding the key, and the alias Queen reads.
pub const KEY_VAR: &str = "PGCURSOR_ENCRYPTION_KEY";
pub const KEY_ALIAS: &str = "QUEEN_ENCRYPTION_KEY";

/// How long a queue found encrypted is sealed for without asking again.
pub const KNOWN_FOR: Duration = Duration::from_secs(60);

/// Stored IV length (Queen's); the nonce is its first `NONCE_LEN` bytes.
const IV_LEN: usize = 16;
const NONCE_LEN: usize = 12;
const TAG_LEN: usize = 16;

/// The envelope's keys, exactly these three.
const ENCRYPTED: &str = "encrypted";
const IV: &str = "iv";
const AUTH_TAG: &str = "authTag";

/// An AES-256 key (never printed).
#[derive(Clone)]
pub struct Key(Aes256Gcm);

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Key(..)")
    }
}

impl Key {
    /// Exactly 64 hex characters (32 bytes). The error never echoes the value.
    pub fn parse(s: &str) -> Result<Key, String> {
        let bytes = hex::decode(s.trim())
            .ok()
            .filter(|b| b.len() == 32)
            .ok_or_else(|| {
                format!(
                "must be exactly 64 hex characters (a 32-byte AES-256 key), got {} characters{}",
                s.trim().chars().count(),
                if s.trim().chars().all(|c| c.is_ascii_hexdigit()) {
                    ""
                } else {
                    " with non-hex ones"
                }
            )
            })?;
        let cipher = Aes256Gcm::new_from_slice(&bytes).map_err(|e| e.to_string())?;
        Ok(Key(cipher))
    }

    /// The envelope of `payload`, with a fresh random IV.
    pub fn seal(&self, payload: &Value) -> Value {
        let mut iv = [0u8; IV_LEN];
        OsRng.fill_bytes(&mut iv);
        self.seal_with_iv(payload, &iv)
    }

    fn seal_with_iv(&self, payload: &Value, iv: &[u8; IV_LEN]) -> Value {
        let plaintext = serde_json::to_vec(payload).expect("a JSON value serialises");
        let mut sealed = self
            .0
            .encrypt(Nonce::from_slice(&iv[..NONCE_LEN]), plaintext.as_slice())
            .expect("AES-GCM encrypts any message this size");
        // aes-gcm appends the tag to the ciphertext; the envelope keeps it apart.
        let tag = sealed.split_off(sealed.len() - TAG_LEN);
        let mut envelope = Map::new();
        envelope.insert(ENCRYPTED.into(), Value::String(BASE64.encode(&sealed)));
        envelope.insert(IV.into(), Value::String(BASE64.encode(iv)));
        envelope.insert(AUTH_TAG.into(), Value::String(BASE64.encode(&tag)));
        Value::Object(envelope)
    }

    /// The payload inside `value`, if it is an envelope (an object with
    /// exactly the three keys) that this key opens and that holds JSON;
    /// `None` leaves the value as it is.
    pub fn open(&self, value: &Value) -> Option<Value> {
        let envelope = value.as_object().filter(|o| o.len() == 3)?;
        let field = |name: &str| {
            envelope
                .get(name)
                .and_then(Value::as_str)
                .and_then(|s| BASE64.decode(s).ok())
        };
        let (ciphertext, iv, tag) = (field(ENCRYPTED)?, field(IV)?, field(AUTH_TAG)?);
        if iv.len() < NONCE_LEN || tag.len() != TAG_LEN {
            return None;
        }
        let mut sealed = ciphertext;
        sealed.extend_from_slice(&tag);
        let plaintext = self
            .0
            .decrypt(Nonce::from_slice(&iv[..NONCE_LEN]), sealed.as_slice())
            .ok()?;
        serde_json::from_slice(&plaintext).ok()
    }
}

/// The gateway's encryption state: the key, if configured, and the queues
/// lately found encrypted.
#[derive(Debug, Default)]
pub struct Encryption {
    key: Option<Key>,
    known: Mutex<HashMap<String, Instant>>,
}

/// Where a request keeps its push items.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Items {
    /// `POST /api/v1/push`: `items`.
    Push,
    /// `POST /api/v1/transaction`: `operations[*].items` of push operations.
    Transaction,
}

impl Items {
    fn each<'a>(self, request: &'a Value) -> Box<dyn Iterator<Item = &'a Value> + 'a> {
        let items = |v: &'a Value| {
            v.get("items")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
        };
        match self {
            Items::Push => Box::new(items(request)),
            Items::Transaction => Box::new(
                request
                    .get("operations")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter(|op| op.get("type").and_then(Value::as_str) == Some("push"))
                    .flat_map(items),
            ),
        }
    }

    fn each_mut<'a>(self, request: &'a mut Value) -> Box<dyn Iterator<Item = &'a mut Value> + 'a> {
        let items = |v: &'a mut Value| {
            v.get_mut("items")
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
        };
        match self {
            Items::Push => Box::new(items(request)),
            Items::Transaction => Box::new(
                request
                    .get_mut("operations")
                    .and_then(Value::as_array_mut)
                    .into_iter()
                    .flatten()
                    .filter(|op| op.get("type").and_then(Value::as_str) == Some("push"))
                    .flat_map(items),
            ),
        }
    }
}

fn queue_of(item: &Value) -> Option<&str> {
    item.get("queue").and_then(Value::as_str)
}

impl Encryption {
    pub fn new(key: Option<Key>) -> Encryption {
        Encryption {
            key,
            known: Mutex::new(HashMap::new()),
        }
    }

    pub fn key(&self) -> Option<&Key> {
        self.key.as_ref()
    }

    /// The queues of `request` lately found encrypted (none without a key).
    pub fn known_among(&self, request: &Value, items: Items) -> HashSet<String> {
        self.known_of(items.each(request).filter_map(queue_of))
    }

    /// Which of `queues` were lately found encrypted (none without a key).
    pub fn known_of<'a>(&self, queues: impl Iterator<Item = &'a str>) -> HashSet<String> {
        if self.key.is_none() {
            return HashSet::new();
        }
        let mut known = self.known.lock().expect("not poisoned");
        if known.is_empty() {
            return HashSet::new();
        }
        let now = Instant::now();
        known.retain(|_, since| now.duration_since(*since) < KNOWN_FOR);
        queues
            .filter(|q| known.contains_key(*q))
            .map(str::to_owned)
            .collect()
    }

    /// Whether a push of `body` must first ask which of its queues are
    /// encrypted (encrypted_if_envelope_shaped): when the body may hold a
    /// payload shaped like an envelope (the key `authTag`, maybe escaped:
    /// may_name_auth_tag). The push's guard takes such a payload for an
    /// envelope, so it would be stored as sent, plaintext and all: by a
    /// gateway with the key that had not yet learned its queue is
    /// encrypted (and its readers got it opened), and by one without the
    /// key, which must refuse every push to an encrypted queue.
    pub fn asks_before_pushing(&self, body: &[u8]) -> bool {
        may_name_auth_tag(body)
    }

    /// The encrypted queues among those of `request`'s items whose payload
    /// is shaped like an envelope, asked of the database when
    /// `asks_before_pushing(body)` and there is such an item; none, unasked,
    /// for other pushes (a text that only escapes a character, as Python's
    /// json.dumps does every non-ASCII one, costs no lookup).
    pub async fn encrypted_if_envelope_shaped(
        &self,
        pool: &Pool,
        body: &[u8],
        request: &Value,
        items: Items,
    ) -> Result<Vec<String>, ApiError> {
        if !self.asks_before_pushing(body) {
            return Ok(Vec::new());
        }
        let mut queues: Vec<&str> = items
            .each(request)
            .filter(|item| item.get("payload").is_some_and(is_envelope_shaped))
            .filter_map(queue_of)
            .collect();
        if queues.is_empty() {
            return Ok(Vec::new());
        }
        queues.sort_unstable();
        queues.dedup();
        let client = pool.get().await?;
        let row = client
            .query_one("SELECT pgcursor_internal.encrypted_among($1)", &[&queues])
            .await?;
        Ok(row.try_get::<_, Vec<String>>(0)?)
    }

    /// Remembers queues the database said are encrypted.
    pub fn learn(&self, queues: &[String]) {
        let now = Instant::now();
        let mut known = self.known.lock().expect("not poisoned");
        for q in queues {
            known.insert(q.clone(), now);
        }
    }

    /// Replaces the payload of every item of `request` whose queue is in
    /// `queues` by its envelope (no-op without a key). The caller names
    /// each queue in one call only: a second would seal the envelope.
    pub fn seal_items(&self, request: &mut Value, items: Items, queues: &HashSet<String>) {
        let Some(key) = &self.key else { return };
        for item in items.each_mut(request) {
            if !queue_of(item).is_some_and(|q| queues.contains(q)) {
                continue;
            }
            if let Some(payload) = item.get_mut("payload") {
                *payload = key.seal(payload);
            }
        }
    }

    /// Opens the envelopes in an answer's `data`/`payload` fields, at the top
    /// level (message detail) and in each of `messages` (pop, dead letters),
    /// off the event loop for a long answer. Answers without the text
    /// `"authTag"` (and every answer when the gateway has no key) are passed
    /// on unread.
    pub async fn open_answer(&self, answer: RawJson) -> Result<RawJson, ApiError> {
        let Some(key) = self.key.clone() else {
            return Ok(answer);
        };
        if !answer.0.contains("\"authTag\"") {
            return Ok(answer);
        }
        crate::body::parse_off_the_loop_if_long(answer.0.len(), move || {
            open_envelopes(&key, answer, PAYLOAD_FIELDS, "messages", PAYLOAD_FIELDS)
        })
        .await
    }

    /// Opens the envelope in `field` of each element of `list` (traces by
    /// name: `traces[].message_payload`). As `open_answer`, answers without
    /// `"authTag"` are passed on unread.
    pub fn open_in_list(&self, answer: RawJson, list: &str, field: &str) -> RawJson {
        let Some(key) = &self.key else { return answer };
        if !answer.0.contains("\"authTag\"") {
            return answer;
        }
        open_envelopes(key, answer, &[], list, &[field])
    }
}

/// Whether a JSON text may hold the key `authTag`: written out, or with an
/// escape (`"auth\u0054ag"` is the same key once parsed). Only bodies
/// without either go to the database unread.
/// What the push's guard takes for an envelope (pgcursor_internal.is_envelope):
/// an object of exactly the string fields encrypted, iv and authTag.
fn is_envelope_shaped(payload: &Value) -> bool {
    payload.as_object().is_some_and(|o| {
        o.len() == 3
            && [ENCRYPTED, IV, AUTH_TAG]
                .iter()
                .all(|k| o.get(*k).is_some_and(Value::is_string))
    })
}

/// Whether a JSON text may hold the key `authTag`: as written, or with one
/// of its letters escaped (`"auth\u0054ag"`). Other escapes, such as those
/// json.dumps writes for every non-ASCII character, spell no letter of it.
fn may_name_auth_tag(body: &[u8]) -> bool {
    memchr::memmem::find(body, b"authTag").is_some()
        || memchr::memmem::find_iter(body, b"\\u").any(|at| {
            let hex = body
                .get(at + 2..at + 6)
                .and_then(|h| std::str::from_utf8(h).ok());
            let letter = hex
                .and_then(|h| u32::from_str_radix(h, 16).ok())
                .and_then(char::from_u32);
            letter.is_some_and(|c| "authTg".contains(c))
        })
}

/// Where an answer's message carries its payload.
const PAYLOAD_FIELDS: &[&str] = &["data", "payload"];

/// A JSON object read one level deep: each field's value kept as its text.
/// A value nested past serde_json's limit (a payload stored through psql
/// may nest thousands deep) thus keeps no other field from being opened.
type Fields = BTreeMap<String, Box<RawValue>>;

/// `answer` with the envelopes opened in its `top` fields and in the
/// `fields` of each object of its array `list`; as it was when none opened.
fn open_envelopes(
    key: &Key,
    answer: RawJson,
    top: &[&str],
    list: &str,
    fields: &[&str],
) -> RawJson {
    let Ok(mut object) = serde_json::from_str::<Fields>(&answer.0) else {
        return answer;
    };
    let mut opened = open_fields(key, &mut object, top);
    if let Some(items) = object.get_mut(list) {
        if let Ok(mut each) = serde_json::from_str::<Vec<Fields>>(items.get()) {
            let mut any = false;
            for item in &mut each {
                any |= open_fields(key, item, fields);
            }
            if any {
                *items = serde_json::value::to_raw_value(&each).expect("raw values serialise");
                opened = true;
            }
        }
    }
    if !opened {
        return answer;
    }
    RawJson(serde_json::to_string(&object).expect("raw values serialise"))
}

/// Opens the envelopes among `names` of one object; whether any opened.
fn open_fields(key: &Key, object: &mut Fields, names: &[&str]) -> bool {
    let mut opened = false;
    for name in names {
        let Some(raw) = object.get_mut(*name) else {
            continue;
        };
        // An envelope is a small object; anything else is left unparsed.
        if !(raw.get().starts_with('{') && raw.get().contains("\"authTag\"")) {
            continue;
        }
        let Ok(value) = serde_json::from_str::<Value>(raw.get()) else {
            continue;
        };
        if let Some(plain) = key.open(&value) {
            *raw = serde_json::value::to_raw_value(&plain).expect("a JSON value serialises");
            opened = true;
        }
    }
    opened
}

/// The queue names in the detail of a PCENC refusal (a JSON array).
pub fn refused_queues(detail: Option<&str>) -> Vec<String> {
    detail
        .and_then(|d| serde_json::from_str(d).ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    // A key and IV chosen by hand: bytes 00..1f and a0..af.
    const KEY: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
    const VECTOR_IV: [u8; 16] = [
        0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xab, 0xac, 0xad, 0xae,
        0xaf,
    ];

    fn key() -> Key {
        Key::parse(KEY).unwrap()
    }

    #[test]
    fn round_trip() {
        let key = key();
        for payload in [
            json!({"orderId": 1001, "total": 25.5, "tags": ["a", "é"]}),
            json!("just a string"),
            json!(42),
            json!(null),
            json!([]),
        ] {
            let envelope = key.seal(&payload);
            assert_ne!(envelope, payload);
            assert_eq!(key.open(&envelope), Some(payload));
        }
    }

    #[test]
    fn envelope_shape() {
        let envelope = key().seal(&json!({"secret": "plaintext-marker"}));
        let object = envelope.as_object().unwrap();
        let mut keys: Vec<&str> = object.keys().map(String::as_str).collect();
        keys.sort();
        assert_eq!(keys, ["authTag", "encrypted", "iv"]);
        let decoded = |k: &str| BASE64.decode(object[k].as_str().unwrap()).unwrap();
        assert_eq!(decoded("iv").len(), 16);
        assert_eq!(decoded("authTag").len(), 16);
        // GCM is a stream mode: the ciphertext is as long as the JSON text.
        assert_eq!(
            decoded("encrypted").len(),
            r#"{"secret":"plaintext-marker"}"#.len()
        );
        assert!(!envelope.to_string().contains("plaintext-marker"));
        // Fresh IVs: the same payload seals differently every time.
        assert_ne!(key().seal(&json!(1))["iv"], key().seal(&json!(1))["iv"]);
    }

    /// A body asks about encrypted queues when it may spell authTag, not
    /// for every escape (json.dumps escapes all non-ASCII text).
    #[test]
    fn only_a_body_that_may_spell_auth_tag_asks() {
        for (body, asks) in [
            (r#"{"authTag": "x"}"#, true),
            (r#"{"auth\u0054ag": "x"}"#, true),
            (r#"{"\u0061uthTag": "x"}"#, true),
            (r#"{"note": "caf\u00e9 \ud83d\ude00"}"#, false),
            (r#"{"note": "plain"}"#, false),
            (r#"{"cut": "\u00"}"#, false),
        ] {
            assert_eq!(may_name_auth_tag(body.as_bytes()), asks, "{body}");
        }
    }

    /// The same shape as pgcursor_internal.is_envelope, the push's guard.
    #[test]
    fn envelope_shaped_is_what_the_guard_takes_for_an_envelope() {
        assert!(is_envelope_shaped(&key().seal(&json!(1))));
        assert!(is_envelope_shaped(
            &json!({"encrypted": "a", "iv": "b", "authTag": "c"})
        ));
        for not in [
            json!({"encrypted": "a", "iv": "b", "authTag": "c", "more": 1}),
            json!({"encrypted": "a", "iv": "b", "authTag": 5}),
            json!({"encrypted": "a", "iv": "b"}),
            json!({"text": "café"}),
            json!(["encrypted", "iv", "authTag"]),
        ] {
            assert!(!is_envelope_shaped(&not), "{not}");
        }
    }

    /// Computed independently with Python's `cryptography` package (48.0):
    /// `AESGCM(bytes(range(32))).encrypt(bytes(range(0xa0, 0xb0))[:12],
    ///  b'{"note":"h\xc3\xa9llo","orderId":1001,"total":25.5}', None)`,
    /// split into ciphertext and the last 16 bytes (the tag), base64-encoded,
    /// the IV field holding all 16 IV bytes.
    #[test]
    fn matches_an_independent_vector() {
        let expected = json!({
            "encrypted": "nToSQjGuIIVADUR6axav/FyONmL20jAl+Cwct0+bRC3wAiiLzk5xB22pKv10",
            "iv": "oKGio6SlpqeoqaqrrK2urw==",
            "authTag": "rjoEourUboZDzgIpuPtR9A=="
        });
        let payload = json!({"note": "héllo", "orderId": 1001, "total": 25.5});
        assert_eq!(key().seal_with_iv(&payload, &VECTOR_IV), expected);
        assert_eq!(key().open(&expected), Some(payload));
    }

    /// `answer` as `encryption` opens it.
    async fn opened(encryption: &Encryption, answer: String) -> String {
        encryption.open_answer(RawJson(answer)).await.unwrap().0
    }

    #[actix_web::test]
    async fn a_tampered_or_foreign_envelope_is_left_as_it_is() {
        let key = key();
        let envelope = key.seal(&json!({"a": 1}));
        let mut tampered = envelope.clone();
        let tag = BASE64
            .decode(tampered["authTag"].as_str().unwrap())
            .unwrap();
        let mut flipped = tag.clone();
        flipped[0] ^= 1;
        tampered["authTag"] = json!(BASE64.encode(&flipped));
        assert_eq!(key.open(&tampered), None);

        let other = Key::parse(&"ab".repeat(32)).unwrap();
        assert_eq!(other.open(&envelope), None);

        let mut extra = envelope.clone();
        extra["more"] = json!(1);
        assert_eq!(key.open(&extra), None);
        assert_eq!(
            key.open(&json!({"encrypted": 1, "iv": 2, "authTag": 3})),
            None
        );

        // In an answer: the tampered payload comes back byte for byte.
        let encryption = Encryption::new(Some(key.clone()));
        let text = json!({"messages": [{"data": tampered, "payload": tampered}]}).to_string();
        assert_eq!(opened(&encryption, text.clone()).await, text);
    }

    #[actix_web::test]
    async fn answers_are_opened_only_where_payloads_are() {
        let key = key();
        let encryption = Encryption::new(Some(key.clone()));
        let sealed = key.seal(&json!({"x": 1}));
        let pop = json!({"success": true, "messages": [
            {"data": sealed, "payload": sealed, "offset": 1},
            {"data": {"plain": true}, "payload": {"plain": true}, "offset": 2}]});
        let answer: Value =
            serde_json::from_str(&opened(&encryption, pop.to_string()).await).unwrap();
        assert_eq!(
            answer,
            json!({"success": true, "messages": [
                {"data": {"x": 1}, "payload": {"x": 1}, "offset": 1},
                {"data": {"plain": true}, "payload": {"plain": true}, "offset": 2}]})
        );
        let detail = json!({"payload": sealed, "data": sealed, "queue": "q"});
        let answer: Value =
            serde_json::from_str(&opened(&encryption, detail.to_string()).await).unwrap();
        assert_eq!(
            answer,
            json!({"payload": {"x": 1}, "data": {"x": 1}, "queue": "q"})
        );
        // No key: nothing is read.
        let text = detail.to_string();
        assert_eq!(opened(&Encryption::default(), text.clone()).await, text);
    }

    /// A payload nested past serde_json's limit (psql stores 5,000 levels)
    /// beside an envelope: the envelope opens all the same, and the deep
    /// payload comes back as it was (it kept every envelope sealed).
    #[actix_web::test]
    async fn a_payload_too_deep_to_parse_keeps_no_envelope_sealed() {
        let key = key();
        let encryption = Encryption::new(Some(key.clone()));
        let sealed = key.seal(&json!({"secret": "s3cr3t"}));
        let deep = "[".repeat(5000) + &"]".repeat(5000);
        let pop = format!(
            r#"{{"messages":[{{"data":{deep},"offset":1}},{{"data":{sealed},"offset":2}}],"success":true}}"#
        );
        let expected = format!(
            r#"{{"messages":[{{"data":{deep},"offset":1}},{{"data":{{"secret":"s3cr3t"}},"offset":2}}],"success":true}}"#
        );
        assert_eq!(opened(&encryption, pop).await, expected);
        let traces = format!(r#"{{"traces":[{{"data":{deep},"message_payload":{sealed}}}]}}"#);
        assert_eq!(
            encryption
                .open_in_list(RawJson(traces), "traces", "message_payload")
                .0,
            format!(r#"{{"traces":[{{"data":{deep},"message_payload":{{"secret":"s3cr3t"}}}}]}}"#)
        );
    }

    #[test]
    fn sealing_touches_only_the_named_queues() {
        let encryption = Encryption::new(Some(key()));
        let mut request = json!({"operations": [
            {"type": "push", "items": [{"queue": "secret", "payload": 1},
                                       {"queue": "open", "payload": 2}]},
            {"type": "ack", "items": [{"queue": "secret", "payload": 3}]}]});
        let queues = HashSet::from(["secret".to_string()]);
        encryption.seal_items(&mut request, Items::Transaction, &queues);
        let items = &request["operations"][0]["items"];
        assert_eq!(
            encryption.key().unwrap().open(&items[0]["payload"]),
            Some(json!(1))
        );
        assert_eq!(items[1]["payload"], 2);
        assert_eq!(request["operations"][1]["items"][0]["payload"], 3);
    }

    #[test]
    fn learned_queues_are_known_for_a_while() {
        let encryption = Encryption::new(Some(key()));
        let request = json!({"items": [{"queue": "a"}, {"queue": "b"}]});
        assert!(encryption.known_among(&request, Items::Push).is_empty());
        encryption.learn(&["a".to_string()]);
        assert_eq!(
            encryption.known_among(&request, Items::Push),
            HashSet::from(["a".to_string()])
        );
        // Without a key nothing is ever sealed.
        let keyless = Encryption::default();
        keyless.learn(&["a".to_string()]);
        assert!(keyless.known_among(&request, Items::Push).is_empty());
    }

    #[test]
    fn keys_must_be_64_hex_characters() {
        assert!(Key::parse(KEY).is_ok());
        assert!(Key::parse(&KEY.to_uppercase()).is_ok());
        for bad in ["", "abc", &KEY[..62], &format!("{KEY}00"), &"zz".repeat(32)] {
            let why = Key::parse(bad).unwrap_err();
            assert!(why.contains("64 hex characters"), "{why}");
        }
        assert!(!Key::parse(&"zz".repeat(32)).unwrap_err().contains("zz"));
    }

    #[test]
    fn refused_queues_come_from_the_detail() {
        assert_eq!(refused_queues(Some(r#"["a","b"]"#)), ["a", "b"]);
        assert!(refused_queues(None).is_empty());
        assert!(refused_queues(Some("junk")).is_empty());
    }
}
