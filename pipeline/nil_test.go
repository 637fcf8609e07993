package pipeline_test

import (
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/pipeline/sim"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// exportedDecls lists every exported function of the package's source
// ("New") and every exported method ("Pipeline.Run", "simStream.Close"),
// on exported types and on the unexported ones that the package hands
// out through its interfaces.
func exportedDecls(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := os.ReadDir(".")
	require.NoError(t, err)
	var out []string
	for _, e := range files {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || !fd.Name.IsExported() {
				continue
			}
			if fd.Recv == nil {
				out = append(out, fd.Name.Name)
				continue
			}
			typ := fd.Recv.List[0].Type
			if st, ok := typ.(*ast.StarExpr); ok {
				typ = st.X
			}
			if ix, ok := typ.(*ast.IndexExpr); ok { // generic
				typ = ix.X
			}
			out = append(out, typ.(*ast.Ident).Name+"."+fd.Name.Name)
		}
	}
	slices.Sort(out)
	return out
}

// noPanic calls fn on a goroutine of its own and returns what it
// panicked with (nil if nothing), failing the test if it does not return
// within a few seconds.
func noPanic(t *testing.T, what string, fn func()) (panicked any) {
	t.Helper()
	done := make(chan any, 1)
	go func() {
		defer func() { done <- recover() }()
		fn()
	}()
	select {
	case p := <-done:
		if p != nil {
			t.Errorf("%s panicked: %v", what, p)
		}
		return p
	case <-time.After(10 * time.Second):
		t.Errorf("%s did not return", what)
		return nil
	}
}

// callAll calls every exported method of the value that mk returns, each
// on a fresh value, with every argument the zero value of its type: nil
// pointers, slices, maps, functions and interfaces, zero numbers, empty
// strings and structs. None may panic; when wantErr, each error result
// must be non-nil, except Close's (closing nothing is not an error). Each
// call runs on a goroutine of its own, or on the caller's when inline
// (for an Issuer, which belongs to the goroutine that made it). It
// returns "Type.Method" for each method called.
func callAll(t *testing.T, label string, wantErr, inline bool, mk func() any) []string {
	t.Helper()
	typ := reflect.TypeOf(mk())
	named := typ
	if named.Kind() == reflect.Pointer {
		named = named.Elem()
	}
	errType := reflect.TypeFor[error]()
	var called []string
	for i := range typ.NumMethod() {
		m := typ.Method(i)
		called = append(called, named.Name()+"."+m.Name)
		recv := reflect.ValueOf(mk())
		args := []reflect.Value{recv}
		for a := 1; a < m.Type.NumIn(); a++ {
			args = append(args, reflect.Zero(m.Type.In(a)))
		}
		var res []reflect.Value
		what := fmt.Sprintf("%s: %s.%s", label, named.Name(), m.Name)
		call := func() { res = m.Func.Call(args) }
		if inline {
			call = func() {
				defer func() {
					if p := recover(); p != nil {
						t.Errorf("%s panicked: %v", what, p)
						res = nil
					}
				}()
				res = m.Func.Call(args)
			}
			call()
			if res == nil {
				continue
			}
		} else if noPanic(t, what, call) != nil {
			continue
		}
		if !wantErr || m.Name == "Close" || m.Name == "Unregister" && strings.HasPrefix(label, "closed") {
			continue
		}
		for j, r := range res {
			if m.Type.Out(j) == errType && r.IsNil() {
				t.Errorf("%s returned a nil error", what)
			}
		}
	}
	return called
}

