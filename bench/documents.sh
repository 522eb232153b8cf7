#!/usr/bin/env bash
# The hot tier under pressure: USERS users each own a DOC-token document and ask short questions
# about it, a user drawn at random for each request, through CONCURRENCY streams, with
# cache.hot_memory set to hold half of the documents. Prints the hit rate (cached share of prompt
# tokens) and TTFT percentiles. The model is small (4 layers, d=256, q8_0) so that the cold
# prefills of every document fit in a few minutes on two cores.
#
#   bench/documents.sh [BUILD_DIR]     env: USERS (64), DOC (2000), CONCURRENCY (16), REQUESTS (256), PORT (18083),
#                                       MODE (hot; off for the same load with no reuse; tiered),
#                                       WRITE_THROUGH (true; false: blocks reach the SSD when evicted),
#                                       RECLAIM_LOW (0.02; 0: no background eviction), RECLAIM_HIGH (0.05),
#                                       KV_MEMORY (bytes for running requests; default 1.5x what CONCURRENCY documents
#                                       take, so the pool never runs short: below 1x, admissions take their blocks from
#                                       the hot tier's, which is when background eviction matters)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
build=${1:-build/bench}
dir=$(bench_dir "$build")
model=$dir/qwen2-small-q8_0.gguf
[ -f "$model" ] || "$build/strata" synth --arch qwen2 --layers 4 --hidden 256 --heads 4 --kv-heads 2 --ffn 768 \
  --vocab ../shared/vocab/ggml-vocab-gpt-2.gguf --type q8_0 --ctx 4096 --out "$model" >&2
users=${USERS:-64}
doc=${DOC:-2000}
conc=${CONCURRENCY:-16}
port=${PORT:-18083}
# f16 KV of this model: K and V rows of 2 heads x 64 values in 4 layers = 2 KiB per token. The
# template and the question add about 40 tokens to each document.
per_doc=$(( (doc + 40) * 2048 ))
conf=$dir/documents.toml
cat > "$conf" <<TOML
[kv]
memory = "${KV_MEMORY:-$(( conc * per_doc * 3 / 2 ))}"
[cache]
mode = "${MODE:-hot}"
hot_memory = "$(( users / 2 * per_doc ))"
dir = "$dir/documents-cache"
write_through = ${WRITE_THROUGH:-true}
reclaim_low = ${RECLAIM_LOW:-0.02}
reclaim_high = ${RECLAIM_HIGH:-0.05}
TOML
rm -rf "$dir/documents-cache"
echo "hot tier: $(( users / 2 * per_doc / 1048576 )) MiB, room for $(( users / 2 )) of $users documents"
trap stop_server EXIT
start_server "$build" "$model" "$port" "$dir/documents.log" --config "$conf"
"$py" bench/loadgen.py --url "http://127.0.0.1:$port" --scenario documents --pick random --users "$users" \
  --concurrency "$conc" --requests "${REQUESTS:-256}" --prompt-tokens "$doc" --max-tokens 8 --label documents \
  --out "$dir/documents.json" > /dev/null
summarize "$dir/documents.json"
curl -s "http://127.0.0.1:$port/metrics" | grep -E '^strata_(prefix_cache|kv_evictions|kv_reclaimed|kv_blocks_cached)'
