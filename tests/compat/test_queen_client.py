"""The queen-mq Python client (PyPI, 2.x, default JSON mode) against a running
pgcursor gateway. The gateway's base URL comes from PGCURSOR_URL.

Every test uses its own queue (and, where it matters, namespace), so the
tests are independent of each other and of whatever else is in the database.

Note on reading failures: the client's pop() turns every error (a 404 for a
missing route included) into an empty list, and DLQ get() into an empty
listing. That is why each "nothing left" assertion here follows an assertion
that the same call returned the pushed messages first.
"""

import asyncio
import os
import time
import uuid
from datetime import datetime
from typing import Any, Awaitable, Callable, Dict, List

import httpx
import pytest
from queen import Queen

BASE_URL = os.environ.get("PGCURSOR_URL", "").rstrip("/")
# Only when the gateway has tokens configured; it needs the admin level
# (configure and delete are admin routes).
TOKEN = os.environ.get("PGCURSOR_TOKEN") or None

# Bounds: no test may hang a `make test` run.
TEST_TIMEOUT_S = 60
CONSUME_TIMEOUT_S = 20


@pytest.fixture(autouse=True)
def _require_url() -> None:
    if not BASE_URL:
        pytest.fail("PGCURSOR_URL is not set (e.g. PGCURSOR_URL=http://127.0.0.1:8080)")


def run(body: Callable[[Queen], Awaitable[Any]], timeout: float = TEST_TIMEOUT_S) -> Any:
    """Runs body(client) on a fresh client and closes it afterwards.

    retry_attempts=1 only makes a failing gateway fail fast (no 1 s + 2 s
    backoff on 5xx); the wire format is the client's default JSON one.
    """

    async def main() -> Any:
        client = Queen(BASE_URL, retry_attempts=1, timeout_millis=15000, bearer_token=TOKEN)
        try:
            return await asyncio.wait_for(body(client), timeout)
        finally:
            await client.close()

    return asyncio.run(main())


def name(kind: str = "q") -> str:
    return f"compat-{kind}-{uuid.uuid4().hex[:12]}"


def payloads(n: int, tag: str = "m") -> List[Dict[str, Any]]:
    return [{"n": i, "tag": tag, "nested": {"list": [i, str(i)], "flag": i % 2 == 0}} for i in range(n)]


async def create(client: Queen, queue: str, **options: Any) -> Dict[str, Any]:
    builder = client.queue(queue)
    if options:
        builder = builder.config(options)
    result = await builder.create()
    assert isinstance(result, dict), result
    assert result.get("configured") is True, result
    return result


async def push_all(client: Queen, queue: str, items: List[Dict[str, Any]], partition: str = "Default") -> List[Dict[str, Any]]:
    results = await client.queue(queue).partition(partition).push([{"data": p} for p in items])
    assert isinstance(results, list) and len(results) == len(items), results
    assert [r.get("status") for r in results] == ["queued"] * len(items), results
    return results


async def pop_now(client: Queen, queue: str, batch: int = 0, group: str = "", partition: str = "") -> List[Dict[str, Any]]:
    """A non-waiting pop; batch 0 leaves the batch to the client default."""
    builder = client.queue(queue).wait(False)
    if batch:
        builder = builder.batch(batch)
    if group:
        builder = builder.group(group)
    if partition:
        builder = builder.partition(partition)
    return await builder.pop()


def data(messages: List[Dict[str, Any]]) -> List[Any]:
    return [m["data"] for m in messages]


# ---------------------------------------------------------------- configure


def test_configure_creates_and_updates_queue() -> None:
    queue = name()

    async def body(client: Queen) -> None:
        created = await create(client, queue, lease_time=60, retry_limit=2)
        assert created["queue"] == queue
        assert created["options"]["leaseTime"] == 60
        assert created["options"]["retryLimit"] == 2

        updated = await create(client, queue, lease_time=90, retry_limit=5, dead_letter_queue=True)
        assert updated["options"]["leaseTime"] == 90
        assert updated["options"]["retryLimit"] == 5

        details = await client.admin.get_queue(queue)
        assert isinstance(details, dict) and queue in str(details), details

    run(body)


def test_delete_queue() -> None:
    queue = name()

    async def body(client: Queen) -> None:
        await create(client, queue)
        await push_all(client, queue, payloads(1))
        await client.queue(queue).delete()
        with pytest.raises(httpx.HTTPStatusError) as gone:
            await client.admin.get_queue(queue)
        assert gone.value.response.status_code == 404

    run(body)


def test_namespace_and_task_are_stored_and_popped_by() -> None:
    queue, ns, task = name(), name("ns"), name("task")

    async def body(client: Queen) -> None:
        created = await client.queue(queue).namespace(ns).task(task).create()
        assert created["namespace"] == ns and created["task"] == task, created
        await push_all(client, queue, payloads(2))

        got = await client.queue().namespace(ns).task(task).batch(2).wait(False).pop()
        assert data(got) == payloads(2)
        assert all(m["queue"] == queue for m in got)
        assert (await client.ack(got))["success"] is True
        assert await client.queue().namespace(ns).task(task).wait(False).pop() == []

    run(body)


# --------------------------------------------------------------------- push


