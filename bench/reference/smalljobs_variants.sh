#!/bin/sh
# Runs the small-jobs twin's variants (smalljobs_variants.cu) one knob at a
# time at 4K elements x 1 and x 4 workers, twice each, on the GPU machine,
# from the repository root. OVERLAP names an overlap binary to run the same
# cells beside them (overlap bench --small-jobs, in every wait mode).
# Usage: sh bench/reference/smalljobs_variants.sh [outdir]
set -e
out=${1:-.}
nvcc -O3 -arch=sm_90 -o "$out/smalljobs_variants" bench/reference/smalljobs_variants.cu -lcuda
nvcc -cubin -arch=sm_90 -o "$out/seed.cubin" ptx/kernels/seed.cu
v="$out/smalljobs_variants cubin=$out/seed.cubin"
for w in 1 4; do
  for rep in 1 2; do
    $v workers=$w
    $v workers=$w kernel=const
    $v workers=$w stream=blocking
    $v workers=$w stream=null
    $v workers=$w sync=event
    $v workers=$w sync=query
    $v workers=$w wait=spin
    $v workers=$w wait=yield
    $v workers=$w wait=block
    $v workers=$w warm=0.5
    $v workers=$w api=driver code=sass
    $v workers=$w api=driver code=ptx
    $v workers=$w api=driver code=ptx wait=spin
    $v workers=$w api=driver code=sass wait=spin
  done
done
if [ -n "$OVERLAP" ]; then
  for rep in 1 2; do
    $OVERLAP bench --small-jobs --elems 4K --workers 1,4 --wait all --reference 2>&1 || true
  done
fi
