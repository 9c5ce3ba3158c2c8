#!/usr/bin/env bash
# Installs what is missing, as root on Debian; otherwise prints the exact
# apt-get command and stops.
#   scripts/deps.sh run   PostgreSQL 15's server binaries: all `make run` needs
#   scripts/deps.sh all   those and what the tests use: pgTAP and pg_prove,
#                         plpgsql_check (tests/sql/01_static_check.sql),
#                         Chromium and chromedriver (the dashboard's browser
#                         test), Python 3 with venv (the queen-mq client
#                         suites, installed from PyPI) and curl; rustfmt and
#                         clippy
set -euo pipefail

mode=${1:-all}
packages=(postgresql)
missing=()
[[ -x /usr/lib/postgresql/15/bin/initdb ]] || missing+=(postgresql)

# need PACKAGE CHECK...: PACKAGE is wanted, and missing unless CHECK succeeds.
need() {
    local package=$1
    shift
    packages+=("$package")
    "$@" >/dev/null 2>&1 || missing+=("$package")
}

if [[ $mode == all ]]; then
    need postgresql-15-pgtap test -f /usr/share/postgresql/15/extension/pgtap.control
    need postgresql-15-plpgsql-check test -f /usr/share/postgresql/15/extension/plpgsql_check.control
    need libtap-parser-sourcehandler-pgtap-perl command -v pg_prove
    need chromium test -x /usr/bin/chromium
    need chromium-driver command -v chromedriver
    need python3-venv python3 -c 'import ensurepip, venv'
    need curl command -v curl
fi

if ((${#missing[@]})); then
    echo "missing: ${missing[*]}"
    if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
        apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y "${packages[@]}"
    else
        echo "run: sudo apt-get update && sudo apt-get install -y ${packages[*]}"
        exit 1
    fi
fi

if [[ $mode == all ]]; then
    cargo fmt --version >/dev/null 2>&1 || rustup component add rustfmt
    cargo clippy --version >/dev/null 2>&1 || rustup component add clippy
fi
