// seed: the lecture's kernel. out = in*0.5 + in*in*0.1, then
// out += sinf(out*0.01) repeated iters times (100 in the lecture).
extern "C" __global__ void seed(float* __restrict__ out, const float* __restrict__ in,
                                unsigned int n, int iters) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float x = in[i];
        float v = x * 0.5f + x * x * 0.1f;
        for (int k = 0; k < iters; ++k) {
            v += sinf(v * 0.01f);
        }
        out[i] = v;
    }
}
