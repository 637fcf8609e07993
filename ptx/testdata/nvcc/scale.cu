// Test fixture for the PTX parser: one element-wise kernel, compiled by
// nvcc plain, with -lineinfo and with -G (see gen.sh beside this file).
extern "C" __global__ void scale(float* __restrict__ out, const float* __restrict__ in,
                                 float k, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = k * in[i];
    }
}
