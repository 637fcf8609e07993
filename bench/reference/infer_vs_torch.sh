#!/bin/sh
# infer_vs_torch.sh: overlap infer beside its PyTorch twin on a GPU host,
# in one go. Run it from the repository root, with the cgo-free CLI built
# at .gpu/overlap (OV= names another) and $OUT set:
#
#	OUT=/tmp/infer-out sh bench/reference/infer_vs_torch.sh
#
# It needs python3 with torch (PYTHON= names another) and about 15 GiB of
# free disk in $WORK (default /tmp/infer-vs-torch, removed at the end
# unless KEEP=1). Steps, each with a time limit, the whole within
# BUDGET seconds (default 450; a step that would start past it is
# skipped), everything printed teed to $OUT/infer.log:
#
#   1. overlap infer --reference at 1M rows (ROWS) for small/fp32
#      (768→256→16, ReLU), large/fp32 and large/tf32 (768→3072→768,
#      GELU): the PyTorch twin (bench/reference/mlp_torch.py, embedded in
#      the CLI) on the same model file, then ours on its input rows at
#      each chunk size (CHUNKS, default 8K,16K,32K,64K), each side's
#      median of REPEAT passes (default 5), and every value of our output
#      against PyTorch's: $OUT/ref-*.json;
#   2. overlap infer --sim --timing-only of the small model at 1M rows and
#      the same chunk sizes, the simulator's prediction: $OUT/sim-small.json;
#   3. an 8 GiB batch file of the small model (--gen-input) streamed with
#      --bound and --verify: $OUT/stream.json;
#   4. --verify runs against the float64 CPU reference, each timing its
#      verification: the small model's 1M rows, every value; the large
#      model's first 64K rows (VERIFY_ROWS) in each precision, since all
#      1M would take minutes on 16 cores: $OUT/verify-*.json;
#   5. a summary table of all of it against the targets.
set -u
OV=${OV:-.gpu/overlap}
OUT=${OUT:-/tmp/infer-out}
WORK=${WORK:-/tmp/infer-vs-torch}
ROWS=${ROWS:-1048576}
CHUNKS=${CHUNKS:-8K,16K,32K,64K}
REPEAT=${REPEAT:-5}
VERIFY_ROWS=${VERIFY_ROWS:-65536}
# 8 GiB of rows of 768 float32 (3 KiB each), less the last partial row.
STREAM_ROWS=${STREAM_ROWS:-2796202}
PYTHON=${PYTHON:-python3}
BUDGET=${BUDGET:-450}
mkdir -p "$OUT" "$WORK" || exit 1
: > "$OUT/infer.log"
: > "$OUT/steps.txt"
START=$(date +%s)
command -v timeout > /dev/null 2>&1 || timeout() { shift; "$@"; }

# step NAME LIMIT CMD...: runs CMD within LIMIT seconds and what is left
# of the budget, and records its exit status and wall time.
step() {
	name=$1 limit=$2
	shift 2
	left=$((BUDGET - ($(date +%s) - START)))
	if [ "$left" -lt 15 ]; then
		echo "== $name: skipped, $left s of the ${BUDGET} s budget left"
		echo "$name skipped -" >> "$OUT/steps.txt"
		return
	fi
	[ "$limit" -le "$left" ] || limit=$left
	echo "== $name (at most $limit s): $*"
	t0=$(date +%s.%N)
	timeout "$limit" "$@"
	rc=$?
	t1=$(date +%s.%N)
	secs=$(awk "BEGIN { printf \"%.1f\", $t1 - $t0 }")
	echo "   ($name: exit $rc after $secs s)"
	echo "$name $rc $secs" >> "$OUT/steps.txt"
}

