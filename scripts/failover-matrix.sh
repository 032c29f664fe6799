#!/usr/bin/env bash
# Failover figures on the sim fabric (docs/performance-archive.md, "Failover"): for
# each protocol x log primitive x seed, crash node seed % 3 of a 3-node run at
# a time spread over the middle of the measured interval, with the checker on,
# and print one CSV row per run: the pause (first detection to resume), the
# commits after detection, and whether the checker passed.
#
# usage: scripts/failover-matrix.sh [REPLICATION [SEEDS [PROTOCOLS]]]
#   e.g. scripts/failover-matrix.sh 2 "1 2 3 4 5 6 7 8" "occ mvcc"
# Needs a release build (cargo build --release); sim figures are virtual time.
set -euo pipefail
cd "$(dirname "$0")/.."
replication=${1:-2}
seeds=${2:-"1 2 3 4 5 6 7 8"}
protocols=${3:-"no_wait wait_die wound_wait timestamp mvcc occ maat sundial cicada drtm"}
bin=./target/release/verbena
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "protocol,log,replication,seed,crash,pause_us,committed_after_detection,checked"
for protocol in $protocols; do
    for log in onesided rpc; do
        for seed in $seeds; do
            node=$((seed % 3))
            at=$(python3 -c "print(round(0.001 + 0.004 * (0.2 + 0.5 * (($seed * 7919) % 100) / 100), 6))")
            checked=ok
            "$bin" run --fabric sim --profile cx4-edr --nodes 3 --workers 2 --coroutines 4 \
                --rows-per-node 2000 --duration 0.004 --warmup 0.001 --jitter 0.2 --check \
                --replication "$replication" --protocol "$protocol" --stages "log=$log" \
                --seed "$seed" --fault "crash:$node@$at" --json "$out/run.json" >/dev/null 2>&1 \
                || checked=FAILED
            python3 - "$out/run.json" "$protocol,$log,$replication,$seed,$node@$at" "$checked" <<'PY'
import json, sys
recovery = json.load(open(sys.argv[1]))["recovery"]
pause = recovery["recovery_time_s"]
pause = "none" if pause is None else f"{pause * 1e6:.1f}"
print(f"{sys.argv[2]},{pause},{recovery['committed_after_detection']},{sys.argv[3]}")
PY
        done
    done
done
