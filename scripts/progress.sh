#!/usr/bin/env bash
# Runs a long go build or install (its arguments) and shows that it moves:
# a line every 50 packages with the time so far, not one line for minutes.
# Its whole output goes to a log; on failure the log's last lines are shown.
set -uo pipefail
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
start=$SECONDS
"$@" 2>&1 | {
  n=0 fetched=0
  while IFS= read -r line; do
    printf '%s\n' "$line" >>"$log"
    case "$line" in
      "go: downloading "*) fetched=$((fetched + 1)); (( fetched % 50 == 0 )) && echo "  … $fetched modules downloaded ($((SECONDS - start)) s)" ;;
      "go: "* | *": "*) ;;
      *) n=$((n + 1)); (( n % 50 == 0 )) && echo "  … $n packages built ($((SECONDS - start)) s)" ;;
    esac
  done
}
rc=${PIPESTATUS[0]}
if [ "$rc" -ne 0 ]; then
  echo "failed after $((SECONDS - start)) s ($*); its last lines:" >&2
  tail -n 30 "$log" >&2
  exit "$rc"
fi
echo "  done in $((SECONDS - start)) s"
