//! The dashboard in a real browser (headless Chromium over WebDriver), with
//! authentication on: a person signs in with a token, reads each page,
//! requeues a dead letter, seeks and deletes a group through the buttons,
//! filters the message browser by status, time and offset range, and reads
//! every page again on a phone-wide screen without sideways scrolling. With
//! `PGCURSOR_SCREENSHOTS=<dir>` (`make screenshots`) it also saves a PNG of
//! each page there.

use std::path::PathBuf;

use pgcursor_tests::{client, db, Gateway};
use serde_json::{json, Value};
use uuid::Uuid;

use crate::browser::Browser;

const ADMIN: &str = "dash-admin-token";
const READER: &str = "dash-reader-token";

/// What the test seeded: one queue, one group, a held lease, a dead letter.
struct Scene {
    queue: String,
    lease: String,
    /// The transactionId of the message under that lease.
    held: String,
}

async fn call(gw: &Gateway, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
    let mut request = client().request(method, gw.url(path)).bearer_auth(ADMIN);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let answer = request.send().await.expect("the gateway answers");
    assert!(answer.status().is_success(), "{path}: {}", answer.status());
    answer.json().await.expect("JSON")
}

/// eu: 3 messages, billing holds a lease on the first; us: 2 messages,
/// billing dead-lettered the first ("downstream 502").
async fn seed(gw: &Gateway) -> Scene {
    let queue = format!("dash-orders-{}", &Uuid::now_v7().simple().to_string()[20..]);
    let post = reqwest::Method::POST;
    let get = reqwest::Method::GET;
    call(
        gw,
        post.clone(),
        "/api/v1/configure",
        Some(json!({"queue": queue, "options": {"retryLimit": 0, "leaseTime": 600}})),
    )
    .await;
    let items: Vec<Value> = [("eu", 1), ("eu", 2), ("eu", 3), ("us", 4), ("us", 5)]
        .iter()
        .map(
            |(p, n)| json!({"queue": queue, "partition": p, "payload": {"order": n, "sku": "A-1"}}),
        )
        .collect();
    call(
        gw,
        post.clone(),
        "/api/v1/push",
        Some(json!({"items": items})),
    )
    .await;
    let pop =
        |p: &str| format!("/api/v1/pop/queue/{queue}/partition/{p}?consumerGroup=billing&batch=1");
    let held = call(gw, get.clone(), &pop("eu"), None).await;
    let failed = call(gw, get, &pop("us"), None).await;
    let message = &failed["messages"][0];
    call(
        gw,
        post,
        "/api/v1/ack",
        Some(json!({
        "transactionId": message["transactionId"], "partitionId": message["partitionId"],
        "leaseId": failed["leaseId"], "consumerGroup": "billing",
        "status": "failed", "error": "downstream 502"})),
    )
    .await;
    Scene {
        queue,
        lease: held["leaseId"].as_str().unwrap().to_string(),
        held: held["messages"][0]["transactionId"]
            .as_str()
            .unwrap()
            .to_string(),
    }
}

/// Where `make screenshots` wants the PNGs, if it does.
fn screenshots() -> Option<PathBuf> {
    std::env::var_os("PGCURSOR_SCREENSHOTS").map(PathBuf::from)
}

async fn shoot(browser: &Browser, name: &str) {
    if let Some(dir) = screenshots() {
        std::fs::create_dir_all(&dir).unwrap();
        browser.screenshot(&dir.join(format!("{name}.png"))).await;
    }
}

/// The API's 401 brings up the token form.
async fn sign_in(browser: &Browser, token: &str) {
    browser.wait_visible("#token").await;
    browser.type_into("#token", token).await;
    browser.click("#login button[type=submit]").await;
}

/// A list of `total` rows (100 < total <= 200) drawn 100 a page: the
/// first page says so, and "Next" shows the rest.
async fn pages_of_100(browser: &Browser, list: &str, total: usize) {
    browser
        .wait_text(list, &format!("Showing 1–100 of {total}"))
        .await;
    browser.click(&format!("{list} [data-page-to='100']")).await;
    browser
        .wait_text(list, &format!("Showing 101–{total} of {total}"))
        .await;
    let rows = format!("return document.querySelectorAll('{list} tbody tr').length");
    browser.wait_eval(&rows, &json!(total - 100)).await;
}

