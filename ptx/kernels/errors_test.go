package kernels

import (
	"regexp"
	"strings"
	"testing"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/ptx"
	"github.com/stretchr/testify/assert"
)

// word matches the package word where an error's text can hold it: at
// the start or after a colon (not in a file name such as k.ptx).
var word = regexp.MustCompile(`(^|: )ptx: `)

// TestErrorsSayPtxOnce walks representative errors of the package and of
// package ptx, which it wraps, and fails on any that says "ptx:" more than
// once or, where the driver's error is inside, "cuda:" more than once.
func TestErrorsSayPtxOnce(t *testing.T) {
	var closed Modules
	_ = closed.Close()
	_, closedErr := closed.Program(&driver.Context{}, Seed)
	_, nilCtx := closed.Function(nil, Seed)
	var gm *GemmModules
	_, nilGemm := gm.Functions(nil)
	_, byName := ByName("fft")
	_, contract := Gemm.Contract("nope")
	_, scalars := Saxpy.Pipeline(nil, 1, 2, 3)
	_, parseErr := ptx.Parse(nil)
	_, fileErr := ptx.LoadFile(nil, "/nonexistent/k.ptx", "k", driver.ModuleOptions{})
	errs := []error{
		closedErr, nilCtx, nilGemm, byName, contract, scalars, parseErr, fileErr,
		Gemm.F32.Check(0, 1, 1), GemmContract{}.Check(1, 1, 1),
		Seed.CPU(nil, nil), Seed.Verify(nil, make([]float32, 1)),
	}
	for i, err := range errs {
		if !assert.Error(t, err, "error %d", i) {
			continue
		}
		s := err.Error()
		assert.True(t, strings.HasPrefix(s, "ptx: "), "error %d does not start with ptx: %v", i, s)
		assert.Len(t, word.FindAllString(s, -1), 1, "error %d says ptx: more than once: %v", i, s)
		assert.LessOrEqual(t, strings.Count(s, "cuda:"), 1, "error %d says cuda: more than once: %v", i, s)
	}
}
