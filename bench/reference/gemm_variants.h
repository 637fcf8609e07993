// gemm_variants.h: the tensor-core configurations that gemm_bench times
// and gemm_emu checks, beside the exported kernels of ptx/kernels/gemm.cu.
// Include it after gemm.cu. GEMM_VARIANTS(X) calls
//
//   X(part, form, Cfg, minb, name)
//
// for each: part is the translation unit of gemm_bench that compiles it
// (1..6), form is 1 for gemm_tf32_tile (GemmTf32Cfg: ldmatrix, the barrier
// at the top of each tile, the fragments of a k-step loaded just before
// its mma) and 2 for gemm_mma_tile (GemmMmaCfg), minb the blocks per SM
// for __launch_bounds__, and name the table's name. In the names: tile
// BMxBNxBK, warp tile w, stages s, the operands (tf32 rna: rounded, tf32
// trunc: truncated, bf16), p0/p1 the PIPE of form 2, gelu=fast/erff the
// GELU evaluation, and the shared memory per block ([48K] fits the static
// 48 KiB that the Go side can launch).
#pragma once

// GemmMmaCfg<BM, BN, BK, WM, WN, STAGES, MODE (0 rna, 2 trunc, 4 bf16), PIPE, GELU>
typedef GemmTf32Cfg<128, 128, 16, 64, 64, 3, 2> GemmV01;
typedef GemmTf32Cfg<128, 128, 16, 64, 64, 3, 0> GemmV02;
typedef GemmMmaCfg<128, 128, 16, 64, 64, 3, 2, 0, 1> GemmV03;
typedef GemmMmaCfg<128, 128, 16, 64, 64, 3, 2, 1, 0> GemmV04;
typedef GemmMmaCfg<128, 128, 16, 64, 64, 3, 0, 1, 1> GemmV05;
typedef GemmMmaCfg<128, 128, 16, 64, 64, 4, 2, 1, 1> GemmV06;
typedef GemmMmaCfg<128, 128, 32, 64, 64, 3, 2, 1, 1> GemmV07;
typedef GemmMmaCfg<128, 128, 16, 64, 32, 3, 2, 1, 1> GemmV08;
typedef GemmMmaCfg<256, 128, 16, 64, 64, 2, 2, 1, 1> GemmV09;
typedef GemmMmaCfg<256, 128, 16, 64, 64, 4, 2, 1, 1> GemmV10;
typedef GemmMmaCfg<256, 128, 32, 64, 64, 3, 2, 1, 1> GemmV11;
typedef GemmMmaCfg<128, 256, 32, 64, 64, 3, 2, 1, 1> GemmV12;
typedef GemmMmaCfg<256, 128, 32, 64, 64, 4, 2, 1, 1> GemmV13;
typedef GemmMmaCfg<256, 128, 32, 64, 32, 3, 2, 1, 1> GemmV14;
typedef GemmMmaCfg<128, 128, 16, 64, 64, 3, 4, 0, 0> GemmV15;
typedef GemmMmaCfg<128, 128, 16, 64, 64, 4, 4, 0, 1> GemmV16;
typedef GemmMmaCfg<128, 128, 32, 64, 64, 3, 4, 1, 1> GemmV17;
typedef GemmMmaCfg<128, 128, 16, 64, 32, 3, 4, 0, 1> GemmV18;
typedef GemmMmaCfg<256, 128, 16, 64, 64, 2, 4, 0, 1> GemmV19;
typedef GemmMmaCfg<256, 128, 32, 64, 64, 3, 4, 1, 1> GemmV20;
typedef GemmMmaCfg<128, 256, 32, 64, 64, 3, 4, 1, 1> GemmV21;
typedef GemmMmaCfg<256, 128, 32, 64, 64, 4, 4, 1, 1> GemmV22;
typedef GemmMmaCfg<256, 128, 16, 64, 64, 4, 4, 0, 1> GemmV23;

#define GEMM_VARIANTS(X)                                                              \
    X(1, 1, GemmV01, 2, "tf32 128x128x16 w64x64 s3 v1 trunc [48K]")                   \
    X(1, 1, GemmV02, 2, "tf32 128x128x16 w64x64 s3 v1 rna [48K]")                     \
    X(1, 2, GemmV03, 2, "tf32 128x128x16 w64x64 s3 trunc p0 gelu=fast [48K]")         \
    X(1, 2, GemmV04, 2, "tf32 128x128x16 w64x64 s3 trunc p1 gelu=erff [48K]")         \
    X(2, 2, GemmV05, 2, "tf32 128x128x16 w64x64 s3 rna p1 gelu=fast [48K]")           \
    X(2, 2, GemmV06, 2, "tf32 128x128x16 w64x64 s4 trunc p1 [64K]")                   \
    X(2, 2, GemmV07, 2, "tf32 128x128x32 w64x64 s3 trunc p1 [96K]")                   \
    X(2, 2, GemmV08, 2, "tf32 128x128x16 w64x32 s3 trunc p1 [48K]")                   \
    X(3, 2, GemmV09, 1, "tf32 256x128x16 w64x64 s2 trunc p1 [48K]")                   \
    X(3, 2, GemmV10, 1, "tf32 256x128x16 w64x64 s4 trunc p1 [96K]")                   \
    X(3, 2, GemmV11, 1, "tf32 256x128x32 w64x64 s3 trunc p1 [144K]")                  \
    X(4, 2, GemmV12, 1, "tf32 128x256x32 w64x64 s3 trunc p1 [144K]")                  \
    X(4, 2, GemmV13, 1, "tf32 256x128x32 w64x64 s4 trunc p1 [192K]")                  \
    X(4, 2, GemmV14, 1, "tf32 256x128x32 w64x32 s3 trunc p1 [144K]")                  \
    X(5, 2, GemmV15, 2, "bf16 128x128x16 w64x64 s3 p0 gelu=erff [48K]")               \
    X(5, 2, GemmV16, 2, "bf16 128x128x16 w64x64 s4 p0 [64K]")                         \
    X(5, 2, GemmV17, 2, "bf16 128x128x32 w64x64 s3 p1 [96K]")                         \
    X(5, 2, GemmV18, 2, "bf16 128x128x16 w64x32 s3 p0 [48K]")                         \
    X(6, 2, GemmV19, 1, "bf16 256x128x16 w64x64 s2 p0 [48K]")                         \
    X(6, 2, GemmV20, 1, "bf16 256x128x32 w64x64 s3 p1 [144K]")                        \
    X(6, 2, GemmV21, 1, "bf16 128x256x32 w64x64 s3 p1 [144K]")                        \
    X(6, 2, GemmV22, 1, "bf16 256x128x32 w64x64 s4 p1 [192K]")                        \
    X(6, 2, GemmV23, 1, "bf16 256x128x16 w64x64 s4 p0 [96K]")