/// The console errors a correct page makes are the answers it expects:
/// Chromium logs as failed resource loads the 401 that asks for a token,
/// the reader's 403 on a requeue, and the 404s of a transactionId lookup
/// probing the partitions where the message is not.
fn unexpected(errors: Vec<String>) -> Vec<String> {
    errors.into_iter().filter(|e| !expected(e)).collect()
}

fn expected(error: &str) -> bool {
    let status = |code: u16| error.contains(&format!("with a status of {code}"));
    let asks_for_token = status(401);
    let reader_refused = error.contains("/requeue") && status(403);
    let lookup_probe = error.contains("/api/v1/messages/") && status(404);
    asks_for_token || reader_refused || lookup_probe
}

async fn dead_letters(queue: &str) -> i64 {
    db().await
        .query_one(
            "SELECT count(*) FROM pgcursor.dead_letters d \
             JOIN pgcursor.partitions p ON p.id = d.partition_id WHERE p.queue = $1",
            &[&queue],
        )
        .await
        .unwrap()
        .get(0)
}

/// billing's cursor rows on the queue.
async fn billing_cursors(queue: &str) -> i64 {
    db().await
        .query_one(
            "SELECT count(*) FROM pgcursor.cursors c JOIN pgcursor.partitions p ON p.id = c.partition_id \
             WHERE p.queue = $1 AND c.consumer_group = 'billing'",
            &[&queue],
        )
        .await
        .unwrap()
        .get(0)
}

/// A column of the message list's rows, as the page shows it.
fn message_column(column: usize) -> String {
    format!(
        "return [...document.querySelectorAll('#msg-list tbody tr')].map(r => r.cells[{column}].textContent)"
    )
}

/// Submits the message filter with the given fields set (others as they are).
async fn filter_messages(browser: &Browser, fields: &[(&str, &str)]) {
    for (name, value) in fields {
        let selector = format!("//form[@id='msg-filter']//*[@name='{name}']");
        browser.set_value(&selector, value).await;
    }
    browser.click("#msg-filter button[type=submit]").await;
}

/// Page width fits a phone: nothing sticks out sideways.
async fn assert_no_sideways_scroll(browser: &Browser, page: &str) {
    let widths = browser
        .eval("return [document.documentElement.scrollWidth, window.innerWidth]")
        .await
        .unwrap();
    let (scroll, inner) = (widths[0].as_i64().unwrap(), widths[1].as_i64().unwrap());
    assert!(
        scroll <= inner,
        "{page} is {scroll}px wide in a {inner}px window"
    );
}

/// billing's unconsumed messages on the queue, from the cursors themselves.
async fn billing_lag(queue: &str) -> i64 {
    db().await
        .query_one(
            "SELECT coalesce(sum(h.head - c.cursor), 0)::bigint FROM pgcursor.cursors c \
             JOIN pgcursor.partitions p ON p.id = c.partition_id \
             JOIN pgcursor.partition_heads h ON h.partition_id = c.partition_id \
             WHERE p.queue = $1 AND c.consumer_group = 'billing'",
            &[&queue],
        )
        .await
        .unwrap()
        .get(0)
}

