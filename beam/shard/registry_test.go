package shard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// countingProc is a Processor that counts its calls; its Process copies in
// to out, or runs hook when set.
type countingProc struct {
	device   int
	rowBytes int
	closed   atomic.Int32
	calls    atomic.Int32
	hook     func(ctx context.Context, in io.Reader, out io.Writer) (Stats, error)
}

func (p *countingProc) RowBytes() int { return p.rowBytes }

func (p *countingProc) Process(ctx context.Context, in io.Reader, out io.Writer) (Stats, error) {
	p.calls.Add(1)
	if p.hook != nil {
		return p.hook(ctx, in, out)
	}
	n, err := io.Copy(out, in)
	return Stats{Rows: n / int64(p.rowBytes), InBytes: n, OutBytes: n, Backend: fmt.Sprintf("counting %d", p.device)}, err
}

func (p *countingProc) Close() error {
	p.closed.Add(1)
	return nil
}

// counting is the factory behind the processor "test-counting": it records
// every Processor it opens, and fails on the device in failOn (when >= 0).
var counting = struct {
	mu     sync.Mutex
	opened []*countingProc
	failOn int
	hook   func(ctx context.Context, in io.Reader, out io.Writer) (Stats, error)
}{failOn: -1}

func init() {
	if err := Register("test-counting", func(spec Spec, device int) (Processor, error) {
		counting.mu.Lock()
		defer counting.mu.Unlock()
		if device == counting.failOn {
			return nil, errors.New("no such device")
		}
		p := &countingProc{device: device, rowBytes: 4, hook: counting.hook}
		counting.opened = append(counting.opened, p)
		return p, nil
	}); err != nil {
		panic(err)
	}
}

// resetCounting clears the factory's records and sets its failing device.
func resetCounting(t *testing.T, failOn int) {
	t.Helper()
	require.Zero(t, Open(), "a processor from an earlier test is still open")
	counting.mu.Lock()
	counting.opened, counting.failOn, counting.hook = nil, failOn, nil
	counting.mu.Unlock()
	t.Cleanup(func() {
		counting.mu.Lock()
		counting.failOn, counting.hook = -1, nil
		counting.mu.Unlock()
	})
}

func openedProcs() []*countingProc {
	counting.mu.Lock()
	defer counting.mu.Unlock()
	return append([]*countingProc(nil), counting.opened...)
}

func TestLeaseSharesOneProcessor(t *testing.T) {
	resetCounting(t, -1)
	spec := Spec{Processor: "test-counting", Sim: true}
	a, err := Acquire(spec)
	require.NoError(t, err)
	b, err := Acquire(spec)
	require.NoError(t, err)
	require.Len(t, openedProcs(), 1, "two leases on one Spec open one processor")
	assert.Equal(t, 2, Refs(spec))
	assert.Equal(t, []int{0}, a.Spec().Devices, "a simulated Spec has one device")

	other, err := Acquire(Spec{Processor: "test-counting", Sim: true, Iters: 7})
	require.NoError(t, err)
	require.Len(t, openedProcs(), 2, "another Spec opens its own")
	require.NoError(t, other.Release())

	require.NoError(t, a.Release())
	require.NoError(t, a.Release(), "a second Release is a no-op")
	assert.Equal(t, 1, Refs(spec))
	p := openedProcs()[0]
	assert.Zero(t, p.closed.Load(), "closed while a lease holds it")
	require.NoError(t, b.Release())
	assert.Equal(t, int32(1), p.closed.Load(), "the last Release closes it, once")
	assert.Zero(t, Open())
	assert.Zero(t, Refs(spec))

	assert.ErrorIs(t, a.Use(func(Processor) error { t.Fatal("Use ran after Release"); return nil }), ErrReleased)
}

