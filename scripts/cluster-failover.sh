#!/bin/sh
# Measures a local cluster of broker processes (issue 22, "Measure"): controller failover
# (kill -9 of the active controller until a topic creation commits), partition failover (kill -9
# of a leader until acks=1 produce succeeds, at broker.session.timeout.ms 9000 and 2000),
# controlled shutdown (SIGTERM of a leader: produce errors and the longest pause), and scale
# (3,000 partitions of RF 3: create time, a metadata request for all, each broker's RSS and idle
# CPU). Medians of 3 runs by default. Not run in CI.
# Arguments are passed to `sluice bench failover` (e.g. --scenario leader --runs 5 --json).
set -eu
cd "$(dirname "$0")/.."
bin=$(mktemp -d /tmp/cluster-failover-bin-XXXXXX)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/sluice" ./cmd/sluice
ulimit -n "${NOFILE:-20000}" 2>/dev/null || true
"$bin/sluice" bench failover "$@"