def test_push_single_batch_and_duplicate() -> None:
    queue = name()

    async def body(client: Queen) -> None:
        tid = str(uuid.uuid4())
        single = await client.queue(queue).push({"data": {"hello": "world"}, "transactionId": tid})
        assert isinstance(single, list) and len(single) == 1, single
        assert single[0]["status"] == "queued"
        assert single[0]["transactionId"] == tid
        assert single[0]["queue"] == queue
        assert single[0]["partition"] == "Default"

        batch = await push_all(client, queue, payloads(3))
        offsets = [r["offset"] for r in batch]
        assert offsets == sorted(offsets) and len(set(offsets)) == 3
        assert offsets[0] > single[0]["offset"]
        assert len({r["partitionId"] for r in batch + single}) == 1

        duplicates: List[Any] = []

        async def on_duplicate(items: List[Any], _error: Exception) -> None:
            duplicates.extend(items)

        again = await client.queue(queue).push({"data": {"hello": "again"}, "transactionId": tid}).on_duplicate(on_duplicate)
        assert again[0]["status"] == "duplicate"
        assert len(duplicates) == 1

        # The duplicate wrote nothing: exactly four messages are there.
        got = await pop_now(client, queue, batch=10)
        assert data(got) == [{"hello": "world"}] + payloads(3)

    run(body)


# ---------------------------------------------------------------- pop + ack


def test_pop_batch_in_order_then_ack_batch() -> None:
    queue = name()

    async def body(client: Queen) -> None:
        pushed = await push_all(client, queue, payloads(5))
        got = await pop_now(client, queue, batch=5)
        assert data(got) == payloads(5)
        for message, pushed_item in zip(got, pushed):
            assert message["payload"] == message["data"]
            assert message["transactionId"] == pushed_item["transactionId"]
            assert message["partitionId"] == pushed_item["partitionId"]
            assert message["queue"] == queue
            assert message["partition"] == "Default"
        assert len({m["leaseId"] for m in got}) == 1 and got[0]["leaseId"]

        # Leased: another consumer of the same (queue-mode) group gets nothing.
        assert await pop_now(client, queue, batch=5) == []

        acked = await client.ack(got)
        assert acked["success"] is True, acked
        assert await pop_now(client, queue, batch=5) == []

    run(body)


def test_pop_default_batch_and_single_acks() -> None:
    queue = name()

    async def body(client: Queen) -> None:
        await push_all(client, queue, payloads(3))
        seen: List[Any] = []
        for _ in range(10):
            got = await pop_now(client, queue)  # no batch(): autopilot=true, no batch param
            if not got:
                break
            for message in got:
                result = await client.ack(message)
                assert result["success"] is True, result
            seen.extend(data(got))
        assert seen == payloads(3)
        assert await pop_now(client, queue) == []

    run(body)


def test_ack_of_last_message_completes_the_batch() -> None:
    queue = name()

    async def body(client: Queen) -> None:
        await push_all(client, queue, payloads(4))
        got = await pop_now(client, queue, batch=4)
        assert len(got) == 4
        result = await client.ack(got[-1])
        assert result["success"] is True, result
        assert await pop_now(client, queue, batch=4) == []

    run(body)


def test_pop_from_a_named_partition() -> None:
    queue = name()

    async def body(client: Queen) -> None:
        await push_all(client, queue, payloads(2, "one"), partition="p1")
        await push_all(client, queue, payloads(3, "two"), partition="p2")
        got = await pop_now(client, queue, batch=10, partition="p2")
        assert data(got) == payloads(3, "two")
        assert {m["partition"] for m in got} == {"p2"}
        assert (await client.ack(got))["success"] is True

        rest = await pop_now(client, queue, batch=10, partition="p1")
        assert data(rest) == payloads(2, "one")

    run(body)


def test_pop_commit_on_delivery_needs_no_ack() -> None:
    queue = name()

    async def body(client: Queen) -> None:
        await push_all(client, queue, payloads(2))
        got = await client.queue(queue).batch(2).wait(False).commit_on_delivery().pop()
        assert data(got) == payloads(2)
        assert await pop_now(client, queue, batch=2) == []

    run(body)


def test_long_poll_pop_wakes_on_push() -> None:
    queue = name()

    async def body(client: Queen) -> None:
        await create(client, queue)

        async def push_later() -> None:
            await asyncio.sleep(0.5)
            await push_all(client, queue, payloads(1))

        started = time.monotonic()
        got, _ = await asyncio.gather(
            client.queue(queue).batch(1).wait(True).timeout_millis(8000).pop(), push_later()
        )
        elapsed = time.monotonic() - started
        assert data(got) == payloads(1)
        assert elapsed < 6, f"the long poll was not woken by the push ({elapsed:.1f}s)"

        # An empty long poll returns empty after about its timeout.
        assert (await client.ack(got))["success"] is True
        started = time.monotonic()
        assert await client.queue(queue).wait(True).timeout_millis(1000).pop() == []
        assert 0.8 <= time.monotonic() - started < 5

    run(body)


# ----------------------------------------------------------- failed acks, DLQ


