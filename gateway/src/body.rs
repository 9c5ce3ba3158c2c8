//! Request bodies: read as bytes and parsed here, so every malformed body
//! gets our own 400 naming what is wrong (never actix's extractor errors).
//! PostgreSQL's jsonb cannot hold everything JSON can: U+0000 in a string or
//! key, a lone UTF-16 surrogate escape, or a number beyond its numeric type
//! (see `numeric_fits`). A body, path segment or query value with one is
//! refused up front, naming where it was found, rather than failing half-way
//! in the database with no name (a 500: "value overflows numeric format").
//! Long bodies are parsed off the event loop (`read_json`), and a body is
//! read within the gateway's room for bodies and its deadline (`guard_body`).

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{ready, Context, Poll};

use actix_web::body::{BodySize, BoxBody, EitherBody, MessageBody};
use actix_web::dev::{Payload, ServiceRequest, ServiceResponse};
use actix_web::error::PayloadError;
use actix_web::http::header::{HeaderMap, CONTENT_ENCODING, CONTENT_LENGTH, TRANSFER_ENCODING};
use actix_web::middleware::Next;
use actix_web::{web, HttpMessage, HttpRequest, ResponseError};
use futures::StreamExt;
use serde_json::Value;
use uuid::Uuid;

use crate::app::AppState;
use crate::error::ApiError;

/// Arrays and objects a body may nest: serde_json's recursion limit, so
/// `parse_json` refuses deeper bodies with an ordinary 400. Push reads its
/// payloads without that limit (as raw text); `may_be_unstorable` sends a
/// deeper push the parsed way, so every route has the same limit (and
/// PostgreSQL's parser, which runs out of stack near 10,000, is never asked).
pub const MAX_DEPTH: usize = 127;

/// Digits PostgreSQL's numeric holds after the decimal point.
const MAX_SCALE: i64 = 16383;

/// Bodies and answers at least this long are parsed on actix's blocking
/// threads, not on the worker's event loop: a tree of 8 MB of small numbers
/// takes 0.5 s to build (release), opening the envelopes of a 32 MB pop
/// answer 70-120 ms, and the loop would serve none of its other requests
/// meanwhile (a gateway on two cores has one worker). Below it, a parse
/// takes at most a few milliseconds and a thread hop would cost more.
const PARSE_ON_THE_LOOP_BELOW: usize = 64 * 1024;

/// Long parses go one at a time, as they did on a worker's loop: a tree can
/// take many times its body's bytes (8 MB of small numbers, about 250 MB in
/// a debug build), and four such bodies at once peaked at 297 MB one at a
/// time, 576 MB two at a time. Others wait their turn here, off the loop.
static LONG_PARSES: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(1);

/// `parse`, a parse of `len` bytes of JSON: on the loop when short, else on
/// actix's blocking threads in its turn.
pub async fn parse_off_the_loop_if_long<T: Send + 'static>(
    len: usize,
    parse: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ApiError> {
    if len < PARSE_ON_THE_LOOP_BELOW {
        return Ok(parse());
    }
    let failed = |e: String| ApiError::Internal(format!("parsing off the event loop: {e}"));
    let _turn = LONG_PARSES
        .acquire()
        .await
        .map_err(|e| failed(e.to_string()))?;
    web::block(parse).await.map_err(|e| failed(e.to_string()))
}

/// `parse_json`, off the event loop for a long body.
pub async fn read_json(body: &web::Bytes) -> Result<Value, ApiError> {
    read_json_except(body, None).await
}

/// `read_json`, for a route that never stores the values of the key
/// `unread` (the ack routes' `status`, which only picks one of four
/// spellings): what PostgreSQL could not hold is no reason to refuse them.
pub async fn read_json_except(
    body: &web::Bytes,
    unread: Option<&'static str>,
) -> Result<Value, ApiError> {
    let body = body.clone();
    parse_off_the_loop_if_long(body.len(), move || parse_json_except(&body, unread)).await?
}

