#!/bin/sh
# stream.sh measures streaming runs (issue 13) on a GPU host, with the CLI
# built by `make gpu-bundle`. Run it from the repository root:
#
#	sh bench/stream.sh [DIR]
#
# DIR (default /tmp/overlap-stream) needs about 34 GiB free; it is removed
# at the end. Every run but the last loop's checks every output element
# read back from the file written (--verify) and measures its bound in the
# same run (--bound), and prints the peak resident memory; the 1 GiB and
# 8 GiB page-cached runs have the same flags, so their peaks compare. The
# 4 GiB page-cached runs write the output four ways: through the page
# cache as the others, preallocated (fallocate up front), with O_DIRECT
# (straight from the pinned slots), and both; the bound's write alone is
# done the same way as the run's. The last loop compares numbers of
# writers, by their rates only.
set -u
O=${OVERLAP:-.gpu/overlap}
D=${1:-/tmp/overlap-stream}
FLAGS="--chunk 2M --slots 8 --verify --bound"
mkdir -p "$D" || exit 1
trap 'rm -rf "$D"' EXIT

echo "== host: $(uname -r); $(nproc) CPUs; file system of $D:"
df -hT "$D" | tail -1
echo "   vm.dirty_ratio $(cat /proc/sys/vm/dirty_ratio), vm.dirty_background_ratio $(cat /proc/sys/vm/dirty_background_ratio)"

echo "== generating 1 GiB, 4 GiB and 8 GiB inputs"
$O gen --size 1G --out "$D/in1.f32" || exit 1
$O gen --size 4G --out "$D/in4.f32" || exit 1
$O gen --size 8G --out "$D/in8.f32" || exit 1
sync # the inputs stay cached, clean: no writeback competes with the runs

echo "== page-cached, 1 GiB"
$O stream --in "$D/in1.f32" --out "$D/out.f32" $FLAGS || echo "FAILED"
rm -f "$D/out.f32"; sync

for how in "" "--preallocate" "--direct-out" "--direct-out --preallocate"; do
	echo "== page-cached, 4 GiB, output written ${how:-as the others (page cache, not preallocated)}"
	# shellcheck disable=SC2086 # $how is zero, one or two flags
	$O stream --in "$D/in4.f32" --out "$D/out.f32" $FLAGS $how || echo "FAILED"
	rm -f "$D/out.f32"; sync
done

echo "== page-cached, 8 GiB"
$O stream --in "$D/in8.f32" --out "$D/out.f32" $FLAGS || echo "FAILED"
rm -f "$D/out.f32"; sync

echo "== from disk with O_DIRECT, 8 GiB, output on the same disk"
$O stream --in "$D/in8.f32" --out "$D/out.f32" $FLAGS --direct || echo "FAILED"
rm -f "$D/out.f32"; sync

if [ -d /dev/shm ] && [ "$(df -k --output=avail /dev/shm | tail -1)" -gt 20000000 ]; then
	echo "== from disk with O_DIRECT, 8 GiB, output in memory (/dev/shm): no writeback competes with the reads"
	$O stream --in "$D/in8.f32" --out /dev/shm/overlap-out.f32 $FLAGS --direct || echo "FAILED"
	rm -f /dev/shm/overlap-out.f32
fi

echo "== page-cached, 8 GiB, writers 1, 2, 4 and 8 (rates only)"
for w in 1 2 4 8; do
	$O stream --in "$D/in8.f32" --out "$D/out.f32" --chunk 2M --slots 8 --writers $w | grep -E '^(write|streaming run)'
	rm -f "$D/out.f32"; sync
done