def test_failed_ack_redelivers_the_batch() -> None:
    queue = name()

    async def body(client: Queen) -> None:
        await create(client, queue, retry_limit=3)
        await push_all(client, queue, payloads(2))
        got = await pop_now(client, queue, batch=2)
        assert data(got) == payloads(2)
        assert got[0]["retryCount"] == 0

        nack = await client.ack(got[0], False, {"error": "handler blew up"})
        assert nack["success"] is True, nack
        assert nack.get("dlq") is False

        again = await pop_now(client, queue, batch=2)
        assert [m["transactionId"] for m in again] == [m["transactionId"] for m in got]
        assert data(again) == payloads(2)
        assert again[0]["retryCount"] == 1
        assert again[0]["leaseId"] != got[0]["leaseId"]

        # The old lease is gone: an ack naming it is refused, and reported so.
        stale = await client.ack(got[0])
        assert stale["success"] is False
        assert stale["error"] == "invalid or expired lease"

        assert (await client.ack(again))["success"] is True
        assert await pop_now(client, queue, batch=2) == []

    run(body)


def test_failed_ack_with_retry_limit_zero_is_dead_lettered() -> None:
    queue = name()

    async def body(client: Queen) -> None:
        await create(client, queue, retry_limit=0)
        pushed = await push_all(client, queue, payloads(2))
        got = await pop_now(client, queue, batch=1)
        assert data(got) == payloads(1)

        nack = await client.ack(got[0], False, {"error": "poison"})
        assert nack["success"] is True, nack
        assert nack.get("dlq") is True

        listing = await client.queue(queue).dlq().get()
        assert listing["total"] == 1, listing
        [dead] = listing["messages"]
        assert dead["transactionId"] == pushed[0]["transactionId"]
        assert dead["partitionId"] == pushed[0]["partitionId"]
        assert dead["queue"] == queue
        assert dead["data"] == payloads(1)[0]
        assert dead["errorMessage"] == "poison"

        # The cursor moved past the dead letter: the next message comes next.
        rest = await pop_now(client, queue, batch=5)
        assert data(rest) == payloads(2)[1:]

    run(body)


def test_dlq_status_and_listing_filters() -> None:
    queue = name()

    async def body(client: Queen) -> None:
        await create(client, queue)  # retryLimit 3: only an explicit dlq dead-letters at once
        await push_all(client, queue, payloads(3))
        got = await pop_now(client, queue, batch=3, group="billing")
        assert len(got) == 3
        result = await client.ack(got[1], "dlq", {"group": "billing", "error": "bad shape"})
        assert result["success"] is True and result.get("dlq") is True, result

        listing = await client.queue(queue).dlq("billing").get()
        assert listing["total"] == 1
        assert listing["messages"][0]["transactionId"] == got[1]["transactionId"]
        assert listing["messages"][0]["consumerGroup"] == "billing"
        assert listing["messages"][0]["errorMessage"] == "bad shape"
        assert (await client.queue(queue).dlq("someone-else").get())["total"] == 0
        assert (await client.queue(queue).dlq().limit(1).offset(1).get())["messages"] == []

        # Offset 1 was completed by the dlq ack, offset 2 dead-lettered: 3 is next.
        rest = await pop_now(client, queue, batch=3, group="billing")
        assert data(rest) == payloads(3)[2:]

    run(body)


# -------------------------------------------------------------------- leases


def test_renew_extends_the_lease() -> None:
    queue = name()

    async def body(client: Queen) -> None:
        await create(client, queue, lease_time=3)
        await push_all(client, queue, payloads(1))
        got = await pop_now(client, queue, batch=1)
        assert data(got) == payloads(1)

        await asyncio.sleep(2)
        renewed = await client.renew(got[0])  # no body at all: 60 s, as in Queen (not the queue's 3)
        assert renewed["success"] is True, renewed
        expires = datetime.fromisoformat(renewed["newExpiresAt"].replace("Z", "+00:00"))
        assert 55 < (expires - datetime.fromisoformat(got[0]["createdAt"].replace("Z", "+00:00"))).total_seconds() < 70
        assert renewed.get("renewed", 1) >= 1

        await asyncio.sleep(1.8)  # past the original expiry, inside the renewed one
        assert await pop_now(client, queue, batch=1) == []
        acked = await client.ack(got[0])
        assert acked["success"] is True, acked
        assert await pop_now(client, queue, batch=1) == []

        gone = await client.renew(got[0]["leaseId"])
        assert gone["success"] is False
        assert gone["error"] == "invalid or expired lease"

    run(body)


# ------------------------------------------------------------------- consume


def test_consume_each_acks_every_message() -> None:
    queue = name()

    async def body(client: Queen) -> None:
        await push_all(client, queue, payloads(5))
        seen: List[Any] = []

        async def handler(message: Dict[str, Any]) -> None:
            assert isinstance(message, dict)
            seen.append(message["data"])

        await asyncio.wait_for(
            client.queue(queue).each().wait(True).timeout_millis(1000).limit(5).consume(handler),
            CONSUME_TIMEOUT_S,
        )
        assert seen == payloads(5)
        assert await pop_now(client, queue, batch=5) == []

    run(body)


def test_consume_batch_acks_the_batch() -> None:
    queue = name()

    async def body(client: Queen) -> None:
        await push_all(client, queue, payloads(6))
        batches: List[List[Any]] = []

        async def handler(messages: List[Dict[str, Any]]) -> None:
            assert isinstance(messages, list)
            batches.append(data(messages))

        await asyncio.wait_for(
            client.queue(queue).batch(3).wait(True).timeout_millis(1000).limit(6).consume(handler),
            CONSUME_TIMEOUT_S,
        )
        assert batches == [payloads(6)[:3], payloads(6)[3:]]
        assert await pop_now(client, queue, batch=6) == []

    run(body)