func TestLeaseUseHoldsAcrossRelease(t *testing.T) {
	resetCounting(t, -1)
	spec := Spec{Processor: "test-counting", Sim: true}
	l, err := Acquire(spec)
	require.NoError(t, err)
	err = l.Use(func(p Processor) error {
		assert.Equal(t, 2, Refs(spec), "a Use holds a reference of its own")
		require.NoError(t, l.Release()) // as a worker's context ending would
		assert.Zero(t, openedProcs()[0].closed.Load(), "closed under a Use in progress")
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, int32(1), openedProcs()[0].closed.Load(), "closed when the Use returned")
	assert.Zero(t, Open())
}

func TestAcquireOpensOnceUnderConcurrency(t *testing.T) {
	resetCounting(t, -1)
	spec := Spec{Processor: "test-counting", Devices: []int{0, 1}}
	var wg sync.WaitGroup
	leases := make([]*Lease, 8)
	for i := range leases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := Acquire(spec)
			assert.NoError(t, err)
			leases[i] = l
		}()
	}
	wg.Wait()
	require.Len(t, openedProcs(), 2, "one processor per device, opened once")
	assert.Equal(t, 8, Refs(spec))
	for _, l := range leases {
		require.NoError(t, l.Release())
	}
	for _, p := range openedProcs() {
		assert.Equal(t, int32(1), p.closed.Load(), "device %d", p.device)
	}
	assert.Zero(t, Open())
}

func TestAcquireFailureLeavesNothingOpen(t *testing.T) {
	resetCounting(t, 1)
	_, err := Acquire(Spec{Processor: "test-counting", Devices: []int{0, 1, 2}})
	require.EqualError(t, err, `shard: opening processor "test-counting" on device 1: no such device`)
	procs := openedProcs()
	require.Len(t, procs, 1, "device 2 is not tried after device 1 failed")
	assert.Equal(t, int32(1), procs[0].closed.Load(), "device 0's processor is closed")
	assert.Zero(t, Open())

	_, err = Acquire(Spec{Processor: "no-such"})
	require.EqualError(t, err, `shard: no processor "no-such" is registered in this process (have `+joinNames(Registered())+`)`)
}

func joinNames(names []string) string {
	s := ""
	for i, n := range names {
		if i > 0 {
			s += ", "
		}
		s += n
	}
	return s
}

// TestPoolSpreadsShards checks that two shards at once go to two devices.
func TestPoolSpreadsShards(t *testing.T) {
	resetCounting(t, -1)
	release := make(chan struct{})
	var inside sync.WaitGroup
	inside.Add(2)
	counting.mu.Lock()
	counting.hook = func(ctx context.Context, in io.Reader, out io.Writer) (Stats, error) {
		inside.Done()
		<-release
		return Stats{}, nil
	}
	counting.mu.Unlock()
	l, err := Acquire(Spec{Processor: "test-counting", Devices: []int{3, 5}})
	require.NoError(t, err)
	defer l.Release()
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			assert.NoError(t, l.Use(func(p Processor) error {
				_, err := p.Process(context.Background(), nil, nil)
				return err
			}))
		}()
	}
	waitGroupTimeout(t, &inside, 10*time.Second)
	close(release)
	wg.Wait()
	procs := openedProcs()
	require.Len(t, procs, 2)
	assert.Equal(t, []int{3, 5}, []int{procs[0].device, procs[1].device})
	assert.Equal(t, []int32{1, 1}, []int32{procs[0].calls.Load(), procs[1].calls.Load()}, "one shard per device")
}

func waitGroupTimeout(t *testing.T, wg *sync.WaitGroup, d time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatal("timed out: the two shards did not run at once")
	}
}

func TestRegister(t *testing.T) {
	f := func(Spec, int) (Processor, error) { return nil, nil }
	tests := []struct {
		name    string
		f       Factory
		wantErr string
	}{
		{"", f, "shard: Register needs a name and a factory"},
		{"x", nil, "shard: Register needs a name and a factory"},
		{"kernel", f, `shard: processor "kernel" is already registered`},
	}
	for _, tt := range tests {
		assert.EqualError(t, Register(tt.name, tt.f), tt.wantErr, "Register(%q)", tt.name)
	}
	assert.Contains(t, Registered(), "kernel")
	assert.Contains(t, Registered(), "mlp")
}

func TestParseDevices(t *testing.T) {
	tests := []struct {
		in      string
		want    []int
		wantErr string
	}{
		{"all", []int{-1}, ""},
		{"0", []int{0}, ""},
		{" 1, 0 ", []int{1, 0}, ""},
		{"", nil, "shard: empty device list (want all, or ordinals such as 0,1)"},
		{"0,0", nil, "shard: device 0 listed twice"},
		{"-1", nil, `shard: device "-1": want all, or ordinals such as 0,1`},
		{"gpu0", nil, `shard: device "gpu0": want all, or ordinals such as 0,1`},
	}
	for _, tt := range tests {
		got, err := ParseDevices(tt.in)
		if tt.wantErr != "" {
			assert.EqualError(t, err, tt.wantErr, "ParseDevices(%q)", tt.in)
			continue
		}
		require.NoError(t, err, "ParseDevices(%q)", tt.in)
		assert.Equal(t, tt.want, got, "ParseDevices(%q)", tt.in)
	}
}

