#!/bin/sh
# gemm_run.sh: the GEMM kernels on a GPU host, in one go. Run it from the
# repository root with $OUT set (default /tmp/gemm-out):
#
#	sh bench/reference/gemm_run.sh
#
# It writes to $OUT:
#   gemm.ptx        ptx/kernels/gemm.cu through ptx/kernels/gen.sh (the
#                   same file make ptx writes), to commit as
#                   ptx/kernels/gemm.ptx;
#   gemm_ptxas.txt  ptxas -v of it for sm_90 (registers, spills, shared);
#   gemm_table.txt  gemm_bench's summary, ending with the best variant of
#                   each precision ("best ..." lines);
#   gemm.log        everything printed.
# Steps: gemm_bench is compiled in the background (seven parts at once)
# while gen.sh makes and checks the PTX; then gemm_bench runs, checking
# the generated PTX through the driver API too. With GEMM_TORCH=1 it also
# runs mlp_torch.py (small/fp32, large/fp32, large/tf32 at $ROWS rows,
# files in $MLP_DIR, default /tmp/gemm-mlp, about 15 GiB) before the
# bench; by default it does not. gemm_bench has 300 s; expected in all:
# about 2-3 minutes without torch. Exits non-zero when a step fails.
set -u
command -v nvcc > /dev/null 2>&1 || PATH=$PATH:/usr/local/cuda/bin
OUT=${OUT:-/tmp/gemm-out}
MLP_DIR=${MLP_DIR:-/tmp/gemm-mlp}
ROWS=${ROWS:-1048576}
GEMM_TORCH=${GEMM_TORCH:-0}
PARTS="0 1 2 3 4 5 6"
mkdir -p "$OUT" || exit 1
: > "$OUT/gemm.log"
: > "$OUT/mlp_tables.txt"
rm -f "$OUT/gemm_table.txt" "$OUT/gemm.ptx" "$OUT/gemm_ptxas.txt"
B=$(mktemp -d /tmp/gemm-build.XXXXXX) || exit 1
START=$(date +%s)

main() {
	fail=0
	echo "== host: $(hostname), $(nproc) CPUs; $(nvcc --version | tail -n 1)"
	nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader || true

	# gemm_bench, in the background: one translation unit per part.
	(
		objs=""
		for p in $PARTS; do
			nvcc -O3 -std=c++17 -arch=sm_90 -DGEMM_BENCH_PART=$p -c -o "$B/part$p.o" \
				bench/reference/gemm_bench.cu > "$B/part$p.log" 2>&1 &
			objs="$objs $B/part$p.o"
		done
		wait
		nvcc -arch=sm_90 -o "$B/gemm_bench" $objs -lcublas -lcuda > "$B/link.log" 2>&1
	) &
	build=$!

	echo "== gemm.ptx: sh ptx/kernels/gen.sh (compute_NN from gemm.cu's ptx-arch line)"
	if sh ptx/kernels/gen.sh "$B/ptx" gemm; then
		cp "$B/ptx/gemm.ptx" "$OUT/gemm.ptx"
		echo "   $(grep -m1 '^\.version' "$OUT/gemm.ptx"), $(grep -m1 '^\.target' "$OUT/gemm.ptx"); $(grep -c '^\.visible \.entry' "$OUT/gemm.ptx") entries; $(wc -c < "$OUT/gemm.ptx") bytes"
		ptxas -arch=sm_90 "$OUT/gemm.ptx" -o /dev/null || { echo "FAILED: ptxas -arch=sm_90 on gemm.ptx"; fail=1; }
		ptxas -arch=sm_90 -v "$OUT/gemm.ptx" -o /dev/null > "$OUT/gemm_ptxas.txt" 2>&1
		grep -E "Compiling entry|Used|spill" "$OUT/gemm_ptxas.txt"
		grep -E "_contract\[" "$OUT/gemm.ptx" || { echo "FAILED: gemm.ptx has no NAME_contract records"; fail=1; }
	else
		echo "FAILED: gen.sh"
		fail=1
	fi

	if [ "$GEMM_TORCH" = 1 ]; then
		for cfg in "small fp32" "large fp32" "large tf32"; do
			set -- $cfg
			echo "== mlp_torch.py --model $1 --precision $2 --rows $ROWS"
			timeout 200 python3 bench/reference/mlp_torch.py --model "$1" --precision "$2" --rows "$ROWS" \
				--save-dir "$MLP_DIR/$1-$2" --table "$OUT/mlp_tables.txt" || { echo "FAILED: mlp_torch $1 $2"; fail=1; }
			echo "   ($(($(date +%s) - START)) s so far)"
		done
	fi

	echo "== gemm_bench (build started in the background)"
	wait $build
	for p in $PARTS; do
		[ -s "$B/part$p.log" ] && { echo "-- part$p.log:"; cat "$B/part$p.log"; }
	done
	[ -s "$B/link.log" ] && { echo "-- link.log:"; cat "$B/link.log"; }
	if [ -x "$B/gemm_bench" ]; then
		echo "   built in the background; $(($(date +%s) - START)) s so far"
		if [ -f "$OUT/gemm.ptx" ]; then
			timeout 300 "$B/gemm_bench" --ptx "$OUT/gemm.ptx" --table "$OUT/gemm_table.txt" || { echo "FAILED: gemm_bench"; fail=1; }
		else
			timeout 300 "$B/gemm_bench" --table "$OUT/gemm_table.txt" || { echo "FAILED: gemm_bench"; fail=1; }
		fi
	else
		echo "FAILED: gemm_bench did not build"
		fail=1
	fi

	echo
	echo "################ summary ($(($(date +%s) - START)) s) ################"
	[ -f "$OUT/gemm_ptxas.txt" ] && grep -E "Compiling entry|Used|spill" "$OUT/gemm_ptxas.txt"
	[ -s "$OUT/mlp_tables.txt" ] && cat "$OUT/mlp_tables.txt"
	if [ -f "$OUT/gemm_table.txt" ]; then
		cat "$OUT/gemm_table.txt"
		echo
		echo "== the best variant of each precision (M=65536; 'within 48 KiB' is what the Go side can launch):"
		grep -E "^best (fp32|tf32|bf16) variant|^gelu:" "$OUT/gemm_table.txt"
	fi
	[ $fail = 0 ] && echo "gemm_run: ok" || echo "gemm_run: FAILED (see above)"
	return $fail
}

{ main; echo $? > "$B/rc"; } 2>&1 | tee "$OUT/gemm.log"
rc=$(cat "$B/rc" 2>/dev/null || echo 1)
rm -rf "$B"
exit "$rc"