def test_consume_each_nack_redelivers() -> None:
    queue = name()

    async def body(client: Queen) -> None:
        await create(client, queue, retry_limit=3)
        await push_all(client, queue, payloads(3))
        seen: List[int] = []

        async def handler(message: Dict[str, Any]) -> None:
            n = message["data"]["n"]
            seen.append(n)
            if n == 1 and seen.count(1) == 1:
                raise RuntimeError("first attempt fails")

        # 0 ok, 1 nacked (the rest of that batch is skipped), 1 ok, 2 ok.
        await asyncio.wait_for(
            client.queue(queue).batch(3).each().wait(True).timeout_millis(1000).limit(4).consume(handler),
            CONSUME_TIMEOUT_S,
        )
        assert seen == [0, 1, 1, 2]
        assert await pop_now(client, queue, batch=3) == []
        assert (await client.queue(queue).dlq().get())["total"] == 0

    run(body)


def test_consume_batch_nack_redelivers_the_batch() -> None:
    queue = name()

    async def body(client: Queen) -> None:
        await create(client, queue, retry_limit=3)
        await push_all(client, queue, payloads(2))
        batches: List[List[Any]] = []

        async def handler(messages: List[Dict[str, Any]]) -> None:
            batches.append(data(messages))
            if len(batches) == 1:
                raise RuntimeError("whole batch fails once")

        await asyncio.wait_for(
            client.queue(queue).batch(2).wait(True).timeout_millis(1000).limit(4).consume(handler),
            CONSUME_TIMEOUT_S,
        )
        assert batches == [payloads(2), payloads(2)]
        assert await pop_now(client, queue, batch=2) == []

    run(body)


def test_consume_stops_on_idle_timeout() -> None:
    queue = name()

    async def body(client: Queen) -> None:
        await push_all(client, queue, payloads(2))
        seen: List[Any] = []

        async def handler(messages: Any) -> None:
            seen.extend(data(messages if isinstance(messages, list) else [messages]))

        started = time.monotonic()
        await asyncio.wait_for(
            client.queue(queue).wait(True).timeout_millis(500).idle_millis(1000).consume(handler),
            CONSUME_TIMEOUT_S,
        )
        assert seen == payloads(2)
        assert time.monotonic() - started < 10

    run(body)


# ------------------------------------------------------------ consumer groups


def test_two_groups_each_see_every_message() -> None:
    queue = name()

    async def body(client: Queen) -> None:
        await push_all(client, queue, payloads(4))

        a = await pop_now(client, queue, batch=4, group="group-a")
        assert data(a) == payloads(4)
        assert all(m["consumerGroup"] == "group-a" for m in a)
        assert (await client.ack(a, True, {"group": "group-a"}))["success"] is True

        seen_b: List[Any] = []

        async def handler(messages: List[Dict[str, Any]]) -> None:
            seen_b.extend(data(messages))

        await asyncio.wait_for(
            client.queue(queue).group("group-b").subscription_mode("all").batch(2)
            .wait(True).timeout_millis(1000).limit(4).consume(handler),
            CONSUME_TIMEOUT_S,
        )
        assert seen_b == payloads(4)

        # Both groups are done; queue mode was never touched and sees all four.
        assert await pop_now(client, queue, batch=4, group="group-a") == []
        assert await pop_now(client, queue, batch=4, group="group-b") == []
        assert data(await pop_now(client, queue, batch=4)) == payloads(4)

    run(body)


def test_group_ack_does_not_leak_into_another_group() -> None:
    queue = name()

    async def body(client: Queen) -> None:
        await push_all(client, queue, payloads(2))
        a = await pop_now(client, queue, batch=2, group="ga")
        b = await pop_now(client, queue, batch=2, group="gb")
        assert data(a) == data(b) == payloads(2)
        assert a[0]["leaseId"] != b[0]["leaseId"]

        assert (await client.ack(a, True, {"group": "ga"}))["success"] is True
        # gb's lease is untouched: it can still ack with it.
        assert (await client.ack(b[0], True, {"group": "gb"}))["success"] is True
        b_rest = await pop_now(client, queue, batch=2, group="gb")
        assert b_rest == []  # b[1] is still leased to gb's first consumer
        assert (await client.ack(b[1], True, {"group": "gb"}))["success"] is True
        assert await pop_now(client, queue, batch=2, group="gb") == []

    run(body)


def test_subscription_mode_new_skips_the_backlog() -> None:
    queue = name()

    async def body(client: Queen) -> None:
        await push_all(client, queue, payloads(3, "old"))
        assert await pop_now_mode(client, queue, "late", "new") == []
        await push_all(client, queue, payloads(1, "new"))
        got = await pop_now_mode(client, queue, "late", "new")
        assert data(got) == payloads(1, "new")

    run(body)


def test_subscription_from_starts_a_new_group_at_a_timestamp() -> None:
    queue = name()

    async def body(client: Queen) -> None:
        await push_all(client, queue, payloads(1, "before"))
        await asyncio.sleep(0.3)
        await push_all(client, queue, payloads(1, "after"))

        # The broker's own clock: read both createdAt stamps through a pop.
        both = await pop_now(client, queue, batch=2, group="peek")
        assert len(both) == 2
        t0 = datetime.fromisoformat(both[0]["createdAt"].replace("Z", "+00:00"))
        t1 = datetime.fromisoformat(both[1]["createdAt"].replace("Z", "+00:00"))
        assert t1 > t0
        between = (t0 + (t1 - t0) / 2).isoformat()

        got = await client.queue(queue).group("from-ts").subscription_from(between).batch(10).wait(False).pop()
        assert data(got) == payloads(1, "after")

    run(body)