// TestNilAndZeroArguments guards the package's rule that a nil or zero
// argument gets an error, never a panic (issue 28): every exported
// function, and every exported method of every type the package hands
// out, is called with zero arguments, on nil and zero receivers and on
// live ones (on the simulator, and on GPU(nil)). The list of what it calls
// is checked against the package's source, so a new exported function or
// method fails this test until it is added here.
func TestNilAndZeroArguments(t *testing.T) {
	dev := func() *sim.Sim { return sim.New(1, 0) }
	cfg := pipeline.Float32Config(1, 1)
	cfg.ChunkElems = 64
	pipe := func(closed bool) func() any {
		return func() any {
			p, err := pipeline.New(dev(), cfg)
			require.NoError(t, err)
			if closed {
				require.NoError(t, p.Close())
			} else {
				t.Cleanup(func() { p.Close() })
			}
			return p
		}
	}
	group := func(closed bool) func() any {
		return func() any {
			h := sim.NewHost(sim.HostOptions{})
			g, err := pipeline.NewGroup([]pipeline.Backend{h.NewDevice(nil), h.NewDevice(nil)}, cfg)
			require.NoError(t, err)
			if closed {
				require.NoError(t, g.Close())
			} else {
				t.Cleanup(func() { g.Close() })
			}
			return g
		}
	}
	// must returns the first result of a call that must succeed.
	must := func(v any, err error) any {
		require.NoError(t, err)
		return v
	}
	receivers := []struct {
		label   string
		wantErr bool // every error result must be non-nil
		mk      func() any
	}{
		// (Unregister on a closed pipeline or group has nothing to drop:
		// it returns nil, as Close does.)
		{"nil", true, func() any { return (*pipeline.Pipeline)(nil) }},
		{"zero", true, func() any { return new(pipeline.Pipeline) }},
		{"live", false, pipe(false)},
		{"closed", true, pipe(true)},
		{"nil", true, func() any { return (*pipeline.Group)(nil) }},
		{"zero", true, func() any { return new(pipeline.Group) }},
		{"live", false, group(false)},
		{"closed", true, group(true)},
		{"nil", true, func() any { return (*sim.Sim)(nil) }},
		{"zero", true, func() any { return new(sim.Sim) }},
		{"live", false, func() any { return dev() }},
		{"nil", false, func() any { return (*sim.Host)(nil) }},
		{"zero", false, func() any { return new(sim.Host) }},
		{"live", false, func() any { return sim.NewHost(sim.HostOptions{}) }},
		{"nil", true, func() any { return (*sim.Profile)(nil) }},
		{"zero", true, func() any { return new(sim.Profile) }},
		{"built-in", false, func() any { return sim.BuiltinProfile() }},
		{"nil", false, func() any { return (*pipeline.StageError)(nil) }},
		{"zero", false, func() any { return new(pipeline.StageError) }},
		{"nil", false, func() any { return (*pipeline.DeviceError)(nil) }},
		{"zero", false, func() any { return new(pipeline.DeviceError) }},
		{"nil", false, func() any { return (*pipeline.StreamError)(nil) }},
		{"zero", false, func() any { return new(pipeline.StreamError) }},
		{"zero", false, func() any { return pipeline.Model{} }},
		{"zero", false, func() any { return pipeline.StageTimes{} }},
		{"zero", false, func() any { return pipeline.StageCost{} }},
		{"zero", false, func() any { return sim.Hazard{} }},
		{"zero", false, func() any { return pipeline.HostMode(0) }},
		{"unknown", false, func() any { return pipeline.HostMode(-7) }},
		{"zero", false, func() any { return pipeline.Stage(0) }},
		{"unknown", false, func() any { return pipeline.Stage(99) }},
		{"zero", false, func() any { return pipeline.Schedule(0) }},
		{"unknown", false, func() any { return pipeline.Schedule(-2) }},
		{"zero", false, func() any { return pipeline.RefKind(0) }},
		{"unknown", false, func() any { return pipeline.RefKind(99) }},
		{"ErrClosed", false, func() any { return pipeline.ErrClosed }},
		// What the simulator hands out through the interfaces.
		{"sim", false, func() any { return must(dev().NewStream()) }},
		{"sim", false, func() any { return must(dev().NewEvent(true)) }},
		{"sim", false, func() any { return must(dev().Issuer()) }},
		{"sim", false, func() any { return must(dev().AllocDevice(64)) }},
		{"sim", false, func() any { return must(dev().AllocPinned(64)) }},
		// A GPU backend of no context: every call is refused.
		{"GPU(nil)", true, func() any { return pipeline.GPU(nil) }},
	}
	covered := map[string]bool{}
	for _, r := range receivers {
		for _, m := range callAll(t, r.label, r.wantErr, false, r.mk) {
			covered[m] = true
		}
	}

	errOf := func(_ any, err error) error { return err }
	funcs := map[string]func() error{
		"New":      func() error { return errOf(pipeline.New(nil, pipeline.Config{})) },
		"NewGroup": func() error { return errOf(pipeline.NewGroup(nil, pipeline.Config{})) },
		"Synchronous": func() error {
			//lint:ignore SA1012 a nil Context is part of what this test passes
			return errOf(pipeline.Synchronous(nil, nil, pipeline.Config{}, pipeline.Job{}))
		},
		//lint:ignore SA1012 a nil Context is part of what this test passes
		"Probe": func() error { return errOf(pipeline.Probe(nil, nil, pipeline.Config{}, pipeline.Job{})) },
		"Fit":   func() error { return errOf(pipeline.Fit(nil, nil)) },
		"Pick": func() error {
			//lint:ignore SA1012 a nil Context is part of what this test passes
			return errOf(pipeline.Pick(nil, nil, pipeline.Config{}, pipeline.Job{}, pipeline.Model{}))
		},
		"FunctionOn": func() error {
			return errOf(pipeline.FunctionOn(nil, nil)(nil))
		},
		"ParseHostMode": func() error { return errOf(pipeline.ParseHostMode("")) },
		"ParseSchedule": func() error { return errOf(pipeline.ParseSchedule("")) },
		"ParseProfile":  func() error { return errOf(sim.ParseProfile(nil)) },
		"ReadProfile":   func() error { return errOf(sim.ReadProfile("")) },
		"OpenDirect":    func() error { return errOf(pipeline.OpenDirect("")) },
		"CreateDirect":  func() error { return errOf(pipeline.CreateDirect("")) },
		"Preallocate":   func() error { return errOf(pipeline.Preallocate(nil, 0, 0)) },
	}
	for name, fn := range funcs {
		covered[name] = true
		var err error
		if noPanic(t, name+" of zero arguments", func() { err = fn() }) == nil {
			assert.Error(t, err, "%s of zero arguments returned no error", name)
		}
	}
	// Functions without an error to return: they must not panic.
	quiet := map[string]func(){
		"Names": func() { pipeline.Names(nil); pipeline.Names([]pipeline.Backend{nil}) },
		"a nil *Sim as a Backend": func() {
			var dev *sim.Sim
			_, err := pipeline.New(dev, pipeline.Float32Config(1, 1))
			assert.Error(t, err)
			_, err = pipeline.NewGroup([]pipeline.Backend{dev}, pipeline.Float32Config(1, 1))
			assert.EqualError(t, err, "pipeline: device 0 of the group is a nil Backend")
		},
		"Now":           func() { pipeline.Now(nil) },
		"GPU":           func() { pipeline.GPU(nil) },
		"GPUWith":       func() { pipeline.GPUWith(nil, pipeline.GPUOptions{}) },
		"Pinned":        func() { pipeline.Pinned(nil) },
		"Slice":         func() { pipeline.Slice[float32](nil) },
		"Rows":          func() { pipeline.Rows[float32](nil, 0); pipeline.Rows[float32](nil, -1) },
		"Float32Config": func() { pipeline.Float32Config(0, 0) },
		"DefaultChunkFor": func() {
			pipeline.DefaultChunkFor(0)
			pipeline.DefaultChunkFor(-1)
		},
		"SameFile": func() { pipeline.SameFile(nil, nil) },
		"GoTogether": func() {
			pipeline.GoTogether(nil, "", 0, nil)
			pipeline.GoTogether(nil, "", 3, nil)
			pipeline.GoTogether(sim.New(1, 0), "", 3, nil)
			pipeline.GoTogether(nil, "", 1, func(int) {})
		},
		"Batches": func() {
			//lint:ignore SA1012 a nil Context is part of what this test passes
			for range pipeline.Batches[float32, float32](nil, nil, nil, nil) {
			}
		},
		"BatchesWith": func() {
			//lint:ignore SA1012 a nil Context is part of what this test passes
			for range pipeline.BatchesWith[float32, float32](nil, nil, nil, nil, pipeline.BatchOptions{}) {
			}
		},
		"BuiltinProfile": func() { sim.BuiltinProfile() },
		"NewSim":         func() { sim.New(0, 0) },
		"NewSimHost":     func() { sim.NewHost(sim.HostOptions{}) },
	}
	for name, fn := range quiet {
		covered[name] = true
		noPanic(t, name+" of zero arguments", fn)
	}

	// Everything exported is covered, but for the GPU backend's own
	// stream, event, device buffer and issuer, which need a driver: the
	// fake-driver test covers them.
	needDriver := []string{"gpuEvent.Elapsed", "gpuIssuer.CopyToDevice", "gpuIssuer.CopyToHost", "gpuIssuer.Fill32", "gpuIssuer.Launch",
		"gpuIssuer.Record", "gpuIssuer.Release", "gpuIssuer.Synchronize", "gpuIssuer.Wait"}
	// The simulator's timer heap, and Batches' reader and writer, never
	// leave the package.
	internal := []string{"timerHeap.Len", "timerHeap.Less", "timerHeap.Pop", "timerHeap.Push", "timerHeap.Swap",
		"batchReader.Read", "batchWriter.Write"}
	for _, d := range exportedDecls(t) {
		if !covered[d] && !slices.Contains(needDriver, d) && !slices.Contains(internal, d) {
			t.Errorf("%s is not called by this test: add it", d)
		}
	}
}

