//go:build linux

package driver_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/internal/fakecuda"
	"github.com/purecuda/overlap/internal/gputest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func init() { fakeCases = append(fakeCases, fakeCase{"NilAndZeroArguments", nilAndZeroArguments}) }

// owningTypes are the types whose zero value stands for "an object that
// was never made" when passed as an argument.
var owningTypes = map[reflect.Type]bool{}

func init() {
	for _, v := range []any{&driver.Context{}, &driver.DeviceBuffer{}, &driver.HostBuffer{},
		&driver.HostRegistration{}, &driver.Stream{}, &driver.Event{}, &driver.Module{},
		&driver.Function{}, &driver.MemPool{}, &driver.Graph{}, &driver.GraphExec{}, &driver.ManagedBuffer{}} {
		owningTypes[reflect.TypeOf(v)] = true
	}
}

var hostMemoryType = reflect.TypeFor[driver.HostMemory]()

// nilAndZeroArguments is the live half of the reliability audit's
// finding 3 (the nil and zero receivers are TestNilAndZeroReceivers'):
// every exported method of a live object of each type, called with zero
// arguments (nil pointers, interfaces and functions, zero numbers and
// structs), and again with zero objects (&driver.Stream{} and the like,
// and a zero *HostBuffer as HostMemory) in place of its object arguments.
// None may panic; a method that returns an error must return one when an
// argument is a nil or zero object. Nil and empty slices are not
// objects: a copy of an empty slice copies nothing, as os.File's Write
// of an empty slice writes nothing.
func nilAndZeroArguments(t *testing.T, f *fakecuda.Fake) {
	c := gputest.FakeContext(t, 0)
	dev := c.Device()
	s, err := c.NewStream(driver.StreamOptions{})
	require.NoError(t, err)
	d, err := c.Alloc(64)
	require.NoError(t, err)
	h := pinned(t, c, 64, 1)
	reg, err := c.RegisterHost(make([]byte, 64), driver.RegisterOptions{})
	require.NoError(t, err)
	e, err := c.NewEvent(driver.EventOptions{})
	require.NoError(t, err)
	fn := fakeKernel(t, f, c)
	m, err := c.LoadModule([]byte("// any"), driver.ModuleOptions{})
	require.NoError(t, err)
	p, err := c.NewMemPool(driver.MemPoolOptions{})
	require.NoError(t, err)
	g, err := c.NewGraph()
	require.NoError(t, err)
	_, err = g.AddCopyToDevice(d, 0, h, 0, 64)
	require.NoError(t, err)
	x, err := g.Instantiate()
	require.NoError(t, err)
	var derr *driver.Error
	f.Fail("cuMemAlloc_v2", 1, 2)
	_, err = c.Alloc(16)
	require.ErrorAs(t, err, &derr)
	b, err := c.Bind()
	require.NoError(t, err)
	defer b.Release()
	mb, err := c.AllocManaged(64, driver.ManagedOptions{})
	require.NoError(t, err)

	objects := []any{c, b, s, d, h, reg, e, fn, m, p, g, x, driver.NewArgs(), dev, derr, mb, driver.Location{}}
	for _, zeroObjects := range []bool{false, true} {
		for _, obj := range objects {
			v := reflect.ValueOf(obj)
			vt := v.Type()
			for i := range vt.NumMethod() {
				meth := vt.Method(i)
				if meth.Name == "Close" || meth.Name == "Release" {
					continue // they end the object; the cleanups run them
				}
				name := reflect.Indirect(v).Type().Name() + "." + meth.Name
				mt := v.Method(i).Type()
				in := make([]reflect.Value, 0, mt.NumIn())
				objectArg := false
				for j := range mt.NumIn() {
					pt := mt.In(j)
					if mt.IsVariadic() && j == mt.NumIn()-1 {
						break
					}
					a := reflect.Zero(pt)
					switch {
					case zeroObjects && owningTypes[pt]:
						a = reflect.New(pt.Elem())
					case zeroObjects && pt == hostMemoryType:
						a = reflect.ValueOf(&driver.HostBuffer{})
					}
					switch pt.Kind() {
					case reflect.Pointer, reflect.Interface, reflect.Func:
						objectArg = true
					}
					in = append(in, a)
				}
				var out []reflect.Value
				require.NotPanics(t, func() { out = v.Method(i).Call(in) }, "%s (zero objects: %v)", name, zeroObjects)
				for _, o := range out {
					if nb, ok := o.Interface().(*driver.Bound); ok && nb != nil {
						nb.Release()
					}
				}
				last := mt.NumOut() - 1
				if objectArg && last >= 0 && mt.Out(last) == reflect.TypeFor[error]() {
					err, _ := out[last].Interface().(error)
					assert.Error(t, err, "%s with a nil or zero object argument (zero objects: %v)", name, zeroObjects)
					var de *driver.Error
					if err != nil && !errors.As(err, &de) {
						// The binding's own error names the method, once.
						assert.True(t, strings.HasPrefix(err.Error(), "cuda: "+name+": "), "%s: the error does not name it: %v", name, err)
						assert.Equal(t, 1, strings.Count(err.Error(), "cuda:"), "%s: the error says cuda: more than once: %v", name, err)
					}
				}
			}
		}
	}
	require.NoError(t, s.Synchronize())
	assert.NoError(t, x.Close())
}