async def pop_now_mode(client: Queen, queue: str, group: str, mode: str) -> List[Dict[str, Any]]:
    return await client.queue(queue).group(group).subscription_mode(mode).batch(10).wait(False).pop()


# -------------------------------------------------------------- transactions


def test_transaction_acks_and_pushes_together() -> None:
    source, target = name("src"), name("dst")

    async def body(client: Queen) -> None:
        await push_all(client, source, payloads(2))
        await create(client, target)
        got = await pop_now(client, source, batch=2)
        assert len(got) == 2

        result = await (
            client.transaction()
            .ack(got)
            .queue(target).push([{"data": {"forwarded": m["data"]["n"]}} for m in got])
            .commit()
        )
        assert result["success"] is True, result

        assert await pop_now(client, source, batch=2) == []
        forwarded = await pop_now(client, target, batch=5)
        assert data(forwarded) == [{"forwarded": 0}, {"forwarded": 1}]

    run(body)


# ------------------------------------------------------------ queue options


@pytest.mark.parametrize("option", ["delayed_processing", "window_buffer"])
def test_a_delay_option_holds_messages_back_until_their_time(option: str) -> None:
    # delayedProcessing: each message until it is 2 s old; windowBuffer: the
    # partition until its newest message is 2 s old. Either way, 2 s of nothing.
    queue = name()

    async def body(client: Queen) -> None:
        await create(client, queue, **{option: 2})
        await push_all(client, queue, payloads(2))
        assert await pop_now(client, queue, batch=10) == []
        await asyncio.sleep(2.3)
        got = await pop_now(client, queue, batch=10)
        assert data(got) == payloads(2)

    run(body)


def test_max_size_refuses_what_does_not_fit() -> None:
    queue = name()

    async def body(client: Queen) -> None:
        await create(client, queue, max_size=2)
        await push_all(client, queue, payloads(2))
        with pytest.raises(Exception, match="queue is full"):
            await client.queue(queue).push([{"data": {"n": 99}}])
        got = await pop_now(client, queue, batch=10)
        assert data(got) == payloads(2)
        for message in got:
            assert (await client.ack(message))["success"] is True
        await push_all(client, queue, payloads(1, "room"))

    run(body)


def test_a_namespace_pop_serves_the_higher_priority_queue_first() -> None:
    # low sorts first by name and is created first: only priority puts high first.
    ns = name("ns")
    low, high = f"{ns}-a", f"{ns}-b"

    async def body(client: Queen) -> None:
        for queue, priority in ((low, 0), (high, 5)):
            await client.queue(queue).namespace(ns).config({"priority": priority}).create()
            await push_all(client, queue, payloads(2, queue))
        for expected in (high, low):
            got = await client.queue().namespace(ns).batch(2).wait(False).pop()
            assert [m["queue"] for m in got] == [expected, expected], got
            assert data(got) == payloads(2, expected)
            assert (await client.ack(got))["success"] is True
        assert await client.queue().namespace(ns).wait(False).pop() == []

    run(body)


def test_configure_refuses_an_option_it_does_not_know() -> None:
    queue = name()

    async def body(client: Queen) -> None:
        with pytest.raises(Exception, match="not a queue option"):
            await client.queue(queue).config({"no_such_option": 1}).create()

    run(body)


def test_subscription_mode_other_than_new_means_all() -> None:
    queue = name()

    async def body(client: Queen) -> None:
        await push_all(client, queue, payloads(2))
        assert data(await pop_now_mode(client, queue, "early", "from_beginning")) == payloads(2)
        assert await pop_now_mode(client, queue, "late", "new-only") == []

    run(body)


def test_push_answers_a_message_id_that_pop_shows() -> None:
    queue = name()

    async def body(client: Queen) -> None:
        pushed = await push_all(client, queue, payloads(2))
        ids = [r["message_id"] for r in pushed]
        assert all(ids) and len(set(ids)) == 2, pushed
        got = await pop_now(client, queue, batch=10)
        assert [m["id"] for m in got] == ids

    run(body)


def test_push_maintenance_refuses_pushes_until_it_is_off() -> None:
    queue = name()
    headers = {"Authorization": f"Bearer {TOKEN}"} if TOKEN else {}
    switch = f"{BASE_URL}/api/v1/system/maintenance"

    async def body(client: Queen) -> None:
        async with httpx.AsyncClient(headers=headers) as http:
            on = await http.post(switch, json={"enabled": True})
            assert on.status_code == 200 and on.json()["maintenanceMode"] is True, on.text
            try:
                with pytest.raises(Exception, match="maintenance mode"):
                    await client.queue(queue).push([{"data": {"n": 1}}])
            finally:
                off = await http.post(switch, json={"enabled": False})
                assert off.status_code == 200, off.text
        await push_all(client, queue, payloads(1))
        assert data(await pop_now(client, queue, batch=10)) == payloads(1)

    run(body)


