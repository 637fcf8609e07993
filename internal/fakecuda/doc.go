// Package fakecuda builds and drives a fake CUDA driver library for tests
// on machines without a GPU.
//
// The fake (src/libcuda.c) is a small C library that exports the driver
// entry points package driver binds, both through cuGetProcAddress_v2 and
// under their versioned export names; their list, src/zexports.h, is
// generated from driver/prototypes.go, so that the fake fails to compile
// when it lacks one (but for those it leaves out on purpose, named in
// libcuda.c). Tests load it through the real
// loader and the real call paths, by pointing loader.EnvVar at it in a
// child process (the driver library is loaded once per process). It
// records calls, can fail or delay any call on demand, runs stream work
// asynchronously on a worker thread, and checks that every handle and host
// range it is given is live: misuse becomes a recorded violation with a
// message instead of a crash. Test code reads the violations, the live
// object counts and the calls through [Fake]. Kernels do nothing, but for
// one: a function named "fake_copy" with parameters (out, in *float32, n
// uint32), launched after [Fake.SetParams](8, 8, 4), copies n floats of
// device memory, so that a test of the engine can check that its data
// arrived.
//
// It needs a C compiler (the one the race detector needs: $CC, cc, gcc or
// clang). Without one, [Run] skips the test with a one-line reason. The
// fake runs on Linux only. Package gputest's Fake wraps Run with the
// checks that end every test on the fake.
//
// # Concurrency
//
// The fake's entry points may be called from any thread, as the real
// driver's may: one lock guards its state, and stream work runs on its
// own worker thread. A [Fake]'s controls may be called from any
// goroutine; Reset, Fail and the like affect every thread at once, so a
// test sets them up before it starts its goroutines.
//
// # Memory
//
// The fake's device memory is host memory that it allocates; its host
// allocations and registrations are checked against the ranges it was
// given. [Run] builds the library into the temporary directory of each
// test that calls it, in the test's own process; the child loads it once
// and keeps it loaded until it exits.
package fakecuda
