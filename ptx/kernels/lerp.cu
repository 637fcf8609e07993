// lerp: two inputs, one output and two scalar parameters:
// out = (a + t*(b - a)) * scale.
extern "C" __global__ void lerp(float* __restrict__ out, const float* __restrict__ a,
                                const float* __restrict__ b, float t, float scale,
                                unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float av = a[i];
        out[i] = (av + t * (b[i] - av)) * scale;
    }
}