#[tokio::test]
async fn a_person_signs_in_reads_every_page_requeues_and_seeks() {
    let tokens = format!("{ADMIN}:admin,{READER}:read-only");
    let gw = Gateway::start_with(&[("PGCURSOR_TOKENS", &tokens)]).await;
    let scene = seed(&gw).await;
    let q = &scene.queue;
    let browser = Browser::start(1280, 900).await;

    // A read-only token sees the dead letter, but its requeue is refused
    // with the 403's message and changes nothing.
    browser.goto(&gw.url(&format!("/#/dlq?queue={q}"))).await;
    sign_in(&browser, READER).await;
    browser.wait_text("#dlq-list", "downstream 502").await;
    browser.click("#dlq-list [data-requeue='0']").await;
    browser.click("#confirm-yes").await;
    browser
        .wait_text(
            "#notice",
            "Not allowed with this token (403): this route needs read-write access",
        )
        .await;
    assert_eq!(dead_letters(q).await, 1);
    browser.click("#signout").await;
    browser.wait_visible("#token").await;

    // Signing in again, as admin; everything below acts with this token.
    browser.goto(&gw.url("/#/overview")).await;
    sign_in(&browser, ADMIN).await;

    // Overview: the queue with its lag and dead letter, what is stuck, the held lease.
    let row = format!("//section[@id='queues']//tr[td/a[text()='{q}']]");
    let queues = browser.wait_text("#queues", q).await;
    let cells = browser.row_cells(&row).await;
    // Queue, partitions, depth, lag (messages), lag (age, counting), dead letters, pushed.
    assert_eq!(
        [&cells[..4], &cells[5..]].concat(),
        [q.as_str(), "2", "4", "4", "1", "5"],
        "{queues}"
    );
    assert!(cells[4].ends_with('s'), "{cells:?}");
    browser.wait_text("#stuck", q).await;
    // The ten oldest leases of the whole database (other tests hold some
    // too), so only that leases are listed; ours shows on the queue page.
    browser.wait_text("#leases", " ago").await;
    browser.wait_text("#updated", "updated").await;
    browser.wait_text(".chart", "in (pushed)").await;
    shoot(&browser, "overview").await;

    // Queue detail: partitions × groups, the lease holder on eu.
    browser.goto(&gw.url(&format!("/#/queue/{q}"))).await;
    let eu = browser.wait_text("#partitions", &scene.lease).await;
    // Partition, group, cursor, head, lag, lease holder (, lease expiry).
    let eu_row = browser
        .row_cells("//section[@id='partitions']//tr[td[1][text()='eu']]")
        .await;
    assert_eq!(
        eu_row[..6],
        ["eu", "billing", "0", "3", "3", &scene.lease],
        "{eu}"
    );
    let us_row = browser
        .row_cells("//section[@id='partitions']//tr[td[1][text()='us']]")
        .await;
    assert_eq!(us_row, ["us", "billing", "1", "2", "1", "—", "—"]);
    shoot(&browser, "queue").await;

    // Dead letters: filter by the queue, inspect, requeue with a confirmation.
    browser.goto(&gw.url("/#/dlq")).await;
    browser.type_into("#dlq-filter input[name=queue]", q).await;
    browser.click("#dlq-filter button[type=submit]").await;
    // Filtered: one dead letter, ours (other tests keep theirs in this database).
    let list = browser.wait_text("#dlq-list", "1 dead letter(s).").await;
    assert!(
        list.contains(q) && list.contains("downstream 502"),
        "{list}"
    );
    browser.click("#dlq-list [data-inspect='0']").await;
    let detail = browser.wait_text("#dlq-detail", "downstream 502").await;
    assert!(
        detail.contains("\"order\": 4"),
        "payload pretty-printed: {detail}"
    );
    shoot(&browser, "dead-letters").await;
    assert_eq!(dead_letters(q).await, 1);
    browser.click("#dlq-list [data-requeue='0']").await;
    browser.wait_visible("#confirm-yes").await;
    browser.click("#confirm-yes").await;
    browser.wait_text("#notice", "Requeued onto").await;
    browser.wait_text("#dlq-list", "No dead letters.").await;
    assert_eq!(
        dead_letters(q).await,
        0,
        "the requeue removed the dead letter"
    );

    // Consumer groups: billing on the queue, seek to the end with a confirmation.
    // The list is filtered to the queue, as a person would, so that groups
    // other tests create cannot move the rows between a look and a click.
    browser.goto(&gw.url("/#/groups")).await;
    browser.wait_visible("#group-list").await;
    browser
        .type_into("#group-filter input[name=queue]", q)
        .await;
    browser.click("#group-filter button[type=submit]").await;
    browser
        .wait_eval(
            "return [...document.querySelectorAll('#group-list tbody tr')].map(r => r.cells[1].textContent)",
            &json!([q]),
        )
        .await;
    let group_row = format!("//section[@id='group-list']//tr[td[2]/a[text()='{q}']]");
    let before = browser.row_cells(&group_row).await;
    assert_eq!(before[..4], ["billing", q.as_str(), "2", "5"], "{before:?}");
    shoot(&browser, "consumer-groups").await;
    assert_eq!(
        billing_lag(q).await,
        5,
        "3 on eu, 1 + the requeued one on us"
    );
    // A timer's redraw waits while the pointer rests on a button, so the
    // row cannot move under a click; it resumes once the pointer leaves.
    let marked = "return document.querySelector('#group-list table')?.dataset.seen ?? null";
    browser.click("#every option[value='2']").await;
    browser
        .hover(&format!("{group_row}//button[@data-end]"))
        .await;
    browser
        .eval("document.querySelector('#group-list table').dataset.seen = 'yes'; return true")
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(3000)).await; // past a 2 s refresh
    assert_eq!(
        browser.eval(marked).await.unwrap(),
        json!("yes"),
        "redrawn under the pointer"
    );
    browser.hover("#controls h1").await;
    browser.wait_eval(marked, &Value::Null).await;
    browser
        .click(&format!("{group_row}//button[@data-end]"))
        .await;
    browser.wait_visible("#confirm-yes").await;
    let question = browser.wait_text("#confirm-text", "to the end").await;
    assert!(question.contains(q), "{question}");
    browser.click("#confirm-yes").await;
    browser
        .wait_text("#notice", "to the end: 2 partition(s) moved")
        .await;
    assert_eq!(
        billing_lag(q).await,
        0,
        "the seek moved billing to the heads"
    );

    // Message browser filters, through the form: billing is at the heads,
    // so the queue's six messages are completed and none is pending.
    browser.goto(&gw.url("/#/messages")).await;
    browser.type_into("#msg-filter input[name=queue]", q).await;
    filter_messages(&browser, &[("status", "pending")]).await;
    browser.wait_text("#msg-list", "No message matches.").await;
    filter_messages(&browser, &[("status", "completed")]).await;
    browser
        .wait_eval(&message_column(5), &json!(vec!["completed"; 6]))
        .await;
    // A time range before every message, then one reaching back to it.
    let (from, to) = (("from", "2020-01-01T00:00"), ("to", "2020-01-02T00:00"));
    filter_messages(&browser, &[("status", ""), from, to]).await;
    browser.wait_text("#msg-list", "No message matches.").await;
    filter_messages(&browser, &[("to", "")]).await;
    browser
        .wait_eval(&format!("{}.length", message_column(1)), &json!(6))
        .await;

    let groups_of_q = gw.url(&format!("/#/groups?queue={q}"));
    browser.goto(&groups_of_q).await;
    browser.wait_text("#group-list", q).await;

    // Seek back to a time before every message: a date-time picker's value
    // is set by script (typing into one depends on the browser's locale).
    let picker = format!("{group_row}//input[@data-time]");
    browser.set_value(&picker, "2020-01-01T00:00:00").await;
    browser
        .click(&format!("{group_row}//button[@data-seek]"))
        .await;
    browser.wait_text("#confirm-text", "at or after").await;
    browser.click("#confirm-yes").await;
    browser
        .wait_text(
            "#notice",
            &format!("Seeked billing on {q}: 2 partition(s) moved"),
        )
        .await;
    assert_eq!(billing_lag(q).await, 6, "billing replays both partitions");

    // Message browser: the queue's messages, one opened with its payload.
    browser
        .goto(&gw.url(&format!("/#/messages?queue={q}&partition=eu")))
        .await;
    browser.wait_text("#msg-list", "eu").await;
    browser.click("#msg-list tr[data-open]").await;
    let message = browser.wait_text("#msg-detail", "\"sku\": \"A-1\"").await;
    assert!(message.contains("billing: pending"), "{message}");
    shoot(&browser, "messages").await;
    // An offset range of the partition, typed into the filter.
    browser
        .type_into("#msg-filter input[name=fromOffset]", "2")
        .await;
    browser
        .type_into("#msg-filter input[name=toOffset]", "3")
        .await;
    browser.click("#msg-filter button[type=submit]").await;
    browser
        .wait_eval(&message_column(3), &json!(["3", "2"]))
        .await;

    // Looking a transactionId up within the queue.
    browser.goto(&gw.url("/#/messages")).await;
    browser.type_into("#msg-filter input[name=queue]", q).await;
    browser
        .type_into("#msg-filter input[name=transactionId]", &scene.held)
        .await;
    browser.click("#msg-filter button[type=submit]").await;
    let found = browser.wait_text("#msg-list", &scene.held).await;
    assert_eq!(found.matches(q.as_str()).count(), 1, "one message: {found}");

    // Deleting billing on the queue: cancelled first, then confirmed.
    browser.goto(&groups_of_q).await;
    let delete = format!("{group_row}//button[@data-delete]");
    browser.click(&delete).await;
    let question = browser
        .wait_text("#confirm-text", "Delete consumer group billing")
        .await;
    assert!(question.contains(q), "{question}");
    browser.click("#confirm-no").await;
    assert_eq!(billing_cursors(q).await, 2, "cancelled: nothing deleted");
    browser.click(&delete).await;
    browser.wait_visible("#confirm-yes").await;
    browser.click("#confirm-yes").await;
    browser
        .wait_text(
            "#notice",
            &format!("Deleted billing on {q}: 2 partition(s)."),
        )
        .await;
    assert_eq!(billing_cursors(q).await, 0, "the group's cursors are gone");
    browser
        .wait_eval(
            &format!(
                "return document.evaluate(\"count({group_row})\", document, null, \
                 XPathResult.NUMBER_TYPE, null).numberValue"
            ),
            &json!(0),
        )
        .await;

    // A phone: every page fits its width (tables scroll inside their box).
    browser.resize(390, 844).await;
    browser.goto(&gw.url("/#/overview")).await;
    browser.wait_text("#queues", q).await;
    assert_no_sideways_scroll(&browser, "overview").await;
    browser.goto(&gw.url(&format!("/#/queue/{q}"))).await;
    browser.wait_text("#partitions", "eu").await;
    assert_no_sideways_scroll(&browser, "queue").await;
    browser.goto(&gw.url("/#/groups")).await;
    browser.wait_visible("#group-list").await;
    assert_no_sideways_scroll(&browser, "consumer groups").await;
    browser.goto(&gw.url(&format!("/#/dlq?queue={q}"))).await;
    browser.wait_text("#dlq-list", "No dead letters.").await;
    assert_no_sideways_scroll(&browser, "dead letters").await;
    browser
        .goto(&gw.url(&format!("/#/messages?queue={q}&partition=eu")))
        .await;
    browser.click("#msg-list tr[data-open]").await;
    browser.wait_text("#msg-detail", "\"sku\": \"A-1\"").await;
    assert_no_sideways_scroll(&browser, "messages").await;

    let errors = unexpected(browser.console_errors().await);
    browser.quit().await;
    assert!(errors.is_empty(), "console errors: {errors:?}");
}

