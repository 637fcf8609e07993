// Test fixture for the PTX parser: several kernels and a device function
// in one module, compiled with -G (see gen.sh beside this file).
__device__ float twice(float x) { return x + x; }

extern "C" __global__ void add(float* out, const float* a, const float* b, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}

extern "C" __global__ void double_it(float* out, const float* in, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = twice(in[i]);
}

struct Pair { float a; int b; };

extern "C" __global__ void with_struct(float* out, Pair p, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = p.a * (float)p.b;
}
