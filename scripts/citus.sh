#!/usr/bin/env bash
# pgcursor on Citus 12.1: a coordinator and two workers as private clusters.
#
#   scripts/citus.sh build       citus.so into the system PostgreSQL, once per machine
#   scripts/citus.sh start       start the three nodes, join them, print the coordinator's URL
#   scripts/citus.sh distribute  apply sql/citus/{distribute,delegate}.sql on the coordinator (after migrate;
#                                CITUS_SHARD_COUNT shards per distributed table, default 8)
#   scripts/citus.sh url         print the coordinator's URL
#   scripts/citus.sh stop        stop the three nodes; fine if they are not running
#   scripts/citus.sh destroy     stop them and remove .data/citus (the next start is empty)
#
# The nodes are scripts/pg.sh clusters under .data/citus/{coordinator,worker1,worker2}/pg,
# each with its own port. CITUS_WORKERS=1 starts (and joins) worker1 only
# (make bench-citus measures one worker against two). build uses an installed Citus when
# `pg_config --pkglibdir` holds citus.so; otherwise it builds
# ../shared/vendor/citus-12.1.12.tar.gz (CITUS_TARBALL overrides) in
# .data/citus-build/ and installs it with `make install`.
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "citus.sh: $*" >&2; exit 1; }
say() { echo "citus.sh: $*" >&2; }

ROOT=$(pwd)
WORKER_COUNT=${CITUS_WORKERS:-2}
[[ $WORKER_COUNT == 1 || $WORKER_COUNT == 2 ]] || die "CITUS_WORKERS is 1 or 2, not $WORKER_COUNT"
WORKERS=(worker1 worker2)
WORKERS=("${WORKERS[@]:0:$WORKER_COUNT}")
NODES=(coordinator "${WORKERS[@]}")
TARBALL=${CITUS_TARBALL:-$ROOT/../shared/vendor/citus-12.1.12.tar.gz}
BUILD_DIR=$ROOT/.data/citus-build
# What the vendored tarball needs to build on Debian 12 (see its README).
BUILD_PACKAGES=(postgresql-server-dev-15 liblz4-dev libzstd-dev libkrb5-dev
    libselinux1-dev libxslt1-dev libpam0g-dev libreadline-dev)

datadir() { echo "$ROOT/.data/citus/$1/pg"; }
port() { cat "$ROOT/.data/citus/$1/port"; }
psql_on() { # psql_on NODE ARGS...: psql as postgres into the node's pgcursor db
    local node=$1; shift
    psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$(port "$node")" -U postgres -d pgcursor "$@"
}

pkglibdir() { pg_config --pkglibdir 2>/dev/null || echo /usr/lib/postgresql/15/lib; }

how_to_install() {
    cat >&2 <<EOF
citus.sh: Citus is not installed and cannot be built here. Either
  - install Citus's own packages (Citus's apt repository, package
    postgresql-15-citus-12.1), or
  - as root with Debian's mirrors: apt-get install -y ${BUILD_PACKAGES[*]}
    and put citus-12.1.12.tar.gz in ../shared/vendor/ (or set CITUS_TARBALL),
    then run scripts/citus.sh build again.
EOF
    exit 1
}

