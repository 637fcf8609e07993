#!/bin/sh
# beam_vs_infer.sh: the Beam pipeline's per-shard overhead against
# overlap infer on the same shard files, on a GPU host. Run from the
# repository root with the cgo-free binaries built by `make gpu-bundle`
# and `make -C beam gpu-bundle` in .gpu/, and $OUT set:
#
#	sh bench/reference/beam_vs_infer.sh
#
# It writes a random 768->256->16 ReLU model and SHARDS shards of ROWS rows
# each (768 float32 a row) under $DIR, then, twice each, taking turns:
#   - overlap-beam on prism, in one process, over every shard;
#   - overlap infer --in SHARD --out FILE, one process per shard, in turn.
# Both stream every shard through the same engine on every GPU the host
# has (Beam: one engine per GPU, shards spread over them; infer: one
# GPU). It prints each command's wall time, the per-shard figures, and
# the ratio of Beam's wall time per shard to infer's.
# SIM=--sim runs both on the simulator (a check of the script, not a measurement).
set -u
OUT=${OUT:-/tmp/beam-out}
DIR=${DIR:-/tmp/beam-shards}
SHARDS=${SHARDS:-8}
ROWS=${ROWS:-174763} # about 512 MiB a shard
mkdir -p "$OUT" "$DIR/in"
log=$OUT/beam.log
: > "$log"
say() { echo "$@" | tee -a "$log"; }
now() { date +%s.%N; }

.gpu/overlap infer --gen-model "$DIR/m.safetensors" --widths 768,256,16 --activation relu >> "$log" 2>&1 || exit 1
i=0
while [ $i -lt "$SHARDS" ]; do
	[ -f "$DIR/in/s$i.f32" ] || .gpu/overlap infer --model "$DIR/m.safetensors" --gen-input "$DIR/in/s$i.f32" --rows "$ROWS" >> "$log" 2>&1 || exit 1
	i=$((i + 1))
done
say "== $SHARDS shards of $ROWS rows ($(du -sh "$DIR/in" | cut -f1)), model 768->256->16 relu fp32"
for round in 1 2; do
	rm -rf "$DIR/beam-out" "$DIR/infer-out"; mkdir -p "$DIR/infer-out"
	t0=$(now)
	.gpu/overlap-beam --input "$DIR/in/*.f32" --output "$DIR/beam-out/" --model "$DIR/m.safetensors" ${SIM:-} > "$OUT/beam-run$round.txt" 2>> "$log"
	rc=$?
	t1=$(now)
	beam=$(awk "BEGIN{printf \"%.3f\", $t1 - $t0}")
	say "round $round: overlap-beam (prism) rc=$rc wall ${beam}s"
	cat "$OUT/beam-run$round.txt" | tee -a "$log"
	t0=$(now)
	for f in "$DIR"/in/*.f32; do
		.gpu/overlap infer --model "$DIR/m.safetensors" --in "$f" --out "$DIR/infer-out/$(basename "$f").out" --quiet ${SIM:-} 2>> "$log" || say "infer failed on $f"
	done
	t1=$(now)
	inf=$(awk "BEGIN{printf \"%.3f\", $t1 - $t0}")
	say "round $round: overlap infer, one process per shard: wall ${inf}s"
	say "round $round: per shard: $(awk "BEGIN{printf \"beam %.4fs, infer %.4fs, beam/infer %.3f\", $beam / $SHARDS, $inf / $SHARDS, $beam / $inf}")"
	for f in "$DIR"/in/*.f32; do
		b=$(basename "$f")
		cmp -s "$DIR/beam-out/$b.out" "$DIR/infer-out/$b.out" || say "DIFFERENT: $b (beam and infer outputs differ)"
	done
done
