// axpb: one input, two scalars: out = a*x + b.
extern "C" __global__ void axpb(float* __restrict__ out, const float* __restrict__ x,
                                float a, float b, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = a * x[i] + b;
    }
}