build() {
    if [[ -f "$(pkglibdir)/citus.so" ]]; then
        say "citus.so found in $(pkglibdir); nothing to build"
        return
    fi
    [[ -f $TARBALL ]] || how_to_install
    local missing=() p
    for p in "${BUILD_PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
    done
    if ((${#missing[@]})); then
        if [[ $EUID -eq 0 ]] && command -v apt-get >/dev/null; then
            say "installing ${missing[*]}"
            # The headers at the installed server's version: the newest would
            # upgrade postgresql-15 too (through postgresql-client-15) under
            # any cluster running from it. Unpinned only when the mirror no
            # longer has that version.
            local server pinned=()
            server=$(dpkg-query -W -f='${Version}' postgresql-15 2>/dev/null || true)
            for p in "${missing[@]}"; do
                [[ $p == postgresql-server-dev-15 && -n $server ]] && p="$p=$server"
                pinned+=("$p")
            done
            apt_install() { DEBIAN_FRONTEND=noninteractive apt-get install -y "$@" >/dev/null; }
            apt_install "${pinned[@]}" \
                || { apt-get update >/dev/null && apt_install "${pinned[@]}"; } \
                || { say "postgresql-server-dev-15=$server is not available: installing the newest"; apt_install "${missing[@]}"; } \
                || how_to_install
        else
            how_to_install
        fi
    fi
    local src=$BUILD_DIR/citus-12.1.12 started=$SECONDS
    # The tree stays: a second machine-wide install (e.g. after a PostgreSQL
    # upgrade removed citus.so) only reruns make install.
    if [[ ! -f $src/.built ]]; then
        rm -rf "$src"
        mkdir -p "$BUILD_DIR"
        tar xzf "$TARBALL" -C "$BUILD_DIR"
        [[ -d $src ]] || die "$TARBALL did not unpack into $src"
        say "building Citus in $src (log $BUILD_DIR/build.log; about 5 minutes on 2 cores)"
        (cd "$src" && ./configure --without-libcurl && nice -n 15 make -j"$(nproc)") \
            >"$BUILD_DIR/build.log" 2>&1 || die "build failed; see $BUILD_DIR/build.log"
        touch "$src/.built"
    fi
    (cd "$src" && make install) >>"$BUILD_DIR/build.log" 2>&1 \
        || die "make install failed (root needed to write $(pkglibdir)); see $BUILD_DIR/build.log"
    [[ -f "$(pkglibdir)/citus.so" ]] || die "make install left no citus.so in $(pkglibdir)"
    say "Citus built and installed in $((SECONDS - started)) s"
}

# Starts one node (initdb on first use) with Citus preloaded and created.
start_node() {
    local node=$1 dir
    dir=$(datadir "$node")
    scripts/pg.sh start "$dir" >/dev/null
    # pg.sh's initdb knows nothing of Citus: preload it once, which takes a restart.
    if [[ $(psql_on "$node" -tAc 'SHOW shared_preload_libraries') != *citus* ]]; then
        psql_on "$node" -c "ALTER SYSTEM SET shared_preload_libraries = 'citus'"
        scripts/pg.sh stop "$dir" >/dev/null
        scripts/pg.sh start "$dir" >/dev/null
    fi
    psql_on "$node" -c 'CREATE EXTENSION IF NOT EXISTS citus'
}

start() {
    [[ -f "$(pkglibdir)/citus.so" ]] || die "citus.so not in $(pkglibdir): run scripts/citus.sh build first"
    local node w old
    for node in "${NODES[@]}"; do start_node "$node"; done
    psql_on coordinator -c "SELECT citus_set_coordinator_host('127.0.0.1', $(port coordinator))" >/dev/null
    for w in "${WORKERS[@]}"; do
        # pg.sh may have moved a worker to a new port (the old one taken):
        # the coordinator's node list must follow, or it reaches nobody.
        old=$(cat "$ROOT/.data/citus/$w/joined_port" 2>/dev/null || true)
        if [[ -n $old && $old != "$(port "$w")" ]]; then
            say "$w moved from port $old to $(port "$w")"
            psql_on coordinator -c "SELECT citus_update_node(nodeid, '127.0.0.1', $(port "$w"))
                                      FROM pg_dist_node WHERE nodename = '127.0.0.1' AND nodeport = $old" >/dev/null
        fi
        psql_on coordinator -c "SELECT citus_add_node('127.0.0.1', $(port "$w"))" >/dev/null
        port "$w" >"$ROOT/.data/citus/$w/joined_port"
    done
    say "coordinator on port $(port coordinator), workers on $(for w in "${WORKERS[@]}"; do port "$w"; done | paste -sd' ')"
    url
}

url() { echo "postgres://postgres@127.0.0.1:$(port coordinator)/pgcursor"; }

# After `gateway migrate` on the coordinator: the tables made reference or
# distributed tables (sql/citus/distribute.sql says which and why), and the
# hot functions that take a partition id distributed by it
# (sql/citus/delegate.sql).
distribute() {
    local before lost
    before=$(functions)
    psql_on coordinator -v shard_count="${CITUS_SHARD_COUNT:-8}" -f sql/citus/distribute.sql
    # Citus rebuilding a table drops, silently, every function using its row
    # type (distribute.sql says how it avoids that): check it did not happen.
    lost=$(LC_ALL=C comm -23 <(echo "$before") <(functions))
    [[ -z $lost ]] || die "distributing dropped these functions: $(echo $lost)"
    psql_on coordinator -f sql/citus/delegate.sql
}

# pgcursor's functions, one signature a line, sorted for comm.
functions() {
    psql_on coordinator -tA -c "SELECT p.oid::regprocedure FROM pg_proc p
                                 WHERE p.pronamespace IN ('pgcursor'::regnamespace, 'pgcursor_internal'::regnamespace)" \
        | LC_ALL=C sort
}

stop() {
    local node
    for node in coordinator worker1 worker2; do scripts/pg.sh stop "$(datadir "$node")" 2>/dev/null || true; done
}

# Stops the nodes and removes them: the next start is a new, empty cluster.
destroy() {
    stop
    rm -rf "$ROOT/.data/citus"
}

case "${1:-}" in
    build) build ;;
    start) start ;;
    distribute) distribute ;;
    url) url ;;
    stop) stop ;;
    destroy) destroy ;;
    *) die "usage: $0 build|start|distribute|url|stop|destroy" ;;
esac
