# The documented way to work on pgcursor. `make run` needs only PostgreSQL's
# server binaries; `make test` also the test tools (both install what is
# missing when root on Debian: scripts/deps.sh).

SHELL := /bin/bash
PG_DATA := .data/pg

.PHONY: deps deps-run build run db-up db-down test test-failover test-citus test-queen-suite bench-citus soak docs-check fmt lint bench bench-quick screenshots

# Install what is missing (as root on Debian; otherwise print the apt-get
# command): `deps-run` what `make run` needs, PostgreSQL 15's server binaries;
# `deps` that and what the tests use (scripts/deps.sh lists it).
deps-run:
	@scripts/deps.sh run

deps:
	@scripts/deps.sh all

build:
	cargo build --workspace --all-targets

# Serves on 0.0.0.0:6632; without DATABASE_URL, on the private cluster in
# .data/pg, and then, unless a key is set, with the encryption key of that
# cluster's data (.data/encryption-key, made once), so encrypted queues work
# as they would in a deployment.
run: deps-run
	cargo build --release -p gateway
	@if [ -z "$$DATABASE_URL" ]; then \
		DATABASE_URL=$$(scripts/pg.sh start $(PG_DATA) | tail -n1); \
		if [ -z "$$PGCURSOR_ENCRYPTION_KEY$$QUEEN_ENCRYPTION_KEY" ]; then \
			key=.data/encryption-key; \
			[ -s $$key ] || (umask 077; od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >$$key); \
			export PGCURSOR_ENCRYPTION_KEY=$$(cat $$key); \
			echo "encryption key: $$key"; \
		fi; \
	fi; \
	export DATABASE_URL; \
	echo "database: $$DATABASE_URL"; \
	exec target/release/gateway

db-up: deps-run
	@scripts/pg.sh start $(PG_DATA)

db-down:
	@scripts/pg.sh stop $(PG_DATA)

# The bench crate is neither built nor checked here: it has no tests, and
# its dependencies (sqlx, plotters) took 45 s of a clean build and 70 s of
# CPU in clippy. `make lint` checks it, `make bench` builds it.
test: deps
	cargo build --workspace --all-targets --exclude bench
	scripts/test.sh

# A failover that loses nothing (≈2 min, not part of `make test`): a primary
# and a synchronous standby, the soak through two gateways given both hosts,
# the primary stopped -m immediate and the standby promoted mid-run
# (scripts/failover.sh; FAILOVER_SECONDS of producing, default 60).
test-failover: deps
	scripts/failover.sh

