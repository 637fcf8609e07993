package driver

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The reliability audit's finding 3: methods panicked on nil and zero
// receivers ((*Context)(nil).OpenObjects(), .Device(), .Handle(),
// (&Context{}).OpenObjects(), (*HostBuffer)(nil).Options(), and more).
// TestNilAndZeroReceivers calls every exported method of every exported
// type of the package, through reflection over its method set, on a nil
// and on a zero receiver with zero arguments (nil pointers, nil
// interfaces and functions, zero numbers and structs). None may panic. A
// method that returns an error must return one, but Close, which is nil
// on nil as on a second Close (and Error.Unwrap, which has nothing to
// unwrap). On a nil receiver, a method without an
// error returns zero values (a pure accessor's documented zero value),
// but those listed in nilNonZero. TestExportedAPICovered fails when an
// exported type or function is missing from the tables below, so that a
// new one cannot escape this test.

// receivers holds a nil (for pointer types) and a zero value of every
// exported type that has exported methods.
var receivers = []any{
	(*Args)(nil), (*Bound)(nil), (*Context)(nil), (*DeviceBuffer)(nil), (*Error)(nil),
	(*Event)(nil), (*Function)(nil), (*Graph)(nil), (*GraphExec)(nil), (*HostBuffer)(nil),
	(*HostRegistration)(nil), (*MemPool)(nil), (*Module)(nil), (*Stream)(nil),
	(*Kernel)(nil), (*Library)(nil), (*Linker)(nil),
	Device{}, ImageKind(0), Result(0), Wait(0),
	(*ManagedBuffer)(nil), Location{},
}

// zeroOK lists the methods that succeed on a zero (not nil) receiver: the
// zero Args is ready to use, and SetParams only records a layout in Go.
var zeroOK = map[string]bool{
	"Function.SetParams": true,
	"Args.Buffer":        true, "Args.Err": true, "Args.Float32": true, "Args.Float64": true,
	"Args.Int32": true, "Args.Int64": true, "Args.Layout": true, "Args.Len": true,
	"Args.Pointer": true, "Args.Raw": true, "Args.Reset": true, "Args.Uint32": true,
	"Args.Uint64": true,
}

// nilNonZero lists the methods whose result on a nil receiver is not the
// zero value, with what they return.
var nilNonZero = map[string][]any{
	"Error.Error": {"cuda: <nil *Error>"},
}

// packageFuncs calls every exported function of the package with zero
// arguments (or the zero-ish ones a generic function needs).
var packageFuncs = map[string]func() []any{
	"Bytes":                func() []any { return []any{Bytes[float32](nil)} },
	"View":                 func() []any { return []any{View[float32](nil)} },
	"DeviceCount":          func() []any { n, err := DeviceCount(); return []any{n, err} },
	"DeviceAt":             func() []any { d, err := DeviceAt(-1); return []any{d, err} },
	"DirectCallsAvailable": func() []any { return []any{DirectCallsAvailable()} },
	"DriverVersion":        func() []any { v, err := DriverVersion(); return []any{v, err} },
	"LibraryPath":          func() []any { return []any{LibraryPath()} },
	"Load":                 func() []any { return []any{Load()} },
	"NewArgs":              func() []any { return []any{NewArgs()} },
	"NewContext":           func() []any { c, err := NewContext(Device{}); return []any{c, err} },
	"NewContextWith": func() []any {
		c, err := NewContextWith(Device{}, ContextOptions{})
		return []any{c, err}
	},
	"DetectImage": func() []any { return []any{DetectImage(nil)} },
	"CheckImage":  func() []any { k, err := CheckImage(nil); return []any{k, err} },
	"LoadLibrary": func() []any { l, err := LoadLibrary(nil, ModuleOptions{}); return []any{l, err} },
	"GridFor":     func() []any { return []any{GridFor(0, 0)} },
	"ParseWait":   func() []any { w, err := ParseWait(""); return []any{w, err} },
}

// mustFail lists the package functions that must return an error on their
// zero arguments (those that need a driver may fail for want of one too).
var mustFail = map[string]bool{"DeviceAt": true, "NewContext": true, "NewContextWith": true, "ParseWait": true,
	"CheckImage": true, "LoadLibrary": true}

// callZero calls m with zero arguments and returns its results, or the
// panic it raised.
func callZero(m reflect.Value) (out []reflect.Value, panicked any) {
	t := m.Type()
	in := make([]reflect.Value, 0, t.NumIn())
	for i := range t.NumIn() {
		if t.IsVariadic() && i == t.NumIn()-1 {
			break
		}
		in = append(in, reflect.Zero(t.In(i)))
	}
	defer func() { panicked = recover() }()
	return m.Call(in), nil
}

var errorType = reflect.TypeFor[error]()

func typeName(t reflect.Type) string {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Name()
}

