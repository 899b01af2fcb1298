#!/usr/bin/env bash
# A private PostgreSQL cluster for make dev and make test, so neither needs
# nor touches the machine's server:
#   scripts/pg.sh start DIR   initdb into DIR (once), start it on a free loopback port, print its URL
#   scripts/pg.sh stop DIR    stop it
#   scripts/pg.sh restart DIR restart it (the chaos run)
#   scripts/pg.sh url DIR     print the URL of a running cluster
# Trust auth on 127.0.0.1 and a socket in DIR only. Installs Debian's postgresql
# package when initdb is missing and we are root. Run as root, the cluster runs
# as the postgres user (initdb refuses root).
set -euo pipefail
cmd="${1:?usage: scripts/pg.sh start|stop|restart|url DIR}"; dir="${2:?usage: scripts/pg.sh $cmd DIR}"
mkdir -p "$dir"; dir="$(cd "$dir" && pwd)"   # the server's socket folder must be absolute

bindir() {
  for d in /usr/lib/postgresql/*/bin; do [ -x "$d/initdb" ] && { echo "$d"; return; }; done
  command -v initdb >/dev/null && { dirname "$(command -v initdb)"; return; }
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing Debian's postgresql (initdb is missing)" >&2
    apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
    for d in /usr/lib/postgresql/*/bin; do [ -x "$d/initdb" ] && { echo "$d"; return; }; done
  fi
  echo "initdb not found: install PostgreSQL (Debian: apt-get install postgresql), or set DATABASE_URL" >&2
  exit 1
}
as_owner() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
# free_port is the first port from $1 (55432) to 55532 nothing listens on. A port an outgoing
# connection holds as its local end (the range lies within the kernel's ephemeral one) answers
# no connect yet cannot be bound: start's retry moves past it.
free_port() {
  local p
  for p in $(seq "${1:-55432}" 55532); do
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
  done
  echo "no free port in 55432-55532" >&2; exit 1
}
url() { echo "postgres://postgres@127.0.0.1:$(cat "$dir/port")/postgres?sslmode=disable"; }

bin="$(bindir)"
case "$cmd" in
  start)
    if [ "$(id -u)" = 0 ]; then
      chown postgres "$dir"
      runuser -u postgres -- test -w "$dir" ||
        { echo "the postgres user cannot reach $dir: make its parent folders traversable (chmod o+x)" >&2; exit 1; }
    fi
    if [ ! -s "$dir/data/PG_VERSION" ]; then
      as_owner "$bin/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 --locale=C >"$dir/initdb.log" 2>&1 ||
        { cat "$dir/initdb.log" >&2; exit 1; }
    fi
    if as_owner "$bin/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then url; exit 0; fi
    # Two clusters started at once (make test's make devs) may both find the same port free, and
    # an outgoing connection may hold one as its local end: the one that loses the bind tries the
    # next free port after it.
    from=55432
    for attempt in 1 2 3 4 5 6 7 8; do
      port="$(free_port "$from")"; echo "$port" >"$dir/port"
      if as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t 60 \
        -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=300 -c fsync=off" start >/dev/null 2>&1; then
        url; exit 0
      fi
      tail -5 "$dir/postgres.log" | grep -q "Address already in use" || break
      from=$((port + 1 + RANDOM % 3))
      sleep "0.$((RANDOM % 9 + 1))"
    done
    tail -20 "$dir/postgres.log" >&2; exit 1 ;;
  stop) as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true ;;
  restart)
    port="$(cat "$dir/port")"
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -m fast -w -t 60 \
      -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=300 -c fsync=off" restart >/dev/null ;;
  url) url ;;
  *) echo "unknown command $cmd" >&2; exit 2 ;;
esac
