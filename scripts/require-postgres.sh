#!/usr/bin/env bash
# Make sure PostgreSQL answers on 127.0.0.1:5432, starting the local cluster if it is down.
set -euo pipefail
ready() { pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null || (exec 3<>/dev/tcp/127.0.0.1/5432) 2>/dev/null; }
if ready; then exit 0; fi
if command -v pg_ctlcluster >/dev/null && [ -d /etc/postgresql ]; then
  echo "PostgreSQL is down; starting the local cluster"
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start
fi
for _ in $(seq 30); do ready && exit 0; sleep 1; done
echo "PostgreSQL is not reachable at 127.0.0.1:5432; start it and run again" >&2
exit 1