func TestNilAndZeroReceivers(t *testing.T) {
	for _, r := range receivers {
		rt := reflect.TypeOf(r)
		kinds := []struct {
			what string
			v    reflect.Value
		}{{"zero", reflect.Zero(rt)}}
		if rt.Kind() == reflect.Pointer {
			kinds = []struct {
				what string
				v    reflect.Value
			}{{"nil", reflect.Zero(rt)}, {"zero", reflect.New(rt.Elem())}}
		}
		for _, k := range kinds {
			for i := range rt.NumMethod() {
				name := typeName(rt) + "." + rt.Method(i).Name
				t.Run(k.what+"/"+name, func(t *testing.T) {
					out, p := callZero(k.v.Method(i))
					require.Nil(t, p, "%s on a %s receiver panicked", name, k.what)
					mt := rt.Method(i).Type
					last := mt.NumOut() - 1
					if last >= 0 && mt.Out(last) == errorType {
						err, _ := out[last].Interface().(error)
						switch {
						case rt.Method(i).Name == "Close" || name == "Error.Unwrap" && k.what == "nil":
							assert.NoError(t, err, "%s on a %s receiver", name, k.what)
						case name == "Error.Unwrap": // a zero Error's Result, 0
						case k.what == "zero" && zeroOK[name]:
						default:
							assert.Error(t, err, "%s on a %s receiver", name, k.what)
							assertNames(t, err, name)
						}
						return
					}
					if k.what != "nil" {
						return
					}
					want, special := nilNonZero[name]
					for j, o := range out {
						if special {
							assert.Equal(t, want[j], o.Interface(), "%s on nil: result %d", name, j)
						} else {
							assert.True(t, o.IsZero(), "%s on nil: result %d is %v, not the zero value", name, j, o)
						}
					}
				})
			}
		}
	}
	for name, call := range packageFuncs {
		t.Run("func/"+name, func(t *testing.T) {
			var out []any
			require.NotPanics(t, func() { out = call() }, name)
			if mustFail[name] {
				err, _ := out[len(out)-1].(error)
				assert.Error(t, err, "%s on zero arguments", name)
				assertNames(t, err, name)
			}
		})
	}
}

// assertNames checks the rule of doc.go's Errors section: an error of the
// binding's own, from a call on nil or zero values, reads "cuda: Op: ..."
// with op the method (Type.Method) or function called, and says "cuda:"
// once. An error from the loader (no driver here) is the loader's own.
func assertNames(t *testing.T, err error, op string) {
	t.Helper()
	if err == nil || strings.HasPrefix(err.Error(), "loader: ") {
		return
	}
	assert.True(t, strings.HasPrefix(err.Error(), "cuda: "+op+": "), "%s: the error does not name it: %v", op, err)
	assert.Equal(t, 1, strings.Count(err.Error(), "cuda:"), "%s: the error says cuda: more than once: %v", op, err)
}

// A few values beyond the zero ones that a method must not panic on.
func TestOutOfRangeValues(t *testing.T) {
	assert.Equal(t, "ImageKind(7)", ImageKind(7).String())
	assert.Equal(t, "ImageKind(-1)", ImageKind(-1).String())
	assert.Equal(t, "Wait(9)", Wait(9).String())
	assert.NotEmpty(t, Result(-5).Error())
	var e *Error
	assert.Nil(t, e.Unwrap())
	var a *Args
	assert.Nil(t, a.Reset().Int32(1).Pointer(1).Raw([]byte{1}, 1))
	assert.ErrorIs(t, a.Err(), ErrInvalidArgument)
}

// TestExportedAPICovered reads the package's source and fails when an
// exported type with exported methods is missing from receivers, or an
// exported function from packageFuncs.
func TestExportedAPICovered(t *testing.T) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	require.NoError(t, err)
	var files []*ast.File
	for _, e := range entries {
		if name := e.Name(); strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") {
			f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
			require.NoError(t, err)
			files = append(files, f)
		}
	}
	require.NotEmpty(t, files)
	have := map[string]bool{}
	for _, r := range receivers {
		have[typeName(reflect.TypeOf(r))] = true
	}
	var missing []string
	{
		for _, f := range files {
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok || !fd.Name.IsExported() {
					continue
				}
				if fd.Recv == nil {
					if _, ok := packageFuncs[fd.Name.Name]; !ok {
						missing = append(missing, "func "+fd.Name.Name)
					}
					continue
				}
				rt := fd.Recv.List[0].Type
				if s, ok := rt.(*ast.StarExpr); ok {
					rt = s.X
				}
				id, ok := rt.(*ast.Ident)
				if !ok {
					missing = append(missing, fmt.Sprintf("method %s of an unexpected receiver", fd.Name.Name))
					continue
				}
				if ast.IsExported(id.Name) && !have[id.Name] {
					missing = append(missing, "type "+id.Name+" (method "+fd.Name.Name+")")
				}
			}
		}
	}
	sort.Strings(missing)
	assert.Empty(t, missing, "exported API that TestNilAndZeroReceivers does not call: add it to receivers or packageFuncs")
}
