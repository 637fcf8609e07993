#!/bin/sh
# Regenerates the nvcc test fixtures beside this file. Needs nvcc (on the
# GPU machine). Usage: gen.sh [OUTDIR]. The fixtures keep nvcc's own
# header (.version 9.0 with CUDA 13): the parser must read what nvcc writes.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here}
mkdir -p "$out"
nvcc -ptx -arch=compute_75 -o "$out/scale.ptx" "$here/scale.cu"
nvcc -ptx -arch=compute_75 -lineinfo -o "$out/scale_lineinfo.ptx" "$here/scale.cu"
nvcc -ptx -arch=compute_75 -G -o "$out/scale_debug.ptx" "$here/scale.cu"
nvcc -ptx -arch=compute_75 -G -o "$out/multi_debug.ptx" "$here/multi.cu"
nvcc --version | tail -n 1 > "$out/nvcc-version.txt"
