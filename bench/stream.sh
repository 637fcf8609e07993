#!/bin/sh
# stream.sh measures streaming runs (issue 13) on a GPU host, with the CLI
# built by `make gpu-bundle`. Run it from the repository root:
#
#	sh bench/stream.sh [DIR]
#
# DIR (default /tmp/overlap-stream) needs about 26 GiB free; it is removed
# at the end. Each run prints its rates, the peak resident memory, and
# checks every output element read back from the file written; the 8 GiB
# runs also measure their bound in the same run (--bound).
set -u
O=${OVERLAP:-.gpu/overlap}
D=${1:-/tmp/overlap-stream}
FLAGS="--chunk 2M --slots 8 --verify"
mkdir -p "$D" || exit 1
trap 'rm -rf "$D"' EXIT

echo "== host: $(uname -r); $(nproc) CPUs; file system of $D:"
df -hT "$D" | tail -1
echo "   vm.dirty_ratio $(cat /proc/sys/vm/dirty_ratio), vm.dirty_background_ratio $(cat /proc/sys/vm/dirty_background_ratio)"

echo "== generating 1 GiB and 8 GiB inputs"
$O gen --size 1G --out "$D/in1.f32" || exit 1
$O gen --size 8G --out "$D/in8.f32" || exit 1
sync # the inputs stay cached, clean: no writeback competes with the runs

echo "== page-cached, 1 GiB (peak RSS at a smaller size)"
$O run --in "$D/in1.f32" --out "$D/out.f32" $FLAGS || echo "FAILED"
rm -f "$D/out.f32"

echo "== page-cached, 8 GiB, with the bound measured in the same run"
$O run --in "$D/in8.f32" --out "$D/out.f32" $FLAGS --bound || echo "FAILED"
rm -f "$D/out.f32"

echo "== from disk with O_DIRECT, 8 GiB, against the raw O_DIRECT read in the same run"
sync # leave no dirty pages of the input for O_DIRECT to flush first
$O run --in "$D/in8.f32" --out "$D/out.f32" $FLAGS --bound --direct || echo "FAILED"
