# Sourced by the scripts that test against a throwaway cluster (test.sh,
# queen-suite.sh): a temporary directory $tmp, removed on exit together with
# the cluster in it and the gateway start_gateway started.
#
#   source scripts/throwaway.sh
#   start_throwaway_cluster    # the cluster in $tmp/pg; exports DATABASE_URL
#   start_gateway              # sets GATEWAY_URL once /health answers
#   stop_gateway
tmp=$(mktemp -d)
gateway_pid=
cleanup() {
    [[ -n $gateway_pid ]] && kill "$gateway_pid" 2>/dev/null
    scripts/pg.sh stop "$tmp/pg" >/dev/null 2>&1 || true
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start_throwaway_cluster() {
    DATABASE_URL=$(scripts/pg.sh start "$tmp/pg" | tail -n1)
    export DATABASE_URL
}

# The debug gateway on a free local port, logging to $tmp/gateway.log, with
# an encryption key of its own, so the client suites can use encrypted
# queues as a user would. Its log is printed when it does not come up.
start_gateway() {
    local port
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    PGCURSOR_ENCRYPTION_KEY=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n') \
        PGCURSOR_BIND=127.0.0.1:$port RUST_LOG=warn target/debug/gateway >"$tmp/gateway.log" 2>&1 &
    gateway_pid=$!
    GATEWAY_URL=http://127.0.0.1:$port
    for _ in $(seq 1 60); do
        curl -sf "$GATEWAY_URL/health" >/dev/null && return 0
        kill -0 "$gateway_pid" 2>/dev/null || break
        sleep 0.5
    done
    cat "$tmp/gateway.log"
    return 1
}

stop_gateway() {
    kill "$gateway_pid"
    gateway_pid=
}
