package ptx

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/purecuda/overlap/driver"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pi builds a ParamInfo.
func pi(off, size int) driver.ParamInfo { return driver.ParamInfo{Offset: off, Size: size} }

func TestParseHandwritten(t *testing.T) {
	src, err := os.ReadFile("testdata/handwritten.ptx")
	require.NoError(t, err)
	f, err := Parse(src)
	require.NoError(t, err)
	assert.Equal(t, Version{7, 8}, f.Version)
	assert.Equal(t, []string{"sm_80", "debug"}, f.Targets)
	assert.Equal(t, "sm_80", f.Target())
	assert.Equal(t, []string{"helper_decl", "twice"}, f.Funcs)
	require.Equal(t, []string{"mixed", "no_params"}, f.EntryNames())
	mixed := f.Entries[0]
	assert.Equal(t, []Param{
		{Name: "out", Type: ".u64", Size: 8, Align: 8, PointeeAlign: 4},
		{Name: "config", Type: ".b8", Size: 24, Align: 8},
		{Name: "alpha", Type: ".f64", Size: 8, Align: 8},
		{Name: "small", Type: ".u16", Size: 2, Align: 2},
	}, mixed.Params)
	assert.Equal(t, []driver.ParamInfo{pi(0, 8), pi(8, 24), pi(32, 8), pi(40, 2)}, Layout(mixed.Params))
	assert.Equal(t, 22, mixed.Line)
	assert.Empty(t, f.Entries[1].Params)
}

func TestParseBadInput(t *testing.T) {
	good := string(readFile(t, "testdata/nvcc/scale.ptx"))
	cases := []struct {
		name, src, want string
	}{
		{"empty", "", "ptx: line 1: empty PTX"},
		{"whitespace", " \n\t\n", "ptx: line 1: empty PTX"},
		{"binary garbage", "\x7fELF\x02\x01\x01\x00\x00\x00junk", "ptx: line 1: NUL byte at offset 7: binary data, not PTX text"},
		{"invalid utf8", "\xff\xfe.version 7.0", "ptx: line 1: not UTF-8 text: binary data, not PTX"},
		{"no version", ".target sm_75\n", `ptx: line 1: PTX must begin with a .version directive, found ".target"`},
		{"bad version", ".version seven\n", `ptx: line 1: expected a version number such as 7.0, found "seven"`},
		{"malformed version", ".version 7\n", `ptx: line 1: malformed version "7"`},
		{"no target", ".version 7.0\n.address_size 64\n", "ptx: line 3: missing .target directive"},
		{"bad address size", ".version 7.0\n.target sm_75\n.address_size 48\n", `ptx: line 3: address size must be 32 or 64, found "48"`},
		{"truncated", good[:len(good)/2], "body opened here is never closed (truncated PTX?)"},
		{"unclosed comment", ".version 7.0\n/* oops\n", "ptx: line 2: comment opened on line 2 is never closed"},
		{"param without type", ".version 7.0\n.target sm_75\n.entry k(.param x)\n{ret;}\n", "ptx: line 3: parameter has no type"},
		{"duplicate entry", ".version 7.0\n.target sm_75\n.entry k()\n{ret;}\n.entry k()\n{ret;}\n", "ptx: line 5: entry k defined twice"},
		{"stray", ".version 7.0\n.target sm_75\nadd.s32 %r1, %r2, %r3;\n", `ptx: line 3: unexpected "add" at top level`},
		{"unbalanced", ".version 7.0\n.target sm_75\n.global .u32 x = };\n", "ptx: line 3: unbalanced '}'"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse([]byte(tc.src))
			require.Error(t, err)
			assert.Nil(t, f)
			assert.Contains(t, err.Error(), tc.want)
			var se *SyntaxError
			assert.True(t, errors.As(err, &se))
		})
	}
}

func TestParseNoEntryIsNotASyntaxError(t *testing.T) {
	f, err := Parse([]byte(".version 7.0\n.target sm_75\n.func f()\n{\nret;\n}\n"))
	require.NoError(t, err)
	assert.Empty(t, f.Entries)
	err = noEntryError("x.ptx", "main", f)
	assert.ErrorIs(t, err, ErrNoEntry)
	assert.EqualError(t, err, `ptx: no such entry: x.ptx defines no .entry (kernel) at all, so "main" cannot be launched`)
	f, _ = Parse(readFile(t, "testdata/nvcc/scale.ptx"))
	assert.EqualError(t, noEntryError("scale.ptx", "sacle", f), `ptx: no such entry: scale.ptx has no entry "sacle"; its entries are: scale`)
}