/// A dead letter whose payload did not fit its page of the listing
/// (`dataOmitted`) is fetched on a page of its own when a person inspects
/// it: the detail shows its payload all the same.
#[tokio::test]
async fn inspecting_a_dead_letter_left_out_of_its_page_shows_its_payload() {
    // Room for the first payload of a page only.
    let gw = Gateway::start_with(&[("PGCURSOR_MAX_ANSWER_BYTES", "1")]).await;
    let queue = format!("dash-heavy-{}", &Uuid::now_v7().simple().to_string()[20..]);
    let items: Vec<Value> = (1..=2)
        .map(|n| json!({"queue": queue, "payload": {"order": n}, "transactionId": format!("Default-{n}")}))
        .collect();
    let pushed = call(
        &gw,
        reqwest::Method::POST,
        "/api/v1/push",
        Some(json!({ "items": items })),
    )
    .await;
    let partition_id = pushed[0]["partitionId"].as_str().unwrap().to_string();
    // Newest first: the second dead letter heads the page, the first follows without its data.
    crate::dlq::kill(&gw, &partition_id, "Default", "g", 1).await;
    crate::dlq::kill(&gw, &partition_id, "Default", "g", 2).await;
    let listed = call(
        &gw,
        reqwest::Method::GET,
        &format!("/api/v1/dlq?queue={queue}"),
        None,
    )
    .await;
    assert_eq!(
        listed["messages"][1]["dataOmitted"],
        json!(true),
        "{listed}"
    );

    let browser = Browser::start(1280, 900).await;
    browser
        .goto(&gw.url(&format!("/#/dlq?queue={queue}")))
        .await;
    browser.wait_text("#dlq-list", "2 dead letter(s).").await;
    browser.click("#dlq-list [data-inspect='1']").await;
    let detail = browser.wait_text("#dlq-detail", "Default-1").await;
    assert!(
        detail.contains("\"order\": 1"),
        "payload fetched alone: {detail}"
    );
    let errors = unexpected(browser.console_errors().await);
    browser.quit().await;
    assert!(errors.is_empty(), "console errors: {errors:?}");
}

