#!/bin/sh
# Measures one broker with 10,000 partitions at a 20,000 file limit (issue 21, "Frugal
# partitions"): create time, RSS, open files, idle CPU, and restarts after kill -9 and SIGTERM.
# Arguments are passed to scripts/partitions10k (e.g. -topics 60 -partitions 100 -idle 30s).
set -eu
cd "$(dirname "$0")/.."
bin=$(mktemp -d /tmp/partitions10k-bin-XXXXXX)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/sluice" ./cmd/sluice
go build -o "$bin/partitions10k" ./scripts/partitions10k
ulimit -n "${NOFILE:-20000}"
"$bin/partitions10k" -bin "$bin/sluice" "$@"