func TestParseHugeJunk(t *testing.T) {
	junk := bytes.Repeat([]byte("junk "), 100<<20/5) // 100 MB
	_, err := Parse(junk)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "PTX must begin with a .version directive")
	_, err = Parse(make([]byte, maxParseSize+1))
	assert.Error(t, err)
}

func TestMaxISA(t *testing.T) {
	for cuda, want := range map[int]Version{11000: {7, 0}, 12000: {8, 0}, 12040: {8, 4}, 12060: {8, 5}, 12080: {8, 7}, 13000: {9, 0}} {
		got, ok := MaxISA(cuda)
		assert.True(t, ok)
		assert.Equal(t, want, got, "CUDA %d", cuda)
	}
	_, ok := MaxISA(14000)
	assert.False(t, ok, "a newer driver than the table is not second-guessed")
	n, ok := smNumber("sm_90a")
	assert.True(t, ok)
	assert.Equal(t, 90, n)
	_, ok = smNumber("compute_90")
	assert.False(t, ok)
}

func FuzzParse(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/nvcc/*.ptx")
	for _, name := range append(seeds, "testdata/handwritten.ptx") {
		if src, err := os.ReadFile(name); err == nil {
			f.Add(src)
		}
	}
	f.Add([]byte(".version 7.0\n.target sm_75\n.entry k(.param .align 8 .b8 s[16])\n{\nret;\n}\n"))
	f.Add([]byte(""))
	f.Add([]byte("\x00\x01"))
	f.Fuzz(func(t *testing.T, src []byte) {
		file, err := Parse(src)
		if err == nil {
			for _, e := range file.Entries {
				for _, p := range e.Params {
					if p.Size <= 0 || p.Align <= 0 {
						t.Fatalf("entry %s: param %+v has no size or alignment", e.Name, p)
					}
				}
				Layout(e.Params)
			}
		}
	})
}

func readFile(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	require.NoError(t, err)
	return b
}

// TestParseNvccFixtures reads PTX exactly as nvcc 13 writes it, plain and
// with -lineinfo and -G (".file", ".loc", ".section .debug_* { ... }",
// ".target sm_75, debug"). Issue 10: the parser refused the last three
// with "unexpected end of file inside a declaration".
func TestParseNvccFixtures(t *testing.T) {
	scale := []Param{
		{Name: "scale_param_0", Type: ".u64", Size: 8, Align: 8},
		{Name: "scale_param_1", Type: ".u64", Size: 8, Align: 8},
		{Name: "scale_param_2", Type: ".f32", Size: 4, Align: 4},
		{Name: "scale_param_3", Type: ".u32", Size: 4, Align: 4},
	}
	cases := []struct {
		file    string
		targets []string
		entries []string
		funcs   []string
	}{
		{"scale.ptx", []string{"sm_75"}, []string{"scale"}, nil},
		{"scale_lineinfo.ptx", []string{"sm_75"}, []string{"scale"}, nil},
		{"scale_debug.ptx", []string{"sm_75", "debug"}, []string{"scale"}, nil},
		{"multi_debug.ptx", []string{"sm_75", "debug"}, []string{"add", "double_it", "with_struct"}, []string{"_Z5twicef"}},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			f, err := Parse(readFile(t, "testdata/nvcc/"+tc.file))
			require.NoError(t, err)
			assert.Equal(t, Version{9, 0}, f.Version)
			assert.Equal(t, tc.targets, f.Targets)
			assert.Equal(t, "sm_75", f.Target())
			assert.Equal(t, 64, f.AddressSize)
			assert.Equal(t, tc.entries, f.EntryNames())
			assert.Equal(t, tc.funcs, f.Funcs)
			if tc.entries[0] == "scale" {
				assert.Equal(t, scale, f.Entries[0].Params)
				assert.Equal(t, []driver.ParamInfo{pi(0, 8), pi(8, 8), pi(16, 4), pi(20, 4)}, Layout(f.Entries[0].Params))
			}
		})
	}
	t.Run("with_struct", func(t *testing.T) {
		f, err := Parse(readFile(t, "testdata/nvcc/multi_debug.ptx"))
		require.NoError(t, err)
		e, ok := f.Entry("with_struct")
		require.True(t, ok)
		assert.Equal(t, []driver.ParamInfo{pi(0, 8), pi(8, 8), pi(16, 4)}, Layout(e.Params))
	})
}

// TestParseDebugDirectives covers the debug directives' shapes one by one,
// and their malformed forms.
func TestParseDebugDirectives(t *testing.T) {
	const head = ".version 9.0\n.target sm_75, debug\n.address_size 64\n"
	const body = ".visible .entry k(.param .u32 n)\n{\n\t.loc 1 3 0\n\tret;\n}\n"
	good := map[string]string{
		"file with timestamp and size": head + body + ".file 1 \"/src/k.cu\", 1700000000, 1234\n",
		"file then section":            head + body + ".file 1 \"k.cu\"\n.section .debug_abbrev\n{\n.b8 1\n.b8 17\n}\n",
		"loc at top level":             head + ".loc 1 2 3\n" + body,
		"loc with inlined_at":          head + ".loc 1 5 5, function_name $L__info_string0, inlined_at 1 9 1\n" + body,
		"file before the entry":        head + ".file 1 \"k.cu\"\n" + body,
		"several sections":             head + body + ".section .debug_info\n{\n.b32 294\n.b64 $L__func_begin0\n}\n.section .debug_macinfo\n{\n.b8 0\n}\n",
	}
	for name, src := range good {
		t.Run(name, func(t *testing.T) {
			f, err := Parse([]byte(src))
			require.NoError(t, err)
			assert.Equal(t, []string{"k"}, f.EntryNames())
		})
	}
	bad := []struct{ name, src, want string }{
		{"file without index", head + ".file \"k.cu\"\n", `ptx: line 4: expected a file index after .file, found "\"k.cu\""`},
		{"file without name", head + ".file 1\n" + body, `ptx: line 5: expected a file name after .file, found ".visible"`},
		{"loc too short", head + ".loc 1 2\n" + body, `ptx: line 5: .loc needs a file index, a line and a column, found ".visible"`},
		{"section without body", head + ".section .debug_info\n", "ptx: line 5: expected '{' to open the section, found end of file"},
		{"section never closed", head + ".section .debug_info\n{\n.b8 1\n", "ptx: line 5: body opened here is never closed (truncated PTX?)"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.src))
			assert.EqualError(t, err, tc.want)
		})
	}
}

// TestPointerParamAlignment checks ".ptr .align N" against the PTX ISA
// (Kernel Function Parameter Attributes): N is the alignment of the memory
// pointed to, not of the parameter, which stays at its type's. Issue 10:
// the parameter was laid out at N.
func TestPointerParamAlignment(t *testing.T) {
	cases := []struct {
		params  string
		want    []driver.ParamInfo
		pointee []int
	}{
		{".param .u32 n, .param .u64 .ptr .global .align 16 p", []driver.ParamInfo{pi(0, 4), pi(8, 8)}, []int{0, 16}},
		{".param .u32 n, .param .u64 .ptr .align 4 p", []driver.ParamInfo{pi(0, 4), pi(8, 8)}, []int{0, 4}},
		{".param .u32 n, .param .u32 .ptr .shared .align 64 p", []driver.ParamInfo{pi(0, 4), pi(4, 4)}, []int{0, 64}},
		{".param .u32 n, .param .align 16 .b8 s[8]", []driver.ParamInfo{pi(0, 4), pi(16, 8)}, []int{0, 0}},
		{".param .u8 c, .param .u64 .ptr .global p, .param .f32 x", []driver.ParamInfo{pi(0, 1), pi(8, 8), pi(16, 4)}, []int{0, 0, 0}},
	}
	for _, tc := range cases {
		t.Run(tc.params, func(t *testing.T) {
			f, err := Parse([]byte(".version 7.0\n.target sm_75\n.entry k(" + tc.params + ")\n{\nret;\n}\n"))
			require.NoError(t, err)
			ps := f.Entries[0].Params
			assert.Equal(t, tc.want, Layout(ps))
			for i, p := range ps {
				assert.Equal(t, tc.pointee[i], p.PointeeAlign, p.Name)
			}
		})
	}
}
