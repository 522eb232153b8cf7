#!/usr/bin/env bash
# SSD restore: how close the segment store's read-back comes to the disk's sequential O_DIRECT read.
# Runs ssd_bench (write GB gigabytes of RECORD_KB KiB records, reopen, read everything back through
# the store), then fio reading the same segment files sequentially with O_DIRECT through io_uring,
# and prints both rates and their ratio. With GB=10 the open line is the 10 GB index rebuild time.
#
#   bench/ssd_restore.sh [BUILD_DIR]     env: BUILD (build), GB (4), RECORD_KB (1024),
#                                             DIR (/tmp/strata-ssd-bench), QUEUE_DEPTH (64)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-${BUILD:-build}}
gb=${GB:-4}
record_kb=${RECORD_KB:-1024}
dir=${DIR:-/tmp/strata-ssd-bench}
queue_depth=${QUEUE_DEPTH:-64}

if ! command -v fio >/dev/null 2>&1; then
  sudo_cmd=()
  if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
  "${sudo_cmd[@]}" apt-get install -y -q fio >/dev/null
fi

cmake --build "$build" --target ssd_bench
trap 'rm -rf "$dir"' EXIT

out=$("$build/bench/ssd_bench" --dir "$dir" --gb "$gb" --record-kb "$record_kb" --queue-depth "$queue_depth" --keep)
echo "$out" | grep -v '^[a-z_]*='
value() { echo "$out" | sed -n "s/^$1=//p"; }
restore=$(value restore_gbps)

files=$(ls "$dir"/seg-*.kv | paste -sd: -)
# The median of three runs (terse output, field 7: read bandwidth in KiB/s), as ssd_bench reports
# the median of its three passes: a virtual disk's rate swings from run to run, so both sides get
# the same statistic.
runs=()
for _ in 1 2 3; do
  if [ "$(id -u)" -eq 0 ]; then sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true; fi
  kibps=$(fio --name=seqread --rw=read --direct=1 --bs=1M --ioengine=io_uring --iodepth=32 \
    --file_service_type=sequential --filename="$files" --output-format=terse | awk -F';' 'NR == 1 { print $7 }')
  runs+=("$(awk -v k="$kibps" 'BEGIN { printf "%.3f", k * 1024 / 1e9 }')")
done
fio_gbps=$(printf '%s\n' "${runs[@]}" | sort -g | sed -n 2p)
echo "fio: sequential O_DIRECT read of the same segments, ${runs[*]} GB/s, median $fio_gbps GB/s"
awk -v r="$restore" -v f="$fio_gbps" -v g="$gb" -v o="$(value open_seconds)" 'BEGIN {
  printf "restore %.2f GB/s, fio %.2f GB/s: restore/fio = %.2f\n", r, f, (f > 0 ? r / f : 0)
  printf "index rebuild of a %s GB directory: %s s\n", g, o
}'
