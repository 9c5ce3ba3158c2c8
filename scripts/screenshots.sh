#!/usr/bin/env bash
# The dashboard's pages as PNGs in docs/img/: runs the browser test
# (tests/http/dashboard.rs) on a throwaway cluster with PGCURSOR_SCREENSHOTS set.
# Expects `make deps build` to have run (the Makefile's `screenshots` does).
set -euo pipefail
cd "$(dirname "$0")/.."

tmp=$(mktemp -d)
cleanup() {
    scripts/pg.sh stop "$tmp/pg" >/dev/null 2>&1 || true
    rm -rf "$tmp"
}
trap cleanup EXIT

DATABASE_URL=$(scripts/pg.sh start "$tmp/pg" | tail -n1)
PGCURSOR_PG_BINDIR=$(scripts/pg.sh bindir)
GATEWAY_BIN=$(pwd)/target/debug/gateway
PGCURSOR_SCREENSHOTS=$(pwd)/docs/img
export DATABASE_URL PGCURSOR_PG_BINDIR GATEWAY_BIN PGCURSOR_SCREENSHOTS

"$GATEWAY_BIN" migrate
cargo test -p pgcursor-tests --test http dashboard::
ls -l docs/img/*.png