/// Middleware (`middleware::from_fn`): what is refused before a request is
/// routed or its body read, first refusal wins. A caller without a known
/// token gets its 401 first (`Auth::refuses_body_of`), so it learns nothing
/// else; then an undecodable path or query, or a repeated query parameter
/// (400), then an encoded body (415).
pub async fn refuse_before_reading(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody>>, actix_web::Error> {
    let state = req.app_data::<web::Data<AppState>>().cloned();
    let refused = state
        .and_then(|state| state.auth.refuses_body_of(req.request()))
        .or_else(|| {
            undecodable_part(req.path(), req.query_string()).map(|part| {
                ApiError::BadRequest(format!("{part} is not UTF-8 once percent-decoded"))
            })
        })
        .or_else(|| {
            repeated_parameter(req.query_string()).map(|name| {
                ApiError::BadRequest(format!("query parameter {name} is given more than once"))
            })
        })
        .or_else(|| unsupported_encoding(req.headers()));
    match refused {
        Some(refused) => Ok(req.error_response(refused).map_into_right_body()),
        None => Ok(next.call(req).await?.map_into_left_body()),
    }
}

/// Middleware (`middleware::from_fn`): a request's body is read within the
/// gateway's memory budget and its deadline, and an answer that leaves it
/// unread closes the connection.
///
/// Bodies are held whole (up to PGCURSOR_MAX_BODY_BYTES each) until their
/// request is answered, and nothing bounded them all together: many large
/// uploads at once could take the gateway's memory. So a body is read only
/// once PGCURSOR_MAX_BODY_BYTES_IN_FLIGHT has room for it (its
/// Content-Length, or the most a body may be when it is chunked); until
/// then it waits unread, which TCP holds back at the client.
///
/// actix-web waits for a body for ever, so an upload that stalls (a client
/// gone quiet, or one sending a byte now and then) held its connection and
/// all it had sent. So a body must arrive whole within
/// PGCURSOR_BODY_TIMEOUT_MS of its head: past that, the route's read of it
/// fails, nothing is done with it, and the answer is a 408 (a 503 if it was
/// still waiting for room).
///
/// And a chunked body that an answer left unread (a stranger's 401, a
/// 404, a 408) actix-web drains before the next request, for as long as
/// its sender keeps sending. It closes the connection instead when the
/// body is still held as the answer ends, so the answer holds it.
pub async fn guard_body(
    mut req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody>>, actix_web::Error> {
    let has_body =
        req.headers().contains_key(CONTENT_LENGTH) || req.headers().contains_key(TRANSFER_ENCODING);
    let state = req.app_data::<web::Data<AppState>>().cloned();
    let Some(state) = state.filter(|_| has_body) else {
        return Ok(next.call(req).await?.map_into_left_body());
    };
    let within = state.config.body_timeout();
    let read = Rc::new(RefCell::new(BodyRead {
        unread: Some(req.take_payload()),
        room: None,
        late: None,
    }));
    let kib = budget_kib(req.headers(), &state);
    req.set_payload(Payload::from(Box::pin(BeforeDeadline {
        read: read.clone(),
        deadline: Box::pin(tokio::time::sleep(within)),
        making_room: Some(Box::pin(state.bodies.clone().acquire_many_owned(kib))),
    }) as BoxedPayload));
    let mut answer = next.call(req).await?.map_into_boxed_body();
    let late = read.borrow().late;
    if let Some(late) = late {
        let refused = match late {
            Late::Arriving => ApiError::RequestTimeout(format!(
                "the request body did not arrive whole within {} ms (PGCURSOR_BODY_TIMEOUT_MS)",
                within.as_millis()
            )),
            Late::NoRoom => ApiError::Unavailable(format!(
                "the gateway holds as many request bodies as it may (PGCURSOR_MAX_BODY_BYTES_IN_FLIGHT) and had no room for this one within {} ms; retry later",
                within.as_millis()
            )),
        };
        answer = answer.into_response(refused.error_response());
    }
    let Some(unread) = read.borrow_mut().unread.take() else {
        return Ok(answer.map_into_right_body());
    };
    let answer = answer.map_body(|_, body| Holding::new(body, unread));
    Ok(answer.map_into_boxed_body().map_into_right_body())
}

/// The room a request's body takes in PGCURSOR_MAX_BODY_BYTES_IN_FLIGHT, in
/// KiB: its Content-Length, or the most a body may be (chunked, or claiming
/// more, which is refused once read that far), and never more than all of it.
fn budget_kib(headers: &HeaderMap, state: &AppState) -> u32 {
    let most = state.config.max_body_bytes as u64;
    let claimed = headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(most);
    let kib = claimed.min(most).div_ceil(1024).max(1);
    u32::try_from(kib)
        .unwrap_or(u32::MAX)
        .min(state.config.bodies_kib())
}

type BoxedPayload = Pin<Box<dyn futures::Stream<Item = Result<web::Bytes, PayloadError>>>>;

type MakingRoom = Pin<
    Box<dyn Future<Output = Result<tokio::sync::OwnedSemaphorePermit, tokio::sync::AcquireError>>>,
>;

/// A request body as `guard_body` and its reader share it.
struct BodyRead {
    /// What is not yet read; emptied once the body has ended.
    unread: Option<Payload>,
    /// The body's room in PGCURSOR_MAX_BODY_BYTES_IN_FLIGHT, held until its
    /// request is answered.
    room: Option<tokio::sync::OwnedSemaphorePermit>,
    /// Why the deadline passed before the body ended, if it did.
    late: Option<Late>,
}

#[derive(Clone, Copy)]
enum Late {
    /// Waiting for room.
    NoRoom,
    /// Waiting for the body's bytes.
    Arriving,
}

/// A request body read through `guard_body`: first its room, then its
/// bytes. Past `deadline` a read fails once, notes why, and leaves the rest
/// unread.
struct BeforeDeadline {
    read: Rc<RefCell<BodyRead>>,
    deadline: Pin<Box<tokio::time::Sleep>>,
    making_room: Option<MakingRoom>,
}

impl futures::Stream for BeforeDeadline {
    type Item = Result<web::Bytes, PayloadError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        let mut read = this.read.borrow_mut();
        if read.late.is_some() {
            return Poll::Ready(None);
        }
        let waiting = match this.making_room.as_mut().map(|room| room.as_mut().poll(cx)) {
            Some(Poll::Ready(room)) => {
                // (An error would mean the budget closed, which it never is.)
                read.room = room.ok();
                this.making_room = None;
                None
            }
            Some(Poll::Pending) => Some(Late::NoRoom),
            None => None,
        };
        let Some(payload) = read.unread.as_mut() else {
            return Poll::Ready(None);
        };
        let late = match waiting {
            Some(late) => late,
            None => match payload.poll_next_unpin(cx) {
                Poll::Ready(None) => {
                    read.unread = None;
                    return Poll::Ready(None);
                }
                Poll::Ready(Some(chunk)) => return Poll::Ready(Some(chunk)),
                Poll::Pending => Late::Arriving,
            },
        };
        ready!(this.deadline.as_mut().poll(cx));
        read.late = Some(late);
        let timed_out = std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "the request body was not read in time",
        );
        Poll::Ready(Some(Err(PayloadError::Io(timed_out))))
    }
}