main() {
	echo "== host: $(hostname), $(nproc) CPUs, $(free -g | awk '/Mem:/ { print $2 " GiB" }'); $($OV version 2>&1 | head -n 1)"
	nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv,noheader || true
	$PYTHON -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))' || echo "python3 has no usable torch: the --reference steps will fail"
	$OV infer --gen-model "$WORK/small.safetensors" --widths 768,256,16 --activation relu --seed 1 || return 1
	$OV infer --gen-model "$WORK/large.safetensors" --widths 768,3072,768 --activation gelu --seed 1 || return 1

	for cfg in small/fp32 large/fp32 large/tf32; do
		m=${cfg%/*} p=${cfg#*/}
		step "ref-$m-$p" 160 $OV infer --model "$WORK/$m.safetensors" --rows "$ROWS" --precision "$p" --reference --python "$PYTHON" \
			--chunk "$CHUNKS" --repeat "$REPEAT" --json-out "$OUT/ref-$m-$p.json"
	done

	step sim-small 60 $OV infer --model "$WORK/small.safetensors" --rows "$ROWS" --sim --timing-only --chunk "$CHUNKS" --repeat 1 \
		--json-out "$OUT/sim-small.json"

	step gen-8GiB 90 $OV infer --model "$WORK/small.safetensors" --gen-input "$WORK/batch.f32" --rows "$STREAM_ROWS"
	step stream-8GiB 150 $OV infer --model "$WORK/small.safetensors" --in "$WORK/batch.f32" --out "$WORK/batch.out" --bound --verify \
		--json-out "$OUT/stream.json"
	rm -f "$WORK/batch.f32" "$WORK/batch.out"

	step verify-small-fp32 90 $OV infer --model "$WORK/small.safetensors" --rows "$ROWS" --verify --no-baseline --chunk 64K --repeat 1 \
		--json-out "$OUT/verify-small-fp32.json"
	for p in fp32 tf32; do
		step "verify-large-$p" 60 $OV infer --model "$WORK/large.safetensors" --rows "$VERIFY_ROWS" --precision "$p" --verify --no-baseline \
			--chunk 16K --repeat 1 --json-out "$OUT/verify-large-$p.json"
	done
	summary
}