def test_encrypted_queue_round_trips_plaintext_for_the_client() -> None:
    # The gateway of `make test` runs with PGCURSOR_ENCRYPTION_KEY (scripts/test.sh);
    # what is stored is an envelope (tests/http/encryption.rs reads it from SQL).
    queue = name()

    async def body(client: Queen) -> None:
        result = await create(client, queue, encryption_enabled=True)
        assert result["options"]["encryptionEnabled"] is True, result
        await push_all(client, queue, payloads(2, "secret"))
        got = await pop_now(client, queue, batch=10)
        assert data(got) == payloads(2, "secret")

    run(body)


# ----------------------------------------------------------- consumer groups


async def consume_all(client: Queen, queue: str, group: str, n: int) -> List[Dict[str, Any]]:
    """Pops n messages for the group and acks the last one (it completes the batch)."""
    got = await pop_now(client, queue, batch=n, group=group)
    assert len(got) == n, got
    acked = await client.ack(got[-1], context={"group": group})
    assert acked["success"] is True, acked
    return got


def test_admin_lists_describes_and_reports_consumer_groups() -> None:
    queue, group = name(), name("g")

    async def body(client: Queen) -> None:
        await push_all(client, queue, payloads(3))
        got = await pop_now(client, queue, batch=1, group=group)
        assert (await client.ack(got[0], context={"group": group}))["success"] is True

        groups = await client.admin.list_consumer_groups()
        mine = [g for g in groups if g["name"] == group]
        assert len(mine) == 1, groups
        assert mine[0]["queueName"] == queue and mine[0]["topics"] == [queue]
        assert mine[0]["members"] == 1 and mine[0]["partitionsWithLag"] == 1
        assert mine[0]["state"] in ("Stable", "Lagging")

        detail = await client.admin.get_consumer_group(group)
        partition = detail[queue]["partitions"][0]
        assert partition["totalConsumed"] == 1 and partition["offsetLag"] == 2, detail

        lagging = await client.admin.get_lagging_consumers(min_lag_seconds=0)
        assert isinstance(lagging, list), lagging
        assert (await client.admin.refresh_consumer_stats())["success"] is True

        health = await client.admin.health()
        assert health["status"] == "healthy" and health["database"] == "connected", health
        metrics = await client.admin.metrics()  # a dict, whatever its docstring says
        assert metrics["database"]["poolSize"] > 0, metrics
        assert set(metrics) >= {"uptime", "requests", "messages", "database", "memory", "cpu"}, metrics

    run(body)


def test_admin_seek_back_replays_and_seek_to_end_skips() -> None:
    queue, group = name(), name("g")

    async def body(client: Queen) -> None:
        for item in payloads(3):  # one push each: three distinct createdAt
            await client.queue(queue).push([{"data": item}])
            await asyncio.sleep(0.05)
        first = await consume_all(client, queue, group, 3)
        assert await pop_now(client, queue, batch=10, group=group) == []

        answer = await client.admin.seek_consumer_group(group, queue, {"timestamp": first[1]["createdAt"]})
        assert answer["success"] is True and answer["partitionsUpdated"] == 1, answer
        replay = await pop_now(client, queue, batch=10, group=group)
        assert data(replay) == payloads(3)[1:], "replayed from the message created at the time"
        assert (await client.ack(replay[-1], context={"group": group}))["success"] is True

        await client.admin.seek_consumer_group(group, queue, {"timestamp": "2000-01-01T00:00:00Z"})
        assert data(await pop_now(client, queue, batch=10, group=group)) == payloads(3)

        answer = await client.admin.seek_consumer_group(group, queue, {"toEnd": True})
        assert answer["seekToEnd"] is True, answer
        assert await pop_now(client, queue, batch=10, group=group) == []
        await push_all(client, queue, payloads(1, "later"))
        assert data(await pop_now(client, queue, batch=10, group=group)) == payloads(1, "later")

    run(body)


def test_deleted_consumer_group_starts_over() -> None:
    queue, group = name(), name("g")

    async def body(client: Queen) -> None:
        await push_all(client, queue, payloads(2))
        await consume_all(client, queue, group, 2)

        answer = await client.admin.delete_consumer_group_for_queue(group, queue, delete_metadata=True)
        assert answer["deletedPartitions"] == 1 and answer["queueName"] == queue, answer
        got = await consume_all(client, queue, group, 2)
        assert data(got) == payloads(2), "a new group under the default mode: everything again"

        answer = await client.delete_consumer_group(group)
        assert answer["success"] is True and answer["deletedPartitions"] == 1, answer
        assert data(await pop_now(client, queue, batch=10, group=group)) == payloads(2)

    run(body)


def test_update_consumer_group_timestamp_moves_its_subscription() -> None:
    queue, group = name(), name("g")

    async def body(client: Queen) -> None:
        await push_all(client, queue, payloads(1))
        assert len(await pop_now(client, queue, batch=1, group=group)) == 1
        answer = await client.update_consumer_group_timestamp(group, "2026-01-01T00:00:00Z")
        assert answer["success"] is True and answer["rowsUpdated"] == 1, answer
        groups = await client.admin.list_consumer_groups()
        mine = [g for g in groups if g["name"] == group]
        assert mine[0]["subscriptionMode"] == "timestamp", mine
        assert mine[0]["subscriptionTimestamp"].startswith("2026-01-01T00:00:00"), mine

    run(body)


# ------------------------------------------------ message browser and traces