/// An answer's body, and something kept until the body is dropped (sent,
/// or its connection gone): an unread request body (`guard_body`), a
/// watchdog (peer::watch_long_answers).
pub struct Holding<T> {
    body: BoxBody,
    _held: T,
}

impl<T> Holding<T> {
    pub fn new(body: BoxBody, held: T) -> Holding<T> {
        Holding { body, _held: held }
    }
}

impl<T: Unpin> MessageBody for Holding<T> {
    type Error = <BoxBody as MessageBody>::Error;

    fn size(&self) -> BodySize {
        self.body.size()
    }

    fn poll_next(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<web::Bytes, Self::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_next(cx)
    }
}

/// The 415 for a body whose Content-Encoding is anything but `identity`. The
/// gateway decodes no compression, and a gzip body read as JSON was a
/// puzzling "request body is not valid JSON: expected value at line 1 column 1".
fn unsupported_encoding(headers: &HeaderMap) -> Option<ApiError> {
    let coding = String::from_utf8_lossy(headers.get(CONTENT_ENCODING)?.as_bytes())
        .trim()
        .to_string();
    (!coding.is_empty() && !coding.eq_ignore_ascii_case("identity")).then(|| {
        ApiError::UnsupportedEncoding(format!(
            "Content-Encoding {coding:?} is not supported: send the body uncompressed"
        ))
    })
}

