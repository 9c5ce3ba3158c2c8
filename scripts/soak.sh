#!/usr/bin/env bash
# The soak test (tests/soak) on its own, in release mode, for SOAK_SECONDS
# (default 600) of producing, then the drain and the check. The test starts
# its own PostgreSQL cluster (fsync on) and gateways; everything lives under
# one temp dir, removed, with any cluster in it stopped, whatever happens.
# Other knobs: PGCURSOR_SOAK_* (tests/soak/world.rs), e.g. PGCURSOR_SOAK_SEED.
set -euo pipefail
cd "$(dirname "$0")/.."

tmp=$(mktemp -d)
chmod 755 "$tmp" # as root, the postgres user must reach the cluster inside
cleanup() {
    for pg in "$tmp"/*/pg; do
        if [[ -d $pg ]]; then scripts/pg.sh stop "$pg" >/dev/null 2>&1 || true; fi
    done
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cargo build --release -p gateway
export TMPDIR=$tmp
export GATEWAY_BIN=$PWD/target/release/gateway
PGCURSOR_PG_BINDIR=$(scripts/pg.sh bindir)
export PGCURSOR_PG_BINDIR
export PGCURSOR_SOAK_SECONDS=${SOAK_SECONDS:-600}
cargo test --release -p pgcursor-tests --test soak -- --nocapture