def test_admin_lists_shows_retries_and_deletes_messages() -> None:
    queue = name()

    async def body(client: Queen) -> None:
        await create(client, queue)
        pushed = await push_all(client, queue, payloads(3))
        got = await pop_now(client, queue, batch=3, group="billing")
        result = await client.ack(got[1], "dlq", {"group": "billing", "error": "bad shape"})
        assert result.get("dlq") is True, result
        admin = client.admin

        listing = await admin.list_messages(queue=queue, limit=10)
        assert [m["transactionId"] for m in listing["messages"]] == [p["transactionId"] for p in reversed(pushed)]
        assert [m["status"] for m in listing["messages"]] == ["pending", "dead_letter", "completed"], listing
        assert listing["mode"]["type"] == "bus", listing
        dead = await admin.list_messages(queue=queue, status="dead_letter")
        assert [m["transactionId"] for m in dead["messages"]] == [pushed[1]["transactionId"]]

        pid, tid = pushed[1]["partitionId"], pushed[1]["transactionId"]
        detail = await admin.get_message(pid, tid)
        assert detail["status"] == "dead_letter" and detail["errorMessage"] == "bad shape", detail
        assert detail["payload"] == payloads(3)[1]
        assert detail["queueConfig"]["retryLimit"] == 3, detail

        retried = await admin.retry_message(pid, tid)
        assert retried["success"] is True and len(retried["requeued"]) == 1, retried
        assert (await client.queue(queue).dlq().get())["total"] == 0
        again = await pop_now(client, queue, batch=10, group="billing")
        assert data(again) == [payloads(3)[2], payloads(3)[1]]

        deleted = await admin.delete_message(pushed[0]["partitionId"], pushed[0]["transactionId"])
        assert deleted["success"] is True and deleted["message"] == "Message deleted successfully", deleted
        missing = await admin.delete_message(pushed[0]["partitionId"], pushed[0]["transactionId"])
        assert missing["success"] is False, missing

    run(body)


def test_message_trace_is_read_back_by_message_by_name_and_in_names() -> None:
    queue = name()
    trace_name = f"{queue} order #7+x"  # needs escapes (the client quotes all but "/")

    async def body(client: Queen) -> None:
        pushed = await push_all(client, queue, payloads(1))
        answers: List[Dict[str, Any]] = []

        async def handler(message: Dict[str, Any]) -> None:
            answers.append(await message["trace"]({"traceName": trace_name, "data": {"text": "handled"}}))
            answers.append(await message["trace"]({"eventType": "audit", "data": {"text": "noted"}}))

        await asyncio.wait_for(
            client.queue(queue).each().wait(True).timeout_millis(1000).limit(1).consume(handler),
            CONSUME_TIMEOUT_S,
        )
        assert [a["success"] for a in answers] == [True, True], answers
        assert all(a.get("traceId") for a in answers), answers
        admin = client.admin

        pid, tid = pushed[0]["partitionId"], pushed[0]["transactionId"]
        of_message = await admin.get_traces_for_message(pid, tid)
        events = of_message["traces"]
        assert [e["data"]["text"] for e in events] == ["handled", "noted"], of_message
        assert [e["event_type"] for e in events] == ["info", "audit"]
        assert events[0]["trace_names"] == [trace_name] and events[1]["trace_names"] == []
        assert events[0]["consumer_group"] == "__QUEUE_MODE__"

        by_name = await admin.get_traces_by_name(trace_name, limit=10, offset=0)
        assert by_name["total"] == 1, by_name
        [event] = by_name["traces"]
        assert event["queue_name"] == queue and event["transaction_id"] == tid, event
        assert event["message_payload"] == payloads(1)[0]

        names = await admin.get_trace_names(limit=1000)
        ours = [n for n in names["trace_names"] if n["trace_name"] == trace_name]
        assert ours == [{"trace_name": trace_name, "trace_count": 1, "message_count": 1,
                         "last_seen": events[0]["created_at"]}], names

    run(body)


# ---------------------------------------------------------------- resources
# Admin's resource methods return the broker's JSON as is; these assert the
# fields Queen's dashboard and queenctl read (docs/http-api.md "Queue views
# and deletion").


def test_admin_list_queues_with_queens_fields_and_filters() -> None:
    queue, ns = name(), name("ns")

    async def body(client: Queen) -> None:
        await client.queue(queue).namespace(ns).task("ship").config({"lease_time": 45, "priority": 2}).create()
        await push_all(client, queue, payloads(3), partition="p1")
        got = await pop_now(client, queue, batch=2, group="billing")
        assert len(got) == 2

        listed = await client.admin.list_queues(search=queue, limit=10, offset=0)
        entries = [q for q in listed["queues"] if q["name"] == queue]
        assert len(entries) == 1, listed
        entry = entries[0]
        assert (entry["namespace"], entry["task"], entry["partitions"]) == (ns, "ship", 1), entry
        assert entry["messages"] == {"total": 3, "pending": 1, "processing": 2}, entry
        assert (entry["partitionCount"], entry["leaseTime"], entry["priority"]) == (1, 45, 2), entry
        assert {"retryLimit", "maxSize", "encryptionEnabled", "createdAt", "id"} <= entry.keys(), entry

        by_namespace = await client.admin.list_queues(namespace=ns)
        assert [q["name"] for q in by_namespace["queues"]] == [queue], by_namespace

    run(body)