/// What of a path and query does not decode to UTF-8 (`%FF`): "the path", or
/// "query parameter <name>" (its name as far as it decodes). actix-web
/// decodes them lossily, to U+FFFD, so `consumerGroup=%FF` made a group
/// named "\u{FFFD}".
fn undecodable_part(path: &str, query: &str) -> Option<String> {
    let decodes = |text: &str| {
        percent_encoding::percent_decode_str(text)
            .decode_utf8()
            .is_ok()
    };
    if path.contains('%') && !decodes(path) {
        return Some("the path".into());
    }
    if !query.contains('%') {
        return None;
    }
    query.split('&').find_map(|pair| {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let name = percent_encoding::percent_decode_str(key).decode_utf8_lossy();
        (!decodes(key) || !decodes(value)).then(|| format!("query parameter {name}"))
    })
}

/// The (decoded) name of a query parameter given more than once. Routes read
/// the query into a map, where the last one won silently: a pop with
/// `consumerGroup=a&consumerGroup=b` consumed as group b (Queen's server
/// takes the first). No route takes a list as repeated parameters.
fn repeated_parameter(query: &str) -> Option<String> {
    if !query.contains('&') {
        return None;
    }
    let mut seen = std::collections::HashSet::new();
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let key = pair.split_once('=').map_or(pair, |(key, _)| key);
            let key = key.replace('+', " ");
            percent_encoding::percent_decode_str(&key)
                .decode_utf8_lossy()
                .into_owned()
        })
        .filter(|name| !name.is_empty())
        .find(|name| !seen.insert(name.clone()))
}

/// Parses a request body as JSON: a 400 for invalid JSON, nesting deeper
/// than `MAX_DEPTH`, or a value PostgreSQL cannot store (named by its path).
pub fn parse_json(bytes: &[u8]) -> Result<Value, ApiError> {
    parse_json_except(bytes, None)
}

/// `parse_json`, the values of the key `unread` (at any depth) left unchecked.
fn parse_json_except(bytes: &[u8], unread: Option<&str>) -> Result<Value, ApiError> {
    let value: Value = serde_json::from_slice(bytes).map_err(|e| {
        ApiError::BadRequest(match e.to_string() {
            m if m.starts_with("recursion limit") => {
                format!("request body nests more than {MAX_DEPTH} arrays and objects ({m})")
            }
            m => format!("request body is not valid JSON: {m}"),
        })
    })?;
    if may_be_unstorable(bytes) {
        if let Some(problem) = unstorable_except(&value, unread) {
            return Err(ApiError::BadRequest(problem.describe("body")));
        }
    }
    Ok(value)
}

/// Whether a JSON text may hold what `parse_json` refuses, or PostgreSQL's
/// jsonb would: U+0000 (JSON carries it only as the escape \u0000), a lone
/// surrogate escape (\ud800), a number PostgreSQL cannot store, or nesting
/// deeper than `MAX_DEPTH`. One pass, skipping strings with memchr; no
/// allocation. False only when the text
/// holds none of them (an invalid text may answer either way).
pub fn may_be_unstorable(json: &[u8]) -> bool {
    let (mut depth, mut at) = (0usize, 0usize);
    while at < json.len() {
        match json[at] {
            b'"' => match string_end(json, at + 1) {
                Some(end) => at = end,
                None => return true,
            },
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            b'-' | b'0'..=b'9' => {
                let (len, exponent) = number_extent(&json[at..]);
                // Without an exponent, only length can overflow numeric.
                let plain_fits = !exponent && len as i64 <= MAX_SCALE;
                if !plain_fits && !std::str::from_utf8(&json[at..at + len]).is_ok_and(numeric_fits)
                {
                    return true;
                }
                at += len;
                continue;
            }
            _ => {}
        }
        at += 1;
    }
    false
}

