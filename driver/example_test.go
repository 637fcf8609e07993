package driver_test

import (
	"errors"
	"fmt"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/loader"
)

// Open the first GPU's context, copy a slice there and back through pinned
// memory on a stream. Without an NVIDIA driver it says so and stops.
func Example() {
	if err := driver.Load(); errors.Is(err, loader.ErrNoDriver) {
		fmt.Println("no NVIDIA driver here")
		return
	}
	dev, err := driver.DeviceAt(0)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, err := driver.NewContext(dev)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ctx.Close() // closes everything made from ctx that is still open

	const n = 1024
	host, err := ctx.AllocHost(4*n, driver.HostAllocOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer host.Close()
	dev0, err := ctx.Alloc(4 * n)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer dev0.Close()
	s, err := ctx.NewStream(driver.StreamOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()

	xs := host.Float32s()
	for i := range xs {
		xs[i] = float32(i)
	}
	if err := s.CopyToDevice(dev0, 0, host, 0, 4*n); err != nil {
		fmt.Println(err)
		return
	}
	// Wait before touching the source again: the copy reads it later.
	if err := s.Synchronize(); err != nil {
		fmt.Println(err)
		return
	}
	clear(xs)
	if err := s.CopyToHost(host, 0, dev0, 0, 4*n); err != nil {
		fmt.Println(err)
		return
	}
	if err := s.Synchronize(); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("round trip:", xs[0], xs[1], xs[n-1])
}

// Launch a kernel from PTX with its arguments. The Args is built once and
// reused; launching allocates nothing.
func ExampleFunction_Launch() {
	if err := driver.Load(); errors.Is(err, loader.ErrNoDriver) {
		fmt.Println("no NVIDIA driver here")
		return
	}
	dev, _ := driver.DeviceAt(0)
	ctx, err := driver.NewContext(dev)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ctx.Close()
	const ptx = `.version 7.0
.target sm_75
.address_size 64
.visible .entry fill(.param .u64 out, .param .u32 v)
{
	.reg .b32 %r<4>;
	.reg .b64 %rd<4>;
	ld.param.u64 %rd1, [out];
	ld.param.u32 %r1, [v];
	cvta.to.global.u64 %rd2, %rd1;
	mov.u32 %r2, %tid.x;
	mul.wide.u32 %rd3, %r2, 4;
	add.s64 %rd2, %rd2, %rd3;
	st.global.u32 [%rd2], %r1;
	ret;
}`
	mod, err := ctx.LoadModule([]byte(ptx), driver.ModuleOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fill, err := mod.Function("fill")
	if err != nil {
		fmt.Println(err)
		return
	}
	buf, _ := ctx.Alloc(4 * 32)
	s, _ := ctx.NewStream(driver.StreamOptions{})
	args := driver.NewArgs().Buffer(buf, 0).Uint32(7)
	if err := fill.Launch(s, driver.GridFor(32, 32), args); err != nil {
		fmt.Println(err)
		return
	}
	if err := s.Synchronize(); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("launched", fill.Name())
}