/// What a person reading the dashboard for a while needs (the dashboard
/// probe's findings): a token no header can carry is refused like any; long
/// lists page; a transactionId is found past the 100th partition; a refresh
/// keeps a table scrolled sideways and a row under the pointer; a long name
/// wraps rather than widen the page; a broken escape in the address and a
/// gateway gone are said in words.
#[tokio::test]
async fn the_dashboard_pages_long_lists_and_keeps_the_readers_place() {
    let gw = Gateway::start_with(&[("PGCURSOR_TOKENS", &format!("{ADMIN}:admin"))]).await;
    let id = &Uuid::now_v7().simple().to_string()[20..];
    let wide = format!("dash-wide-{id}");
    // 105 partitions of one message each, then 100 more messages in p000.
    let items: Vec<Value> = (0..105)
        .map(|n| {
            json!({"queue": wide, "partition": format!("p{n:03}"), "payload": n,
                        "transactionId": format!("w-{n:03}")})
        })
        .collect();
    let pushed = call(
        &gw,
        reqwest::Method::POST,
        "/api/v1/push",
        Some(json!({"items": items})),
    )
    .await;
    let more: Vec<Value> = (0..100)
        .map(|n| json!({"queue": wide, "partition": "p000", "payload": n}))
        .collect();
    call(
        &gw,
        reqwest::Method::POST,
        "/api/v1/push",
        Some(json!({"items": more})),
    )
    .await;
    // Group g dead-letters the first message of each of the 105 partitions.
    let kills: Vec<Value> = pushed
        .as_array()
        .unwrap()
        .iter()
        .map(|p| json!({"transactionId": p["transactionId"], "partitionId": p["partitionId"], "status": "dlq"}))
        .collect();
    call(
        &gw,
        reqwest::Method::POST,
        "/api/v1/ack/batch",
        Some(json!({"consumerGroup": "g", "acknowledgments": kills})),
    )
    .await;
    // 105 more groups on the queue, each by an ack of the first message.
    for n in 0..105 {
        let ack = json!({"consumerGroup": format!("r{n:03}"), "transactionId": "w-000",
                         "partitionId": pushed[0]["partitionId"], "status": "completed"});
        call(&gw, reqwest::Method::POST, "/api/v1/ack", Some(ack)).await;
    }
    let long = format!("dash-long-{}-{}", "x".repeat(280), id);
    call(
        &gw,
        reqwest::Method::POST,
        "/api/v1/push",
        Some(json!({"items": [{"queue": long, "payload": 1}]})),
    )
    .await;

    let browser = Browser::start(1280, 900).await;
    browser.goto(&gw.url("/#/overview")).await;
    sign_in(&browser, "ключ").await;
    browser
        .wait_text("#login-error", "That token was not accepted.")
        .await;
    sign_in(&browser, ADMIN).await;

    // Dead letters: 100 a page, the rest on the next.
    browser.goto(&gw.url(&format!("/#/dlq?queue={wide}"))).await;
    pages_of_100(&browser, "#dlq-list", 105).await;

    // Consumer groups: 100 a page (g and the 105 others on the queue).
    browser
        .goto(&gw.url(&format!("/#/groups?queue={wide}")))
        .await;
    pages_of_100(&browser, "#group-list", 106).await;

    // Messages: 200 a page; a transactionId is found in any partition (the
    // 105th here), without naming it.
    browser
        .goto(&gw.url(&format!("/#/messages?queue={wide}")))
        .await;
    browser.wait_text("#msg-list", "Showing 1–200").await;
    browser.click("#msg-list [data-page-to='200']").await;
    browser.wait_text("#msg-list", "Showing 201–205").await;
    browser
        .goto(&gw.url(&format!("/#/messages?queue={wide}&transactionId=w-104")))
        .await;
    browser.wait_text("#msg-list", "p104").await;
    browser
        .wait_eval(
            "return [...document.querySelectorAll('#msg-list tbody tr')].map(r => r.dataset.open.split('/')[1])",
            &json!(["w-104"]),
        )
        .await;

    // Refresh paused: a message pushed meanwhile (newest first) is not
    // shown, however long one waits; every 2 s: shown at once and from
    // then on every 2 s; the choice outlives a reload.
    browser
        .goto(&gw.url(&format!("/#/messages?queue={wide}")))
        .await;
    browser.wait_text("#msg-list", "Showing 1–200").await;
    let first = "return document.querySelector('#msg-list tbody tr').dataset.open";
    let before = browser.eval(first).await.unwrap();
    browser.hover("#updated").await; // (a pointer on a row would hold any refresh)
    browser.click("#every option[value='0']").await;
    // A message pushed to p001, and whether the first row is no longer `before`.
    let push_late = |payload: &str| {
        let items = json!({"items": [{"queue": wide, "partition": "p001", "payload": payload}]});
        call(&gw, reqwest::Method::POST, "/api/v1/push", Some(items))
    };
    let moved_from = |before: &Value| {
        format!("return document.querySelector('#msg-list tbody tr').dataset.open !== {before}")
    };
    push_late("late").await;
    tokio::time::sleep(std::time::Duration::from_secs(6)).await; // past the default 5 s
    assert_eq!(
        browser.eval(first).await.unwrap(),
        before,
        "redrawn while paused"
    );
    let updated = browser
        .eval("return document.querySelector('#updated').textContent")
        .await;
    let seconds: u64 = updated
        .as_ref()
        .unwrap()
        .as_str()
        .unwrap()
        .trim_start_matches("updated ")
        .trim_end_matches("s ago")
        .parse()
        .unwrap();
    assert!(seconds >= 5, "{updated:?}");
    browser.click("#every option[value='2']").await;
    browser.wait_eval(&moved_from(&before), &json!(true)).await;
    browser
        .eval("location.reload(); return true")
        .await
        .unwrap();
    browser.wait_text("#msg-list", "Showing 1–200").await;
    assert_eq!(
        browser
            .eval("return document.querySelector('#every').value")
            .await
            .unwrap(),
        json!("2")
    );

    // A refresh leaves the row under the pointer where it is: a message
    // pushed meanwhile would put another there.
    let before = browser.eval(first).await.unwrap();
    browser.hover("#msg-list tbody tr").await;
    push_late("later").await;
    tokio::time::sleep(std::time::Duration::from_secs(3)).await; // past a 2 s refresh
    assert_eq!(
        browser.eval(first).await.unwrap(),
        before,
        "the row under the pointer changed"
    );
    browser.hover("#updated").await;
    browser.wait_eval(&moved_from(&before), &json!(true)).await; // redrawn once the pointer left

    // A wide table scrolled sideways stays scrolled across refreshes.
    browser.goto(&gw.url("/#/overview")).await;
    browser.wait_text("#queues", &long).await;
    let scroll = "const b = document.querySelector('#queues .scroll'); b.scrollLeft = 300; return b.scrollLeft";
    let at = browser.eval(scroll).await.unwrap();
    assert!(at.as_i64() > Some(0), "the table does not scroll: {at}");
    browser.wait_text("#updated", "updated 0s ago").await; // (a refresh since)
    browser.wait_text("#updated", "updated 1s ago").await;
    browser.wait_text("#updated", "updated 0s ago").await;
    assert_eq!(
        browser
            .eval("return document.querySelector('#queues .scroll').scrollLeft")
            .await
            .unwrap(),
        at
    );

    // A long name wraps: the page does not widen.
    browser.goto(&gw.url(&format!("/#/queue/{long}"))).await;
    browser.wait_text("#partitions", "Default").await;
    assert_no_sideways_scroll(&browser, "the queue page of a 300-character name").await;

    // A broken escape in the address is read as written: a queue of that name.
    browser.goto(&gw.url("/#/queue/%E0")).await;
    browser.wait_text("#load-error", "404").await;
    let mut errors: Vec<String> = unexpected(browser.console_errors().await)
        .into_iter()
        .filter(|e| !e.contains("/resources/queues/%25E0"))
        .collect();

    // The gateway gone: said in words. Its calls then fail in the network,
    // refused or cut off in flight, depending on when each was made.
    drop(gw);
    browser
        .wait_text("#load-error", "Cannot reach the gateway")
        .await;
    errors.extend(
        browser
            .console_errors()
            .await
            .into_iter()
            .filter(|e| !e.contains("net::ERR_") && !e.contains("Failed to fetch")),
    );
    browser.quit().await;
    assert!(errors.is_empty(), "console errors: {errors:?}");
}
