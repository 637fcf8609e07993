// scale: out[i] = SCALE * in[i] + 1, an element-wise kernel of the shape
// that overlap run's --ptx and --cu paths launch: (float *out, const
// float *in..., unsigned n), extern "C" so that its entry is named
// "scale", and guarded against n, since the last block of a chunk runs
// past it. -DSCALE=... changes the factor.
#ifndef SCALE
#define SCALE 3.0f
#endif

extern "C" __global__ void scale(float *__restrict__ out, const float *__restrict__ in, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = SCALE * in[i] + 1.0f;
    }
}