// TestBatchesNil guards issue 28: Batches with a nil pipeline, kernel or
// loader crashed the process, in a streaming worker goroutine. Each now
// yields one (nil, error) pair and nothing else. A nil context is
// context.Background, as it is for Run and RunStream.
func TestBatchesNil(t *testing.T) {
	p, _ := streamPipeline(t, 28, 16, 1)
	k := seedKernel(nil, streamIters)
	loader := func(yield func([]float32) bool) {
		for _, n := range []int{3, 40} {
			if !yield(make([]float32, n)) {
				return
			}
		}
	}
	for _, tc := range []struct {
		name   string
		ctx    context.Context
		p      *pipeline.Pipeline
		k      *pipeline.Kernel
		loader func(func([]float32) bool)
		want   []string
	}{
		{"nil pipeline", context.Background(), nil, k, loader, []string{"pipeline: Batches: nil *Pipeline"}},
		{"nil kernel", context.Background(), p, nil, loader, []string{"pipeline: Batches: nil *Kernel"}},
		{"nil loader", context.Background(), p, k, nil, []string{"pipeline: Batches: nil batches"}},
		{"all nil", nil, nil, nil, nil, []string{"pipeline: Batches: nil *Pipeline"}},
		{"nil context", nil, p, k, loader, []string{"3 elements", "40 elements"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			noPanic(t, tc.name, func() {
				for out, err := range pipeline.Batches[float32, float32](tc.ctx, tc.p, tc.k, tc.loader) {
					if err != nil {
						assert.Nil(t, out)
						got = append(got, err.Error())
					} else {
						got = append(got, fmt.Sprintf("%d elements", len(out)))
					}
				}
			})
			assert.Equal(t, tc.want, got)
		})
	}
}
