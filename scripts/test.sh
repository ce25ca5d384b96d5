#!/usr/bin/env bash
# The whole test suite from a fresh clone: creates .venv, installs llmc with its test extras,
# installs the real MCP peers the tests start (tests/node: npm reference servers, the official
# conformance suite, Node 22 for it, the MCP Inspector CLI and mcporter as hosts; tests/node-dc: Desktop
# Commander), then lints and checks the format (ruff), checks types (mypy) and runs pytest.
# Extra arguments go to pytest. Tests run on four pytest-xdist workers (`-n 4 --dist loadgroup`:
# two per core of a 2-core CI machine, since most tests wait on processes and sockets rather than
# compute; tests that must not run beside each other share an xdist_group, tests/conftest.py); give
# `-n 0` to run them serially in this process. `-m 'not e2e'` is the fast run: it leaves out the suites
# marked e2e (real third-party processes: npm peers, conformance, PostgreSQL, bubblewrap; signals, terminals).
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$python" -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]'

if [ ! -e tests/node/node_modules/conformance-2026/dist/index.js ] || [ ! -e tests/node/node_modules/mcporter/package.json ] \
   || [ ! -e tests/node/node_modules/@modelcontextprotocol/inspector/package.json ] || [ tests/node/package.json -nt tests/node/node_modules ]; then
  (cd tests/node && npm install --no-audit --no-fund --loglevel=error)
  touch tests/node/node_modules
fi
# Desktop Commander (a process/shell server for the session tests) apart: its puppeteer dependency
# would download a browser, so no install scripts and no download here (tests/node needs its scripts).
if [ ! -e tests/node-dc/node_modules/@wonderwhy-er/desktop-commander/package.json ] \
   || [ tests/node-dc/package.json -nt tests/node-dc/node_modules ]; then
  (cd tests/node-dc && PUPPETEER_SKIP_DOWNLOAD=1 npm install --ignore-scripts --no-audit --no-fund --loglevel=error)
  touch tests/node-dc/node_modules
fi

# The workspace server's process tests run inside bubblewrap where it can be installed (root only).
if [ "$(id -u)" = 0 ]; then command -v bwrap >/dev/null || apt-get install -y -qq bubblewrap >/dev/null 2>&1 || true; fi
# tests/state runs a real PostgreSQL and HAProxy (skipped with a reason where they cannot be installed).
if [ "$(id -u)" = 0 ] && { ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || ! command -v haproxy >/dev/null; }; then
  apt-get install -y -qq postgresql haproxy >/dev/null 2>&1 \
    || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq postgresql haproxy >/dev/null 2>&1; } || true
fi

# Lint, then types (config in pyproject.toml [tool.ruff], [tool.mypy]): a finding fails the run (set -e).
.venv/bin/python -m ruff check llmc_cli tests
.venv/bin/python -m ruff format --check --quiet llmc_cli tests
.venv/bin/python -m mypy
exec .venv/bin/python -m pytest -n 4 --dist loadgroup "$@"
