#!/usr/bin/env bash
# Runs a command with a PostgreSQL to use. When DATABASE_URL is set, that
# server, as before (127.0.0.1:5432 must then be up if it names it). When it
# is not, a private cluster (scripts/pg.sh) in a temporary folder on a free
# port, stopped and removed when the command ends: the machine's own server
# is never needed, used or restarted. The command sees DATABASE_URL,
# TOOLGATE_TEST_DATABASE_URL (the server tests create their databases on)
# and, for a private cluster, TOOLGATE_PG_DATADIR (what the chaos run may restart).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
if [ -n "${DATABASE_URL:-}" ]; then
  exec "$@"
fi
dir="$(mktemp -d)"; chmod 755 "$dir"
cleanup() { "$root/scripts/pg.sh" stop "$dir/pg"; rm -rf "$dir"; }
trap cleanup EXIT
server="$("$root/scripts/pg.sh" start "$dir/pg")"
export TOOLGATE_TEST_DATABASE_URL="$server"
export DATABASE_URL="${server%/postgres?*}/toolgate?sslmode=disable"
export TOOLGATE_PG_DATADIR="$dir/pg"
echo "using a private PostgreSQL cluster at ${server%/postgres?*} (DATABASE_URL unset)"
"$@"
