#!/usr/bin/env bash
# A Python virtualenv at DIR with REQUIREMENTS installed: created when
# missing, installed into again only when REQUIREMENTS changed (its sha256 is
# kept in DIR/.requirements.sha256). PYTHON picks the interpreter (python3).
#
#   scripts/venv.sh DIR REQUIREMENTS
set -euo pipefail
[[ $# -eq 2 ]] || { echo "usage: $0 DIR REQUIREMENTS" >&2; exit 2; }
venv=$1
req=$2

if [[ ! -x $venv/bin/python ]]; then
    "${PYTHON:-python3}" -m venv "$venv"
fi
stamp=$venv/.requirements.sha256
want=$(sha256sum "$req" | cut -d' ' -f1)
if [[ ! -f $stamp || $(cat "$stamp") != "$want" ]]; then
    "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$req"
    echo "$want" >"$stamp"
fi
