-- Lifetime sums of what every gateway counted and flushed into
-- pgcursor.gateway_minutes (which keeps 24 hours): the scrape's
-- queen_cluster_* counters. One row, added to by record_gateway_minutes;
-- it starts from what gateway_minutes holds now.
CREATE TABLE pgcursor.gateway_totals (
    one           boolean PRIMARY KEY DEFAULT true CHECK (one),
    push_requests bigint NOT NULL DEFAULT 0,
    pop_requests  bigint NOT NULL DEFAULT 0,
    pop_messages  bigint NOT NULL DEFAULT 0,
    ack_requests  bigint NOT NULL DEFAULT 0,
    ack_messages  bigint NOT NULL DEFAULT 0,
    ack_failed    bigint NOT NULL DEFAULT 0,
    transactions  bigint NOT NULL DEFAULT 0
);
INSERT INTO pgcursor.gateway_totals (push_requests, pop_requests, pop_messages, ack_requests, ack_messages,
                                     ack_failed, transactions)
SELECT coalesce(sum(push_requests), 0), coalesce(sum(pop_requests), 0), coalesce(sum(pop_messages), 0),
       coalesce(sum(ack_requests), 0), coalesce(sum(ack_messages), 0), coalesce(sum(ack_failed), 0),
       coalesce(sum(transactions), 0)
  FROM pgcursor.gateway_minutes;
