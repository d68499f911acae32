#!/usr/bin/env bash
# What the suite needs from the system: Debian's chromium (the page's tests), postgresql
# (initdb, pg_ctl: the cluster tests), pg_auto_failover (pg_autoctl, for PostgreSQL 15:
# the failover test, tools/pgha.py), prometheus (promtool and a real Prometheus: the ops
# tests) and Node.js with npm (clients/ts). Run as root with apt-get, it installs what is
# missing; otherwise it stops at once with the one command to run. A missing tool never
# turns into skipped tests.
set -euo pipefail
missing=()
command -v chromium >/dev/null || missing+=(chromium)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null \
    || missing+=(postgresql)
{ command -v pg_autoctl >/dev/null && ls /usr/lib/postgresql/*/lib/pgautofailover.so \
    >/dev/null 2>&1; } || missing+=(postgresql-15-auto-failover)
{ command -v promtool >/dev/null && command -v prometheus >/dev/null; } || missing+=(prometheus)
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
[ ${#missing[@]} -eq 0 ] && exit 0
command="apt-get update && apt-get install -y ${missing[*]}"
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
    echo "make test: installing ${missing[*]}"
    apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}"
else
    echo "make test needs ${missing[*]}: run  sudo sh -c '$command'" >&2
    exit 1
fi