summary() {
	echo
	echo "== summary (all times the median of $REPEAT passes after warm-up; ratios > 1 mean ours is faster)"
	$PYTHON - "$OUT" << 'EOF'
import json, os, sys
out = sys.argv[1]

def load(name):
    try:
        with open(os.path.join(out, name)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None

def verdict(ok):
    return "PASS" if ok else "MISS"

targets = {
    "small-fp32": ("ours ≥ 1.0× PyTorch's best and ≥ 97% of our bound", lambda r: r["speed_vs_pytorch_best"] >= 1.0 and r["ours_of_bound"] >= 0.97),
    "large-fp32": ("ours ≥ 0.8× PyTorch's best", lambda r: r["speed_vs_pytorch_best"] >= 0.8),
    "large-tf32": ("ours ≥ 1.0× PyTorch's best TF32 and ≥ 95% of our bound", lambda r: r["speed_vs_pytorch_best"] >= 1.0 and r["ours_of_bound"] >= 0.95),
}
print("%-11s %-46s %6s %9s %6s %9s %8s %-18s %-20s %9s  %s" % ("config", "PyTorch's fastest", "chunk", "ms", "chunk", "ours ms", "speed", "ours/bound", "outside tolerance", "max/tol", "target"))
gpu_small = None
for name, (text, ok) in targets.items():
    r = load("ref-%s.json" % name)
    if r is None:
        print("%-11s (no result: see infer.log)" % name)
        continue
    t, o, c = r["pytorch"], r["ours"], r["comparison"]
    if name == "small-fp32":
        gpu_small = o
    best = t["best"]
    ours = o["modes"][-1]
    print("%-11s %-46s %6d %9.2f %6d %9.2f %7.3fx %-18s %-20s %9.3g  %s: %s" % (
        name, best["name"], best["chunk_rows"], best["median_ms"], ours["chunk_rows"], ours["ms"], r["speed_vs_pytorch_best"],
        "%.1f%% (%s)" % (100 * r["ours_of_bound"], o["stage_bound"]["slowest"]), "%d of %d" % (c["outside"], c["values"]), c["max_ratio"],
        verdict(ok(r) and c["outside"] == 0), text))
    print("%-11s PyTorch: its bound %.2f ms (%.1f%% of it); ours: bound %.2f ms (H2D %.2f, compute %.2f, D2H %.2f, both at once %.2f); chunks %s" % (
        "", t["bound_ms"], 100 * r["pytorch_of_bound"], o["stage_bound"]["bound_ms"], o["stage_bound"]["h2d_ms"], o["stage_bound"]["compute_ms"],
        o["stage_bound"]["d2h_ms"], o["stage_bound"].get("copies_ms", 0), ", ".join("%d: %.2f" % (x["chunk_rows"], x["ms"]) for x in o["chunks"])))

s = load("sim-small.json")
if s and gpu_small:
    sim = {x["chunk_rows"]: x["ms"] for x in s["chunks"]}
    gpu = {x["chunk_rows"]: x["ms"] for x in gpu_small["chunks"]}
    pb, gb = s["modes"][-1], gpu_small["modes"][-1]
    err = pb["ms"] / gb["ms"] - 1
    print("simulator: small/fp32, %d rows, predicted %.2f ms (chunk %d), the GPU took %.2f ms (chunk %d): %+.1f%%; %s: within 10%%" % (
        s["rows"], pb["ms"], pb["chunk_rows"], gb["ms"], gb["chunk_rows"], 100 * err, verdict(abs(err) <= 0.10)))
    print("           by chunk (predicted / measured): " + ", ".join("%d: %.2f / %.2f (%+.1f%%)" % (c, sim[c], gpu[c], 100 * (sim[c] / gpu[c] - 1)) for c in sorted(sim) if c in gpu))
else:
    print("simulator: no comparison (see infer.log)")

st = load("stream.json")
if st:
    b = st.get("bound") or {}
    rss = st.get("peak_rss_bytes", 0)
    eff = b.get("efficiency", 0)
    print("stream: %d rows (%.2f GiB) in %.2f ms; bound %.2f ms (%s; read %.2f, in-memory pipeline %.2f, write %.2f): %.1f%%, %s: ≥ 85%%; peak RSS %.0f MiB, %s: < 1 GiB" % (
        st["rows"], st["in_bytes"] / 2**30, st["ms"], b.get("bound_ms", 0), b.get("slowest", "?"), b.get("read_ms", 0), b.get("in_memory_pipeline_ms", 0),
        b.get("write_ms", 0), 100 * eff, verdict(eff >= 0.85), rss / 2**20, verdict(0 < rss < 2**30)))
    print("        %s" % st["verified"])
else:
    print("stream: no result (see infer.log)")

for name in ("verify-small-fp32", "verify-large-fp32", "verify-large-tf32"):
    v = load(name + ".json")
    if v:
        part = " (a subset: every row would take minutes on the CPU)" if "large" in name else ""
        print("%s: %d rows%s, %s" % (name, v["rows"], part, v["verified"]))
    else:
        print("%s: no result (see infer.log)" % name)
for name in ("ref-small-fp32", "ref-large-fp32", "ref-large-tf32"):
    r = load(name + ".json")
    if r:
        print("%s: our output vs PyTorch's, every value: %d of %d outside; tolerance: %s" % (name, r["comparison"]["outside"], r["comparison"]["values"], r["comparison"]["tolerance"]))
EOF
	echo
	echo "steps (name, exit status, seconds):"
	cat "$OUT/steps.txt"
	echo "total $(($(date +%s) - START)) s"
}

main 2>&1 | tee "$OUT/infer.log"
[ "${KEEP:-0}" = 1 ] || rm -rf "$WORK"
! grep -qv ' 0 ' "$OUT/steps.txt"