func TestSpecResolve(t *testing.T) {
	old := deviceCount
	deviceCount = func() (int, error) { return 3, nil }
	t.Cleanup(func() { deviceCount = old })
	tests := []struct {
		name    string
		spec    Spec
		env     string
		want    Spec
		wantErr string
	}{
		{name: "zero: seed, 100 iterations, every GPU", spec: Spec{},
			want: Spec{Processor: "kernel", Kernel: "seed", Iters: 100, Devices: []int{0, 1, 2}}},
		{name: "sim: one device", spec: Spec{Sim: true, Iters: 5},
			want: Spec{Processor: "kernel", Sim: true, Kernel: "seed", Iters: 5, Devices: []int{0}}},
		{name: "environment picks the GPU", spec: Spec{}, env: "1",
			want: Spec{Processor: "kernel", Kernel: "seed", Iters: 100, Devices: []int{1}}},
		{name: "the Spec's devices win over the environment", spec: Spec{Devices: []int{2}}, env: "1",
			want: Spec{Processor: "kernel", Kernel: "seed", Iters: 100, Devices: []int{2}}},
		{name: "all", spec: Spec{Devices: AllDevices}, env: "1",
			want: Spec{Processor: "kernel", Kernel: "seed", Iters: 100, Devices: []int{0, 1, 2}}},
		{name: "axpb has no iterations", spec: Spec{Kernel: "axpb", Devices: []int{0}},
			want: Spec{Processor: "kernel", Kernel: "axpb", Devices: []int{0}}},
		{name: "another processor keeps its fields", spec: Spec{Processor: "test-counting", Devices: []int{0}},
			want: Spec{Processor: "test-counting", Devices: []int{0}}},
		{name: "mlp: fp32, the file's activation", spec: Spec{Processor: "mlp", Model: "m.safetensors", Sim: true},
			want: Spec{Processor: "mlp", Model: "m.safetensors", Precision: "fp32", Sim: true, Devices: []int{0}}},
		{name: "mlp: spelled as package model does", spec: Spec{Processor: "mlp", Model: "m.safetensors", Precision: "TF32", Activation: " GELU", Devices: []int{1}},
			want: Spec{Processor: "mlp", Model: "m.safetensors", Precision: "tf32", Activation: "gelu", Devices: []int{1}}},
		{name: "mlp without a model", spec: Spec{Processor: "mlp"},
			wantErr: "shard: the mlp processor needs a model (Spec.Model: a safetensors file)"},
		{name: "mlp with a kernel", spec: Spec{Processor: "mlp", Model: "m.safetensors", Kernel: "axpb"},
			wantErr: `shard: the mlp processor runs a model, not an embedded kernel (kernel "axpb", iters 0)`},
		{name: "mlp with an unknown precision", spec: Spec{Processor: "mlp", Model: "m.safetensors", Precision: "bf16"},
			wantErr: `shard: precision "bf16": want fp32 or tf32`},
		{name: "kernel with a model", spec: Spec{Model: "m.safetensors"},
			wantErr: `shard: the kernel processor runs no model (model "m.safetensors", precision "", activation ""): the mlp processor does`},
		{name: "bad environment", spec: Spec{}, env: "x",
			wantErr: `shard: $OVERLAP_BEAM_DEVICES: device "x": want all, or ordinals such as 0,1`},
		{name: "repeated device", spec: Spec{Devices: []int{1, 1}},
			wantErr: "shard: devices [1 1]: want distinct ordinals, or all"},
		{name: "two-input kernel", spec: Spec{Kernel: "saxpy"},
			wantErr: "shard: kernel saxpy has 2 input(s) and 1 output(s); a shard is one input and one output ([axpb seed] qualify)"},
		{name: "iterations of a kernel without", spec: Spec{Kernel: "axpb", Iters: 3},
			wantErr: "shard: kernel axpb has no iterations to set (iters 3)"},
		{name: "negative iterations", spec: Spec{Iters: -1},
			wantErr: "shard: iters -1: must not be negative"},
		{name: "negative chunk", spec: Spec{ChunkElems: -1},
			wantErr: "shard: chunk, slots and compute streams must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(DevicesEnv, tt.env)
			got, err := tt.spec.resolve()
			if tt.wantErr != "" {
				require.EqualError(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}