/// The length of the number `json` starts with, and whether it has an exponent.
fn number_extent(json: &[u8]) -> (usize, bool) {
    let mut exponent = false;
    for (at, &b) in json.iter().enumerate() {
        match b {
            b'0'..=b'9' | b'-' | b'+' | b'.' => {}
            b'e' | b'E' => exponent = true,
            _ => return (at, exponent),
        }
    }
    (json.len(), exponent)
}

/// The index of the quote closing a string whose text starts at `from`;
/// None when the string holds an escape jsonb refuses (\u0000, or a UTF-16
/// surrogate not in a high-low pair, which serde_json's raw values let
/// through) or never closes. Most strings are short: their first bytes are
/// looked at one by one, and memchr, whose call costs more, takes over for
/// a longer one.
fn string_end(json: &[u8], mut from: usize) -> Option<usize> {
    loop {
        let near = &json[from..json.len().min(from + 32)];
        from += match near.iter().position(|&b| b == b'"' || b == b'\\') {
            Some(at) => at,
            None => near.len() + memchr::memchr2(b'"', b'\\', &json[from + near.len()..])?,
        };
        if json[from] == b'"' {
            return Some(from);
        }
        from += match json.get(from + 1) {
            Some(b'u') => unicode_escape_len(&json[from..])?,
            _ => 2, // the backslash and the character it escapes
        };
    }
}

/// The length of the \uXXXX escape `json` starts with (12 for a surrogate
/// pair); None for one jsonb refuses: U+0000, a lone surrogate, bad hex.
fn unicode_escape_len(json: &[u8]) -> Option<usize> {
    let unit = |at: usize| {
        let hex = std::str::from_utf8(json.get(at..at + 4)?).ok()?;
        u16::from_str_radix(hex, 16).ok()
    };
    match unit(2)? {
        0 | 0xDC00..=0xDFFF => None,
        0xD800..=0xDBFF => {
            let low = (json.get(6..8)? == br"\u").then(|| unit(8))??;
            (0xDC00..=0xDFFF).contains(&low).then_some(12)
        }
        _ => Some(6),
    }
}

/// Whether PostgreSQL's numeric type, and so jsonb, holds a JSON number
/// (PostgreSQL 15's numeric input): an exponent under 2^30 - 1 either way;
/// at most 16383 digits after the decimal point, once the exponent moves it
/// (trailing zeros count); and, unless the value is zero, its first nonzero
/// digit at most 131071 places before it. Anything else fails there with
/// "value overflows numeric format". Tested against PostgreSQL itself
/// (tests/http/hostile.rs).
pub fn numeric_fits(number: &str) -> bool {
    const EXPONENT_BOUND: i64 = (i32::MAX / 2) as i64;
    const MAX_LEADING_PLACE: i64 = 131071;
    let unsigned = number.strip_prefix('-').unwrap_or(number);
    let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
        Some(at) => (&unsigned[..at], &unsigned[at + 1..]),
        None => (unsigned, "0"),
    };
    // Too many digits for an i64 is far past the bound.
    let Ok(exponent) = exponent
        .strip_prefix('+')
        .unwrap_or(exponent)
        .parse::<i64>()
    else {
        return false;
    };
    if exponent.abs() >= EXPONENT_BOUND {
        return false;
    }
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if fraction.len() as i64 - exponent > MAX_SCALE {
        return false;
    }
    let leading_place = match whole.bytes().position(|b| b != b'0') {
        Some(at) => (whole.len() - at) as i64 - 1,
        None => match fraction.bytes().position(|b| b != b'0') {
            Some(at) => -(at as i64) - 1,
            None => return true, // zero
        },
    };
    leading_place + exponent <= MAX_LEADING_PLACE
}