def test_admin_get_queue_has_partition_stats() -> None:
    queue = name()

    async def body(client: Queen) -> None:
        await create(client, queue)
        await push_all(client, queue, payloads(2))
        got = await pop_now(client, queue, batch=1, group="g")
        assert (await client.ack(got, context={"group": "g"}))["success"] is True

        detail = await client.admin.get_queue(queue)
        assert (detail["name"], detail["namespace"], detail["task"]) == (queue, None, None), detail
        datetime.fromisoformat(detail["createdAt"].replace("Z", "+00:00"))
        [partition] = detail["partitions"]
        assert partition["name"] == "Default", partition
        assert partition["stats"] == {"total": 2, "pending": 1, "processing": 0, "completed": 1,
                                      "failed": 0, "deadLetter": 0}, partition
        assert partition["oldestMessage"] and partition["newestMessage"], partition
        assert detail["totals"]["completed"] == 1, detail

    run(body)


def test_admin_overview_namespaces_and_tasks() -> None:
    queue, ns, task = name(), name("ns"), name("task")

    async def body(client: Queen) -> None:
        await client.queue(queue).namespace(ns).task(task).create()
        await push_all(client, queue, payloads(2))

        overview = await client.admin.get_overview()
        assert overview["queues"] >= 1, overview
        messages = overview["messages"]
        assert {"total", "pending", "processing", "completed", "failed", "deadLetter"} <= messages.keys()
        assert messages["total"] >= 2 and messages["pending"] >= 2, overview
        for figure in ("avg", "median", "min", "max"):
            assert isinstance(overview["lag"]["time"][figure], (int, float)), overview
        assert isinstance(overview["throughput"]["ingestedPerSecond"], (int, float)), overview
        assert isinstance(overview["throughput"]["processedPerSecond"], (int, float)), overview

        namespaces = (await client.admin.get_namespaces())["namespaces"]
        assert {"namespace": ns, "queues": 1, "partitions": 1,
                "messages": {"total": 2, "pending": 2}} in namespaces, namespaces
        assert all(n["namespace"] for n in namespaces), namespaces
        tasks = (await client.admin.get_tasks())["tasks"]
        assert any(t["task"] == task and t["queues"] == 1 for t in tasks), tasks

    run(body)


def test_admin_status_queue_stats_detail_and_analytics() -> None:
    queue, ns = name(), name("ns")

    async def body(client: Queen) -> None:
        await client.queue(queue).namespace(ns).task("ship").create()
        await push_all(client, queue, payloads(3), partition="p1")
        got = await pop_now(client, queue, batch=1, group="g")
        assert (await client.ack(got, context={"group": "g"}))["success"] is True

        status = await client.admin.get_status(namespace=ns)
        assert status["bucketMinutes"] == 1, status
        assert len(status["throughput"]) == status["pointCount"] >= 60, status
        stamps = [b["timestamp"] for b in status["throughput"]]
        assert stamps == sorted(stamps, reverse=True), stamps
        for figure in ("ingested", "processed", "ingestedPerSecond", "processedPerSecond", "popPerSecond"):
            assert isinstance(status["throughput"][0][figure], (int, float)), status["throughput"][0]
        messages = status["messages"]
        assert (messages["total"], messages["completed"], messages["pending"]) == (3, 1, 2), messages
        for kind in ("push", "pop", "ack"):
            assert isinstance(messages["batchEfficiency"][kind], (int, float)), messages
        assert status["leases"]["active"] == 0, status
        assert status["deadLetterQueue"]["topErrors"] == [], status
        assert [(q["name"], q["namespace"], q["task"]) for q in status["queues"]] == [(queue, ns, "ship")], status

        stats = await client.admin.get_queue_stats(namespace=ns, limit=10)
        [entry] = stats["queues"]
        assert entry["name"] == queue and entry["partitions"] == 1, entry
        assert entry["messages"] == {"total": 3, "pending": 2, "processing": 0, "completed": 1}, entry

        detail = await client.admin.get_queue_detail(queue)
        assert detail["queue"]["name"] == queue and detail["queue"]["namespace"] == ns, detail
        assert {"leaseTime", "retryLimit", "ttl", "maxQueueSize", "deadLetterQueue"} <= detail["queue"]["config"].keys()
        [partition] = detail["partitions"]
        assert partition["name"] == "p1" and partition["cursor"]["totalConsumed"] == 1, partition
        assert detail["totals"]["messages"]["total"] == 3, detail

        analytics = await client.admin.get_analytics(queue=queue, interval="minute")
        assert analytics["interval"] == "minute", analytics
        assert sum(p["messages"] for p in analytics["dataPoints"]) == 3, analytics

        # Every gateway process that flushed lately is a worker and a replica
        # (this test's gateway, and those of tests before it).
        workers = await client.admin.get_worker_metrics()
        assert isinstance(workers["timeSeries"], list), workers
        for worker in workers["workers"]:
            assert {"hostname", "workerId", "freeSlots", "dbConnections", "lastSeen"} <= worker.keys(), worker
        system = await client.admin.get_system_metrics()
        assert system["replicaCount"] == len(system["replicas"]), system
        for replica in system["replicas"]:
            assert {"hostname", "port", "workerId", "timeSeries"} <= replica.keys(), replica
            for point in replica["timeSeries"]:
                assert {"avg", "min", "max", "last"} == point["metrics"]["cpu"]["user_us"].keys(), point

    run(body)


def test_admin_status_of_an_unknown_queue_raises() -> None:
    async def body(client: Queen) -> None:
        with pytest.raises(Exception):
            await client.admin.get_queue_detail(name())

    run(body)
