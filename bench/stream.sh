#!/bin/sh
# stream.sh measures streaming runs (issue 13) on a GPU host, with the CLI
# built by `make gpu-bundle`. Run it from the repository root:
#
#	sh bench/stream.sh [DIR]
#
# DIR (default /tmp/overlap-stream) needs about 26 GiB free; it is removed
# at the end. Each run prints its rates, the bound measured in the same
# run, the peak resident memory, and checks every output element read
# back from the file written.
set -eu
O=${OVERLAP:-.gpu/overlap}
D=${1:-/tmp/overlap-stream}
FLAGS="--chunk 2M --slots 8 --verify"
mkdir -p "$D"
trap 'rm -rf "$D"' EXIT

echo "== generating 1 GiB and 8 GiB inputs"
$O gen --size 1G --out "$D/in1.f32"
$O gen --size 8G --out "$D/in8.f32"

echo "== page-cached, 1 GiB (peak RSS at a smaller size)"
$O run --in "$D/in1.f32" --out "$D/out1.f32" $FLAGS
rm -f "$D/out1.f32"

echo "== page-cached, 8 GiB, with the bound measured in the same run"
$O run --in "$D/in8.f32" --out "$D/out8.f32" $FLAGS --bound
rm -f "$D/out8.f32"

echo "== from disk with O_DIRECT, 8 GiB, with the raw O_DIRECT read in the same run"
sync # no dirty pages of the input left for O_DIRECT to flush
$O run --in "$D/in8.f32" --out "$D/out8.f32" $FLAGS --bound --direct
