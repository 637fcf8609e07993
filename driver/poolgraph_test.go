package driver

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
)

// Issue 14: the pool and graph calls refuse nil and closed objects before
// any driver call, naming the call; these run everywhere, without a driver.
func TestPoolGraphNilAndClosed(t *testing.T) {
	var s *Stream
	var p *MemPool
	var g *Graph
	var e *GraphExec
	var c *Context
	for _, tc := range []struct {
		err  error
		want string
	}{
		{func() error { _, err := s.AllocAsync(16); return err }(), "cuda: Stream.AllocAsync: invalid argument: nil *Stream"},
		{func() error { _, err := s.AllocFromPool(p, 16); return err }(), "cuda: Stream.AllocFromPool: invalid argument: nil *MemPool"},
		{func() error { _, err := s.AllocAsync(0); return err }(), "cuda: Stream.AllocAsync: invalid argument: size 0: must be positive"},
		{s.FreeAsync(nil), "cuda: Stream.FreeAsync: invalid argument: nil *DeviceBuffer"},
		{func() error { _, err := p.ReleaseThreshold(); return err }(), "cuda: MemPool.ReleaseThreshold: invalid argument: nil *MemPool"},
		{p.SetReleaseThreshold(1), "cuda: MemPool.SetReleaseThreshold: invalid argument: nil *MemPool"},
		{func() error { _, err := c.NewMemPool(MemPoolOptions{}); return err }(), "cuda: Context.NewMemPool: invalid argument: nil *Context"},
		{func() error { _, err := s.Capture(func(*Bound) error { return nil }); return err }(), "cuda: Stream.Capture: invalid argument: nil *Stream"},
		{func() error { _, err := g.Instantiate(); return err }(), "cuda: Graph.Instantiate: invalid argument: nil *Graph"},
		{e.Launch(s), "cuda: GraphExec.Launch: invalid argument: nil *GraphExec"},
		{e.Update(g), "cuda: GraphExec.Update: invalid argument: nil *GraphExec"},
	} {
		assert.ErrorIs(t, tc.err, ErrInvalidArgument, tc.want)
		assert.EqualError(t, tc.err, tc.want)
	}
	assert.NoError(t, p.Close())
	assert.NoError(t, g.Close())
	assert.NoError(t, e.Close())

	// Objects whose context is closed: ErrClosed, never a driver call.
	closedCtx := &Context{core: &ctxCore{objects: map[*resource]struct{}{}, closed: make(chan struct{})}}
	dead := &Stream{owned: owned{ctx: closedCtx, res: &resource{core: closedCtx.core}}}
	_, err := dead.Capture(func(*Bound) error { return nil })
	assert.ErrorIs(t, err, ErrClosed)
	_, err = dead.AllocAsync(16)
	assert.ErrorIs(t, err, ErrClosed)
	assert.False(t, dead.capturing(), "a failed capture leaves no capture behind")
	_, err = closedCtx.NewMemPool(MemPoolOptions{})
	assert.ErrorIs(t, err, ErrClosed)
	deadGraph := &Graph{owned: owned{ctx: closedCtx, res: &resource{core: closedCtx.core, kind: kindGraph}}}
	_, err = deadGraph.Instantiate()
	assert.ErrorIs(t, err, ErrClosed)
	deadExec := &GraphExec{owned: owned{ctx: closedCtx, res: &resource{core: closedCtx.core, kind: kindGraphExec}}}
	assert.ErrorIs(t, deadExec.Launch(dead), ErrClosed)
	assert.ErrorIs(t, deadExec.Update(deadGraph), ErrClosed)
	deadBuf := &DeviceBuffer{owned: owned{ctx: closedCtx, res: &resource{core: closedCtx.core, kind: kindAsyncMemory}}, size: 16}
	assert.ErrorIs(t, dead.FreeAsync(deadBuf), ErrClosed)
}

// The C structs the pool and graph calls pass, laid out as cuda.h does on
// 64-bit hosts (see their definitions for the source).
func TestPoolGraphStructLayouts(t *testing.T) {
	var p memPoolProps
	assert.Equal(t, uintptr(88), unsafe.Sizeof(p))
	assert.Equal(t, uintptr(8), unsafe.Offsetof(p.locationType))
	assert.Equal(t, uintptr(12), unsafe.Offsetof(p.locationID))
	assert.Equal(t, uintptr(16), unsafe.Offsetof(p.win32))
	assert.Equal(t, uintptr(24), unsafe.Offsetof(p.maxSize))
	assert.Equal(t, uintptr(32), unsafe.Offsetof(p.usage))
	assert.Equal(t, uintptr(34), unsafe.Offsetof(p.reserved))
	var k kernelNodeParams
	assert.Equal(t, uintptr(72), unsafe.Sizeof(k))
	assert.Equal(t, uintptr(8), unsafe.Offsetof(k.gridX))
	assert.Equal(t, uintptr(20), unsafe.Offsetof(k.blockX))
	assert.Equal(t, uintptr(32), unsafe.Offsetof(k.sharedMem))
	assert.Equal(t, uintptr(40), unsafe.Offsetof(k.kernelParams))
	assert.Equal(t, uintptr(64), unsafe.Offsetof(k.ctx))
	var m memcpy3D
	assert.Equal(t, uintptr(200), unsafe.Sizeof(m))
	assert.Equal(t, uintptr(32), unsafe.Offsetof(m.srcMemoryType))
	assert.Equal(t, uintptr(40), unsafe.Offsetof(m.srcHost))
	assert.Equal(t, uintptr(48), unsafe.Offsetof(m.srcDevice))
	assert.Equal(t, uintptr(72), unsafe.Offsetof(m.srcPitch))
	assert.Equal(t, uintptr(88), unsafe.Offsetof(m.dstXInBytes))
	assert.Equal(t, uintptr(120), unsafe.Offsetof(m.dstMemoryType))
	assert.Equal(t, uintptr(128), unsafe.Offsetof(m.dstHost))
	assert.Equal(t, uintptr(136), unsafe.Offsetof(m.dstDevice))
	assert.Equal(t, uintptr(176), unsafe.Offsetof(m.widthInBytes))
	assert.Equal(t, uintptr(192), unsafe.Offsetof(m.depth))
	var u graphExecUpdateResultInfo
	assert.Equal(t, uintptr(24), unsafe.Sizeof(u))
	assert.Equal(t, uintptr(8), unsafe.Offsetof(u.errorNode))
	assert.Equal(t, uintptr(16), unsafe.Offsetof(u.errorFromNode))
}