# pgcursor on Citus 12.1 (issue 17; not part of `make test`): Citus built
# once per machine unless installed (scripts/citus.sh build), a new
# coordinator and two workers under .data/citus, `gateway migrate` on the
# coordinator, the tables distributed (sql/citus/distribute.sql), `gateway
# migrate` again (on distributed tables the bootstrap also applies
# sql/citus/functions.sql), then the ack pgTAP files 50-55 against the
# coordinator, then sql/citus/tests (the ack delegated to a worker; the
# Citus push_write's transaction-index horizon; status analytics reading
# rather than searching), then
# the HTTP contract tests against the coordinator except those listed, with
# why, in sql/citus/tests/http-not-yet.txt. Fails if any fails.
# client_min_messages=error: Citus warns about every pg_temp helper that it
# stays on the coordinator (errors still show); statement_timeout: a wait on a worker's lock is not bounded
# by the session's lock_timeout and must not hang the target. The nodes are
# stopped whatever happens; their logs stay in .data/citus/*/log.
test-citus: deps
	nice -n 15 cargo build -p gateway
	scripts/citus.sh build
	@set -euo pipefail; \
	trap 'scripts/citus.sh stop' EXIT; \
	scripts/citus.sh destroy; \
	url=$$(scripts/citus.sh start | tail -n1); \
	DATABASE_URL=$$url RUST_LOG=warn target/debug/gateway migrate; \
	scripts/citus.sh distribute >/dev/null; \
	DATABASE_URL=$$url RUST_LOG=warn target/debug/gateway migrate; \
	psql -X -q -v ON_ERROR_STOP=1 "$$url" -c 'CREATE EXTENSION IF NOT EXISTS pgtap'; \
	port=$${url##*:}; port=$${port%%/*}; \
	export PGOPTIONS="-c client_min_messages=error -c statement_timeout=60s"; \
	prove=(pg_prove --host 127.0.0.1 --port "$$port" --username postgres --dbname pgcursor); \
	echo "==> pgTAP 50-55 (the ack contract) on the coordinator"; \
	ack=0; "$${prove[@]}" tests/sql/5[0-5]_*.sql || ack=$$?; \
	echo "==> sql/citus/tests (what Citus adds: the delegated ack and push; the Citus push's horizon; a push of no items; status analytics' reads; idle partitions)"; \
	own=0; "$${prove[@]}" sql/citus/tests/*.sql || own=$$?; \
	echo "==> HTTP contract tests on the coordinator (but sql/citus/tests/http-not-yet.txt)"; \
	skips=$$(grep -v '^\(#\|$$\)' sql/citus/tests/http-not-yet.txt | awk '{print "--skip", $$1}'); \
	http=0; DATABASE_URL=$$url GATEWAY_BIN=$$PWD/target/debug/gateway \
		PGCURSOR_PG_BINDIR=$$(scripts/pg.sh bindir) PGOPTIONS= \
		cargo test -q -p pgcursor-tests --test http -- --exact $$skips || http=$$?; \
	echo "test-citus: pgTAP 50-55: exit $$ack; sql/citus/tests: exit $$own; HTTP: exit $$http"; \
	[ "$$ack" = 0 ] && [ "$$own" = 0 ] && [ "$$http" = 0 ]

# Queen MQ's own Python client tests (from the queen-mq sdist) against a
# gateway on a throwaway cluster (≈2 min, not part of `make test`): passes
# when exactly the tests tests/queen-suite/differences.txt lists, with why,
# fail (scripts/queen-suite.sh).
test-queen-suite: deps
	scripts/queen-suite.sh

# The soak test alone, in release mode: SOAK_SECONDS of producing (default
# 600) with faults, then the drain and the check (`make test` runs 30 s).
soak: deps
	scripts/soak.sh

# Runs every psql example of docs/sql-api.md and compares the recorded output
# (scripts/docs-check.sh --write records it anew).
docs-check: deps
	scripts/docs-check.sh

# Benchmarks on a throwaway cluster (fsync on) with the release gateway:
# ack throughput, push→pop→ack against pgmq, ack cost (≈3 min). Writes
# bench/results/latest.{json,md} and throughput.svg; BENCH_ARGS adds flags
# (see `target/release/bench --help`).
bench: deps
	cargo build --release -p gateway -p bench
	target/release/bench $(BENCH_ARGS)

# bench-citus (issue 17; not part of `make bench`): push → pop → ack over
# HTTP through two gateways against a Citus coordinator with one worker,
# then two (new clusters by scripts/citus.sh; the last one is left stopped
# under .data/citus). Writes bench/results/citus.{md,json}.
bench-citus: deps
	cargo build --release -p gateway -p bench
	scripts/citus.sh build
	target/release/bench --citus --duration 20 $(BENCH_ARGS)

# The same in ≈40 s, for development: writes bench/results/quick/.
bench-quick: deps
	cargo build --release -p gateway -p bench
	target/release/bench --quick $(BENCH_ARGS)

# PNGs of each dashboard page in docs/img/ (1280x900, headless Chromium),
# taken by the dashboard's browser test on a throwaway cluster.
screenshots: deps build
	scripts/screenshots.sh

fmt:
	cargo fmt --all

lint:
	cargo fmt --all --check
	cargo clippy --workspace --all-targets -- -D warnings
