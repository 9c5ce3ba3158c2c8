#!/usr/bin/env bash
# Queen MQ's own Python client tests against pgcursor, as a Queen user would
# run them: the tests shipped in the queen-mq sdist (tests/queen-suite/
# requirements.txt pins the version), pgcursor's `client` fixture
# (tests/queen-suite/conftest.py), a throwaway cluster and the debug gateway
# (with an encryption key, as for tests/compat). The outcome is compared with
# tests/queen-suite/differences.txt, which names the files not run and the
# tests expected to fail, each with why: exits non-zero when a test fails
# that is not listed, or a listed one passes. ≈2 min; not part of `make test`
# (the tests sleep in real time and were written for Queen's server).
#
#   scripts/queen-suite.sh [pytest args...]      (make test-queen-suite)
set -euo pipefail
cd "$(dirname "$0")/.."

suite=tests/queen-suite
venv=.venv/queen-suite
source scripts/throwaway.sh

# The virtualenv, and the pinned sdist's tests unpacked beside it.
scripts/venv.sh "$venv" "$suite/requirements.txt"
version=$(sed -n 's/^queen-mq==//p' "$suite/requirements.txt")
tests=$venv/sdist/queen_mq-$version/tests
if [[ ! -d $tests ]]; then
    rm -rf "$venv/sdist" && mkdir -p "$venv/sdist"
    "$venv/bin/python" -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
        -d "$venv/sdist" "queen-mq==$version"
    tar -xzf "$venv/sdist/queen_mq-$version.tar.gz" -C "$venv/sdist"
fi
cp "$suite/conftest.py" "$tests/conftest.py"

start_throwaway_cluster
cargo build -q -p gateway
start_gateway
export QUEEN_SERVER_URL=$GATEWAY_URL

ignores=()
while read -r kind what; do
    [[ $kind == skip-file ]] && ignores+=(--ignore "$what")
done <"$suite/differences.txt"
status=0
python=$(pwd)/$venv/bin/python
(cd "$tests/.." && PYTHONDONTWRITEBYTECODE=1 "$python" -m pytest -q -rfE \
    -p no:cacheprovider "${ignores[@]}" tests "$@") | tee "$tmp/pytest.log" || status=$?
[[ $status -le 1 ]] || { echo "queen-suite: pytest could not run (exit $status)"; exit "$status"; }

failed=$(grep -oE '^(FAILED|ERROR) tests/[^ ]+' "$tmp/pytest.log" | cut -d' ' -f2 | sort -u || true)
expected=$(awk '$1 == "fail" {print $2}' "$suite/differences.txt" | sort -u)
surprises=$(comm -23 <(echo "$failed") <(echo "$expected") | sed '/^$/d')
# (Only a whole run can tell that a listed test passes now.)
mended=
[[ $# -gt 0 ]] || mended=$(comm -13 <(echo "$failed") <(echo "$expected") | sed '/^$/d')
if [[ -n $mended ]]; then
    echo "queen-suite: these pass now; take them out of $suite/differences.txt:"
    echo "$mended"
fi
if [[ -n $surprises ]]; then
    echo "queen-suite: failed, and not expected to ($suite/differences.txt):"
    echo "$surprises"
fi
[[ -z $surprises && -z $mended ]] || exit 1
if [[ $# -gt 0 ]]; then
    echo "queen-suite: no failure but those $suite/differences.txt expects"
else
    echo "queen-suite: as expected ($(echo "$expected" | sed '/^$/d' | wc -l) known differences, listed with why in $suite/differences.txt)"
fi
