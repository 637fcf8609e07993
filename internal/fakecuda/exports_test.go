package fakecuda

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// export is one row of zexports.h.
type export struct {
	plain, fn string
	args      int
}

var exportRE = regexp.MustCompile(`(?m)^E\("(\w+)", (\w+), (\d+)\),$`)

// exportRows parses zexports.h.
func exportRows(h string) []export {
	var out []export
	for _, m := range exportRE.FindAllStringSubmatch(h, -1) {
		n, _ := strconv.Atoi(m[3])
		out = append(out, export{m[1], m[2], n})
	}
	return out
}

var (
	definitionRE = regexp.MustCompile(`(?m)^CUresult (\w+)\(([^)]*)\)\s*\{`)
	lackRE       = regexp.MustCompile(`(?m)^#define (\w+) NULL$`)
)

// cDefinitions returns the number of parameters of each CUresult function
// that src defines, and the entry points it lacks on purpose (#define as
// NULL).
func cDefinitions(src string) (defs map[string]int, lacks map[string]bool) {
	defs, lacks = map[string]int{}, map[string]bool{}
	for _, m := range definitionRE.FindAllStringSubmatch(src, -1) {
		params := strings.TrimSpace(m[2])
		n := 0
		if params != "" && params != "void" {
			n = strings.Count(params, ",") + 1
		}
		defs[m[1]] = n
	}
	for _, m := range lackRE.FindAllStringSubmatch(src, -1) {
		lacks[m[1]] = true
	}
	return defs, lacks
}

func TestCDefinitions(t *testing.T) {
	src := "CUresult cuA(void) {\nCUresult cuB(handle_t s, int n,\n             size_t k) {\n" +
		"static CUresult helper(int x) {\nCUresult cuC(const char *p) {\n#define cuD NULL\n"
	defs, lacks := cDefinitions(src)
	assert.Equal(t, map[string]int{"cuA": 0, "cuB": 3, "cuC": 1}, defs)
	assert.Equal(t, map[string]bool{"cuD": true}, lacks)
	assert.Equal(t, []export{{"cuA", "cuA_v2", 2}}, exportRows("/* E(\"x\", y, 1), */\nE(\"cuA\", cuA_v2, 2),\n"))
}

// structByValue lists the entry points that take a struct wider than a
// register by value, with their C parameter counts: their prototypes pass
// the struct as the argument words the ABI puts it in (driver/ipc.go), so
// they name more parameters than the C definitions.
var structByValue = map[string]int{"cuIpcOpenMemHandle_v2": 3, "cuIpcOpenEventHandle": 2}

// TestExports checks the fake's C source against the entry points package
// driver binds (zexports.h, generated from driver/prototypes.go): each is
// defined under its export name with as many parameters as its prototype,
// or lacked on purpose; libcuda.c's table of cuGetProcAddress_v2 is the
// generated list. The C compiler checks the names too, where there is one;
// this test needs none.
func TestExports(t *testing.T) {
	h, err := os.ReadFile("src/zexports.h")
	require.NoError(t, err)
	c, err := os.ReadFile("src/libcuda.c")
	require.NoError(t, err)
	// The family files libcuda.c includes define entry points too.
	for _, m := range regexp.MustCompile(`(?m)^#include "(\w+\.c)"$`).FindAllStringSubmatch(string(c), -1) {
		fam, err := os.ReadFile("src/" + m[1])
		require.NoError(t, err)
		c = append(append(c, '\n'), fam...)
	}
	rows := exportRows(string(h))
	require.NotEmpty(t, rows)
	assert.Equal(t, strings.Count(string(h), "\nE("), len(rows), "every E line of zexports.h parses")
	assert.Contains(t, string(c), "static const struct entry entries[] = {\n#include \"zexports.h\"\n};")
	// The family files that libcuda.c includes define entry points too.
	all := string(c)
	for _, m := range regexp.MustCompile(`(?m)^#include "(\w+\.c)"$`).FindAllStringSubmatch(all, -1) {
		f, err := os.ReadFile("src/" + m[1])
		require.NoError(t, err)
		all += "\n" + string(f)
	}
	defs, lacks := cDefinitions(all)
	for _, e := range rows {
		if lacks[e.fn] {
			_, defined := defs[e.fn]
			assert.False(t, defined, "%s is both defined and lacked", e.fn)
			continue
		}
		n, ok := defs[e.fn]
		if assert.True(t, ok, "libcuda.c does not define %s (%s), nor #define it as NULL", e.fn, e.plain) {
			if c, ok := structByValue[e.fn]; ok {
				assert.Equal(t, c, n, "%s: C parameters in libcuda.c", e.fn)
				continue
			}
			assert.Equal(t, e.args, n, "%s: parameters in libcuda.c", e.fn)
		}
	}
	// The entry points the fake lacks on purpose, which tests of the
	// missing-symbol path rely on (driver's WaitModes case).
	assert.Equal(t, map[string]bool{"cuDevicePrimaryCtxGetState": true, "cuDevicePrimaryCtxSetFlags_v2": true}, lacks)
}
