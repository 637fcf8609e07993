#!/bin/sh
# Builds and runs copyprobe.cu on the GPU machine: 64K-element (256 KiB)
# and 4 MiB chunks, with and without the batched copy. Prints the headers'
# prototypes of the batched copy first, for the binding.
# Usage: sh bench/reference/copyprobe.sh [outdir]
out=${1:-.}
grep -h -B1 -A4 "cuMemcpyBatchAsync_v2(\|cudaMemcpyBatchAsync(" /usr/local/cuda/include/cuda.h /usr/local/cuda/include/cuda_runtime_api.h | head -40
nvcc -O3 -arch=sm_90 -o "$out/copyprobe" bench/reference/copyprobe.cu || exit 1
if nvcc -O3 -arch=sm_90 -DWITH_BATCH -o "$out/copyprobe_batch" bench/reference/copyprobe.cu; then p="$out/copyprobe_batch"; else echo "copyprobe: the batched copy did not compile"; p="$out/copyprobe"; fi
$p 262144 1024
$p 4194304 64
