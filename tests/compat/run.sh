#!/usr/bin/env bash
# The queen-mq compatibility suite against a gateway that is already running.
#
#   PGCURSOR_URL=http://127.0.0.1:PORT tests/compat/run.sh [pytest args...]
#
# Creates (or reuses) the virtualenv .venv/compat in the repository root,
# installs tests/compat/requirements.txt into it when that file changed, waits
# up to PGCURSOR_WAIT seconds (default 15) for GET $PGCURSOR_URL/health, then
# runs pytest -q tests/compat. PYTHON picks the interpreter (default python3).
# PGCURSOR_TOKEN (optional) is sent as the bearer token: it needs the admin
# level. Leave it unset for a gateway with authentication off.
set -euo pipefail
cd "$(dirname "$0")/../.."

: "${PGCURSOR_URL:?set PGCURSOR_URL to the gateway base URL, e.g. http://127.0.0.1:8080}"
export PGCURSOR_URL

venv=.venv/compat
scripts/venv.sh "$venv" tests/compat/requirements.txt

"$venv/bin/python" - "${PGCURSOR_WAIT:-15}" <<'PY'
import os, sys, time, urllib.request
url = os.environ["PGCURSOR_URL"].rstrip("/") + "/health"
deadline = time.monotonic() + float(sys.argv[1])
last = None
while True:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            if r.status == 200:
                break
            last = f"HTTP {r.status}"
    except Exception as e:  # noqa: BLE001
        last = e
    if time.monotonic() > deadline:
        sys.exit(f"compat: gateway not healthy at {url}: {last}")
    time.sleep(0.2)
PY

export PYTHONDONTWRITEBYTECODE=1
exec "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/compat "$@"
