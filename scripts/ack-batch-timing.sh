#!/usr/bin/env bash
# Times one POST /api/v1/ack/batch of ITEMS acknowledgements spread over
# PARTITIONS partitions (every item completed, lease-less, each partition's
# items in offset order), against a running gateway on a database it can
# reach. Prints the wall time of that one request as curl measures it.
#
#   PGCURSOR_URL=http://127.0.0.1:6632 DATABASE_URL=postgres://... \
#     scripts/ack-batch-timing.sh [ITEMS=1000] [PARTITIONS=10]
set -euo pipefail
items=${1:-1000}
partitions=${2:-10}
: "${PGCURSOR_URL:?set PGCURSOR_URL}" "${DATABASE_URL:?set DATABASE_URL}"
queue="ack-timing-$(date +%s%N)"
per=$((items / partitions))

# Push PER messages into each of PARTITIONS partitions, through pgcursor.push.
psql -X -q -t -A -v ON_ERROR_STOP=1 "$DATABASE_URL" -c "
SELECT count(*) FROM jsonb_array_elements(pgcursor.push(jsonb_build_object('items',
  (SELECT jsonb_agg(jsonb_build_object('queue', '$queue', 'partition', 'p' || p,
                                       'payload', o, 'transactionId', 'p' || p || '-' || o))
     FROM generate_series(1, $partitions) p, generate_series(1, $per) o))))" >/dev/null

# The batch: every partition's messages, interleaved across partitions.
body=$(psql -X -q -t -A -v ON_ERROR_STOP=1 "$DATABASE_URL" -c "
SELECT jsonb_build_object('acknowledgments', jsonb_agg(jsonb_build_object(
         'transactionId', pa.name || '-' || o, 'partitionId', pa.id, 'status', 'completed')
         ORDER BY o, pa.name))
  FROM pgcursor.partitions pa, generate_series(1, $per) o
 WHERE pa.queue = '$queue'")

tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
printf '%s' "$body" >"$tmp"
curl -s -o /tmp/ack-batch-answer.json -w 'items=%{size_upload}B status=%{http_code} time_total=%{time_total}s\n' \
    -H 'content-type: application/json' --data-binary @"$tmp" "$PGCURSOR_URL/api/v1/ack/batch"
python3 -c "
import json; a = json.load(open('/tmp/ack-batch-answer.json'))
print(len(a), 'answers,', sum(1 for x in a if x['success']), 'success')"
