#!/usr/bin/env bash
# The chaos tier of CI: `sluice chaos run` against real broker processes, one run per seed of
# a fixed list (a failure replays with the same command and seed), every fault kind this
# machine supports, about 4 minutes per seed. Together the seeds inject at least 40 faults and
# acknowledge at least 50,000 writes; the script fails if a run finds an anomaly or falls short
# of those counts.
#
#   scripts/chaos-tier.sh [OUTDIR]      (default: a temporary directory, kept on failure)
#
# The long tier is the same command with --duration 60m (README, "Chaos").
set -euo pipefail
cd "$(dirname "$0")/.."

seeds=(${CHAOS_SEEDS:-1 2})
duration=${CHAOS_DURATION:-120s}
out=${1:-$(mktemp -d "${TMPDIR:-/tmp}/sluice-chaos.XXXXXX")}
mkdir -p "$out"
go build -o "$out/sluice" ./cmd/sluice

faults=0 acked=0 status=0
for seed in "${seeds[@]}"; do
  dir="$out/seed-$seed"
  echo "chaos tier: seed $seed -> $dir"
  start=$(date +%s)
  if ! "$out/sluice" chaos run --seed "$seed" --duration "$duration" --interval 5s --dir "$dir" > "$dir.out" 2>&1; then
    status=1
  fi
  tail -n 2 "$dir.out"
  echo "chaos tier: seed $seed took $(( $(date +%s) - start )) s"
  if [ -f "$dir/summary.json" ]; then
    f=$(grep -c '"kind"' "$dir/summary.json" || true)
    a=$(sed -n 's/^ *"Acknowledged": \([0-9]*\),*$/\1/p' "$dir/summary.json" | head -n 1)
    faults=$(( faults + f )); acked=$(( acked + ${a:-0} ))
  else
    status=1; tail -n 40 "$dir.out"
  fi
done
echo "chaos tier: ${#seeds[@]} runs, $faults faults, $acked acknowledged writes"
if [ "$status" -ne 0 ]; then
  echo "chaos tier: FAILED; the runs are in $out (replay one: sluice chaos run --seed N --duration $duration)"
  for seed in "${seeds[@]}"; do grep -h "FAILURE\|lost\|anomal" "$out/seed-$seed.out" | head -n 20 || true; done
  exit 1
fi
if [ "$faults" -lt 40 ] || [ "$acked" -lt 50000 ]; then
  echo "chaos tier: FAILED: want at least 40 faults and 50,000 acknowledged writes"
  exit 1
fi
rm -rf "$out"
