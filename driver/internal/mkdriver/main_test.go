package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseErrors(t *testing.T) {
	cases := []struct{ line, err string }{
		{"//cuda cuX(a uintptr) cuX 2000", `prototypes.go:1: want //cuda NAME(PARAMS) = EXPORT VERSION [MARK], got "//cuda cuX(a uintptr) cuX 2000"`},
		{"//cuda memAlloc(a uintptr) = memAlloc 2000", "prototypes.go:1: memAlloc: a driver entry point's name starts with cu"},
		{"//cuda cuMemAlloc(a uintptr) = cuMemFree_v2 3020", "prototypes.go:1: cuMemAlloc: export cuMemFree_v2 must extend the name"},
		{"//cuda cuX(a uintptr) = cuX 1000", "prototypes.go:1: cuX: version 1000: want 1000*major + 10*minor, 2000 or later"},
		{"//cuda cuX(a uintptr) = cuX 3025", "prototypes.go:1: cuX: version 3025: want 1000*major + 10*minor, 2000 or later"},
		{"//cuda cuX(a uintptr) = cuX 2000 fast", `prototypes.go:1: cuX: unknown mark "fast": want hot, direct, raw or nowrap`},
		{"//cuda cuX(a uintptr,, b) = cuX 2000", `prototypes.go:1: cuX: parameters "a uintptr,, b" do not parse as Go parameters`},
		{"//cuda cuX(uintptr) = cuX 2000", "prototypes.go:1: cuX: parameter of type uintptr has no name"},
		{"//cuda cuX(s string) = cuX 2000", "prototypes.go:1: cuX: parameter type string: want uintptr, a pointer, unsafe.Pointer or an integer type known to mkdriver"},
		{"//cuda cuX(sc uintptr) = cuX 2000 hot", "prototypes.go:1: cuX: parameter name sc is the wrapper's own"},
		{"//cuda cuX(a, b, c, d, e, f, g, h, i, j, k, l uintptr) = cuX 2000 direct", "prototypes.go:1: cuX: 12 parameters: a direct call takes at most 11"},
		{"//cuda cuX() = cuX 2000\n//cuda cuX() = cuX 2000", "prototypes.go:2: cuX already declared on line 1"},
		{"// no prototypes", "prototypes.go: no //cuda lines"},
	}
	for _, tc := range cases {
		t.Run(tc.line, func(t *testing.T) {
			_, err := parse(tc.line)
			assert.EqualError(t, err, tc.err)
		})
	}
}

func TestParse(t *testing.T) {
	ps, err := parse("package driver\n\n// A comment.\n" +
		"//cuda cuMemAlloc(dptr *DevicePtr, bytesize uintptr) = cuMemAlloc_v2 3020\n" +
		"//cuda cuLaunch(f uintptr, gx, gy uint32, p *unsafe.Pointer) = cuLaunch 4000 direct  \n")
	require.NoError(t, err)
	require.Len(t, ps, 2)
	assert.Equal(t, proto{line: 4, name: "cuMemAlloc", export: "cuMemAlloc_v2", version: 3020,
		params: []param{{"dptr", "*DevicePtr"}, {"bytesize", "uintptr"}}}, *ps[0])
	assert.Equal(t, proto{line: 5, name: "cuLaunch", export: "cuLaunch", version: 4000, mark: "direct",
		params: []param{{"f", "uintptr"}, {"gx", "uint32"}, {"gy", "uint32"}, {"p", "*unsafe.Pointer"}}}, *ps[1])
	assert.Equal(t, "symMemAlloc", ps[0].symID())
}

// TestGenerate checks each mark's wrapper, the table and the fake's list
// for a small prototype list.
func TestGenerate(t *testing.T) {
	files, err := generate(`
//cuda cuInit(flags uint32) = cuInit 2000 raw
//cuda cuDriverGetVersion(v *int32) = cuDriverGetVersion 2020 nowrap
//cuda cuMemFree(dptr DevicePtr) = cuMemFree_v2 3020
//cuda cuCtxSynchronize() = cuCtxSynchronize 2000
//cuda cuStreamQuery(hStream uintptr) = cuStreamQuery 2000 hot
//cuda cuEventRecord(hEvent uintptr, hStream uintptr) = cuEventRecord 2000 direct
`)
	require.NoError(t, err)
	assert.Equal(t, header+`package driver

import "github.com/purecuda/overlap/loader"

// The symID of each entry point in prototypes.go, in its order.
const (
	symInit symID = iota
	symDriverGetVersion
	symMemFree
	symCtxSynchronize
	symStreamQuery
	symEventRecord
	numSymbols
)

// symbols is the symbol table, one row per line of prototypes.go.
var symbols = [numSymbols]symbol{
	symInit:             {loader.Symbol{Name: "cuInit", Version: 2000, Export: "cuInit"}, 1, false},
	symDriverGetVersion: {loader.Symbol{Name: "cuDriverGetVersion", Version: 2020, Export: "cuDriverGetVersion"}, 1, false},
	symMemFree:          {loader.Symbol{Name: "cuMemFree", Version: 3020, Export: "cuMemFree_v2"}, 1, false},
	symCtxSynchronize:   {loader.Symbol{Name: "cuCtxSynchronize", Version: 2000, Export: "cuCtxSynchronize"}, 0, false},
	symStreamQuery:      {loader.Symbol{Name: "cuStreamQuery", Version: 2000, Export: "cuStreamQuery"}, 1, false},
	symEventRecord:      {loader.Symbol{Name: "cuEventRecord", Version: 2000, Export: "cuEventRecord"}, 2, true},
}
`, string(files[symbolsFile]))
	assert.Equal(t, header+`package driver

// The typed wrappers of the driver's entry points, one per line of
// prototypes.go: every conversion of a driver call's arguments to uintptr
// is here.

// cuInit calls cuInit at entry and returns its CUresult unchecked.
func cuInit(entry uintptr, flags uint32) Result {
	return syscallN(entry, uintptr(flags))
}

// cuMemFree calls cuMemFree_v2.
func cuMemFree(dptr DevicePtr) error {
	return call(symMemFree, uintptr(dptr))
}

// cuCtxSynchronize calls cuCtxSynchronize.
func cuCtxSynchronize() error {
	return call(symCtxSynchronize)
}

// cuStreamQuery calls cuStreamQuery with sc's argument block.
func cuStreamQuery(sc *scratch, hStream uintptr) error {
	sc.args = [11]uintptr{hStream}
	return callScratch(symStreamQuery, sc, 1)
}

// cuEventRecord calls cuEventRecord with sc's argument block,
// directly when direct is set.
func cuEventRecord(sc *scratch, direct bool, hEvent uintptr, hStream uintptr) error {
	sc.args = [11]uintptr{hEvent, hStream}
	return callScratchOn(symEventRecord, sc, 2, direct)
}
`, string(files[callsFile]))
	assert.Contains(t, string(files[exportsFile]), `
E("cuInit", cuInit, 1),
E("cuDriverGetVersion", cuDriverGetVersion, 1),
E("cuMemFree", cuMemFree_v2, 1),
E("cuCtxSynchronize", cuCtxSynchronize, 0),
E("cuStreamQuery", cuStreamQuery, 1),
E("cuEventRecord", cuEventRecord, 2),
`)
}

// TestUpToDate fails when the generated files in package driver differ
// from what prototypes.go gives: run go generate ./driver.
func TestUpToDate(t *testing.T) {
	assert.NoError(t, run("../..", true))
}
