// empty: does nothing; for launch-overhead benchmarks.
extern "C" __global__ void empty() {}