/// A UUID as pgcursor's SQL functions read one (`is_uuid_value`): 32 hex
/// digits, each of the four hyphens of the 8-4-4-4-12 form optional; no
/// braces, no `urn:uuid:` (which the uuid crate alone would take, and psql
/// callers would be refused).
pub fn plain_uuid(text: &str) -> Option<Uuid> {
    let mut hex = String::with_capacity(32);
    let mut hyphen_may_follow = false;
    for c in text.chars() {
        if c == '-' && hyphen_may_follow {
            hyphen_may_follow = false;
        } else if c.is_ascii_hexdigit() && hex.len() < 32 {
            hex.push(c);
            hyphen_may_follow = matches!(hex.len(), 8 | 12 | 16 | 20);
        } else {
            return None;
        }
    }
    match hex.len() {
        32 => Uuid::try_parse(&hex).ok(),
        _ => None,
    }
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

/// What PostgreSQL cannot store, found in a parsed value, and where: the
/// path is gathered on the way out, so a value without one allocates nothing.
#[derive(Debug)]
pub struct Unstorable {
    /// Keys and indexes from the value's root, the innermost last.
    steps: Vec<String>,
    what: Flaw,
}

#[derive(Debug)]
enum Flaw {
    NulInString,
    NulInKey,
    Number(String),
}

impl Unstorable {
    /// The problem in words, the path starting from `root` (`body.items[0].payload`).
    pub fn describe(&self, root: &str) -> String {
        let path = root.to_string()
            + &self
                .steps
                .iter()
                .rev()
                .map(String::as_str)
                .collect::<String>();
        match &self.what {
            Flaw::NulInString => format!("{path} contains a NUL character"),
            Flaw::NulInKey => format!("a key in {path} contains a NUL character"),
            Flaw::Number(n) => format!(
                "{path} is a number PostgreSQL cannot store ({}): at most 131072 digits \
                 before the decimal point and 16383 after it",
                shortened(n)
            ),
        }
    }
}

/// Up to 40 characters of a number, and how long it was if longer.
fn shortened(number: &str) -> String {
    match number.char_indices().nth(40) {
        Some((at, _)) => format!("{}... ({} characters)", &number[..at], number.len()),
        None => number.to_string(),
    }
}

/// The first thing in `value` PostgreSQL cannot store, if any.
pub fn unstorable(value: &Value) -> Option<Unstorable> {
    unstorable_except(value, None)
}

/// `unstorable`, not looking into the values of the key `unread`.
fn unstorable_except(value: &Value, unread: Option<&str>) -> Option<Unstorable> {
    let flaw = |what| {
        Some(Unstorable {
            steps: Vec::new(),
            what,
        })
    };
    match value {
        Value::String(s) if s.contains('\0') => flaw(Flaw::NulInString),
        Value::Number(n) if !numeric_fits(n.as_str()) => flaw(Flaw::Number(n.as_str().into())),
        Value::Array(items) => items.iter().enumerate().find_map(|(i, v)| {
            let mut found = unstorable_except(v, unread)?;
            found.steps.push(format!("[{i}]"));
            Some(found)
        }),
        Value::Object(map) => map.iter().find_map(|(k, v)| match k.contains('\0') {
            true => flaw(Flaw::NulInKey),
            false if Some(k.as_str()) == unread => None,
            false => {
                let mut found = unstorable_except(v, unread)?;
                found.steps.push(format!(".{k}"));
                Some(found)
            }
        }),
        _ => None,
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
    fn plain_uuids_are_32_hex_digits_with_the_four_hyphens_optional() {
        let id = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";
        let taken = [
            id,
            "0190A1B2-C3D4-7E5F-8A9B-0C1D2E3F4A5B",
            "0190a1b2c3d47e5f8a9b0c1d2e3f4a5b",
            "0190a1b2-c3d47e5f8a9b0c1d2e3f4a5b",
            "0190a1b2c3d4-7e5f8a9b-0c1d2e3f4a5b",
        ];
        for text in taken {
            assert_eq!(
                plain_uuid(text).map(|u| u.to_string()),
                Some(id.to_string()),
                "{text}"
            );
        }
        let refused = [
            "",
            "{0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b}",
            "urn:uuid:0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b",
            "0190a1b2--c3d4-7e5f-8a9b-0c1d2e3f4a5b",
            "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b-",
            "-0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b",
            "0190a1b-2c3d4-7e5f-8a9b-0c1d2e3f4a5b",
            "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5",
            "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b0",
            " 0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b",
            "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5g",
        ];
        for text in refused {
            assert_eq!(plain_uuid(text), None, "{text}");
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

    /// The parsed routes and push's raw scan (`may_be_unstorable`) agree on
    /// the deepest body: MAX_DEPTH levels parse, one more does not.
    #[test]
    fn max_depth_is_the_parsers_limit() {
        let deep = |n| "[".repeat(n) + &"]".repeat(n);
        assert!(parse_json(deep(MAX_DEPTH).as_bytes()).is_ok());
        assert!(message(parse_json(deep(MAX_DEPTH + 1).as_bytes())).contains("recursion limit"));
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

    /// Each checked against PostgreSQL 15 (`SELECT '<n>'::jsonb`); the
    /// HTTP test compares many more with the database itself.
    #[test]
    fn numbers_fit_numeric_as_postgresql_reads_them() {
        let fit = [
            "0",
            "-0",
            "1.5",
            "1e400",
            "1E5",
            "1e+5",
            "-1e-16383",
            "0e-16383",
            "0.0e-16382",
            "1.000e-16380",
            "1.5e-16382",
            "1e131071",
            "10e131070",
            "0.1e131072",
            "0.001e131074",
            "0e999999",
            "0e1073741822",
            "123456789012345678901234567890",
        ];
        let overflow = [
            "1e131072",
            "-1e999999",
            "10e131071",
            "1e-16384",
            "1e-999999",
            "0e-16384",
            "0.0e-16383",
            "1.5e-16383",
            "100e-16385",
            "1.000e-16381",
            "0e1073741823",
            "0e-1073741823",
            "1e99999999999999999999",
        ];
        for n in fit {
            assert!(numeric_fits(n), "{n} fits");
        }
        for n in overflow {
            assert!(!numeric_fits(n), "{n} overflows");
        }
        assert!(numeric_fits(&"1".repeat(131072)));
        assert!(!numeric_fits(&"1".repeat(131073)));
        assert!(numeric_fits(&format!("0.{}", "1".repeat(16383))));
        assert!(!numeric_fits(&format!("0.{}", "1".repeat(16384))));
    }

    #[test]
    fn a_number_postgresql_cannot_store_is_named_by_path() {
        let m = message(parse_json(br#"{"items":[{"payload":{"x":[1,1e131072]}}]}"#));
        assert_eq!(
            m,
            "body.items[0].payload.x[1] is a number PostgreSQL cannot store (1e+131072): \
             at most 131072 digits before the decimal point and 16383 after it"
        );
        let long = format!(r#"{{"a":0.{}}}"#, "5".repeat(20000));
        assert!(message(parse_json(long.as_bytes()))
            .contains("(0.55555555555555555555555555555555555555... (20002 characters))"));
    }

    #[test]
    fn the_scan_flags_what_postgresql_cannot_store_and_nothing_else() {
        let flagged: [&[u8]; 6] = [
            br#"{"a":"x\u0000"}"#,
            br#"{"a\u0000":1}"#,
            br#"[1e131072]"#,
            br#"{"a":-1e-16384}"#,
            br#"{"a":"1e999999","b":1e999999}"#,
            br#"{"a":"\"","b":[0e-99999]}"#,
        ];
        for json in flagged {
            assert!(may_be_unstorable(json), "{}", String::from_utf8_lossy(json));
        }
        let deep = |n| "[".repeat(n) + &"]".repeat(n);
        assert!(!may_be_unstorable(deep(MAX_DEPTH).as_bytes()));
        assert!(may_be_unstorable(deep(MAX_DEPTH + 1).as_bytes()));
        let clean: [&[u8]; 5] = [
            br#"{"a":"1e999999 \\u0000","b":[1e400,-0.5,{"c":null}]}"#,
            br#"{"a":"\\"}"#,
            br#"{"items":[{"queue":"q","payload":{"n":123456789012345678901234567890}}]}"#,
            br#""]]]]]]""#,
            b"",
        ];
        for json in clean {
            assert!(
                !may_be_unstorable(json),
                "{}",
                String::from_utf8_lossy(json)
            );
        }
        // Past a string's first 32 bytes the search goes on (memchr).
        let long = |tail: &str, b: &str| format!(r#"{{"a":"{}{tail}","b":{b}}}"#, "x".repeat(100));
        assert!(may_be_unstorable(long("", "1e999999").as_bytes()));
        assert!(may_be_unstorable(long(r"\u0000", "1").as_bytes()));
        assert!(!may_be_unstorable(
            long(r#"\",1e999999,\""#, "1").as_bytes()
        ));
        // Surrogate escapes: only a high-low pair is stored.
        for lone in [
            r"\ud800",
            r"\udc00",
            r"\ud800x",
            r"\ud800\u0041",
            r"\ud83d\ud83d",
            r"\u12",
        ] {
            let json = format!(r#"{{"a":"{lone}"}}"#);
            assert!(may_be_unstorable(json.as_bytes()), "{json}");
        }
        for fine in [r"\ud83d\ude00", r"\\ud800", r"\u00e9\uFFFF", r"\\"] {
            let json = format!(r#"{{"a":"{fine}"}}"#);
            assert!(!may_be_unstorable(json.as_bytes()), "{json}");
        }
        // Strings do not count towards the depth.
        let bracketed = format!("[\"{}\"]", "[".repeat(1000));
        assert!(!may_be_unstorable(bracketed.as_bytes()));
    }

    #[test]
    fn percent_escapes_must_decode_to_utf8() {
        assert_eq!(
            undecodable_part("/api/v1/pop/queue/q%FF", ""),
            Some("the path".into())
        );
        assert_eq!(
            undecodable_part("/api/v1/pop/queue/q", "batch=1&consumerGroup=%FF%FE"),
            Some("query parameter consumerGroup".into())
        );
        assert_eq!(
            undecodable_part("/x", "%C3=1"),
            Some("query parameter \u{FFFD}".into())
        );
        for (path, query) in [
            (
                "/api/v1/pop/queue/%E6%97%A5%E6%9C%AC",
                "consumerGroup=caf%C3%A9&x",
            ),
            ("/api/v1/messages", "queue=a+b%20c&&=&%25"),
            ("/health", ""),
        ] {
            assert_eq!(undecodable_part(path, query), None, "{path}?{query}");
        }
    }

    #[test]
    fn a_query_parameter_may_be_given_once() {
        for (query, repeated) in [
            ("consumerGroup=a&consumerGroup=b", "consumerGroup"),
            ("batch=1&wait=true&batch", "batch"),
            ("consumer%47roup=a&consumerGroup=b", "consumerGroup"),
            ("a+b=1&a%20b=2", "a b"),
        ] {
            assert_eq!(repeated_parameter(query), Some(repeated.into()), "{query}");
        }
        for query in [
            "",
            "batch=1",
            "batch=1&wait=true",
            "a=1&&=&=&b",
            "batch=1&Batch=2",
        ] {
            assert_eq!(repeated_parameter(query), None, "{query}");
        }
    }

    #[test]
    fn ordinary_json_passes() {
        assert_eq!(parse_json(br#"{"a":[1,"x",null]}"#).unwrap()["a"][1], "x");
    }
}
