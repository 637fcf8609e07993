package model

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// file assembles a safetensors file from a header and data, with the
// header's true length.
func file(header string, data []byte) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	return append(append(b, header...), data...)
}

// f32s is the little-endian bytes of vs.
func f32s(vs ...float32) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return b
}

func readBytes(b []byte) (*File, error) { return ReadSafetensors(bytes.NewReader(b), int64(len(b))) }

// TestTinyTestdata reads testdata/tiny.safetensors, which tiny.py writes
// by the format's rules with Python's standard library alone: the
// tensors, their order and the metadata, and this package's writer gives
// the same bytes.
func TestTinyTestdata(t *testing.T) {
	raw, err := os.ReadFile("testdata/tiny.safetensors")
	require.NoError(t, err)
	f, err := readBytes(raw)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"activation": "relu", "format": "pt"}, f.Metadata)
	var names []string
	for _, t := range f.Tensors {
		names = append(names, t.Name)
	}
	assert.Equal(t, []string{"0.bias", "0.weight", "2.bias", "2.weight"}, names, "in the order of their data")
	w, ok := f.Tensor("0.weight")
	require.True(t, ok)
	assert.Equal(t, Tensor{Name: "0.weight", DType: "F32", Shape: []int{4, 3},
		Data: []float32{0.5, -0.25, 1, -1, 0.75, 0.125, 0.25, 0.25, -0.5, 2, -1.5, 0.375}}, *w)
	b, _ := f.Tensor("2.bias")
	assert.Equal(t, []float32{-0.25, 0.5}, b.Data)

	var out bytes.Buffer
	require.NoError(t, WriteSafetensors(&out, f.Tensors, f.Metadata))
	assert.Equal(t, raw, out.Bytes(), "WriteSafetensors lays the file out as tiny.py does")
}

func TestReadSafetensorsDTypes(t *testing.T) {
	// 1, -2, 0.5 and the smallest subnormal in F16; 1, -2, 0.5, 2⁻¹³³ in BF16.
	f16 := []byte{0x00, 0x3c, 0x00, 0xc0, 0x00, 0x38, 0x01, 0x00}
	bf16 := []byte{0x80, 0x3f, 0x00, 0xc0, 0x00, 0x3f, 0x01, 0x00}
	hdr := `{"a":{"dtype":"F16","shape":[2,2],"data_offsets":[0,8]},"b":{"dtype":"BF16","shape":[4],"data_offsets":[8,16]},"c":{"dtype":"F32","shape":[],"data_offsets":[16,20]},"d":{"dtype":"F32","shape":[0,3],"data_offsets":[20,20]}}`
	f, err := readBytes(file(hdr, append(append(f16, bf16...), f32s(7)...)))
	require.NoError(t, err)
	require.Len(t, f.Tensors, 4)
	assert.Equal(t, []float32{1, -2, 0.5, 0x1p-24}, f.Tensors[0].Data)
	assert.Equal(t, []float32{1, -2, 0.5, float32(math.Float32frombits(1 << 16))}, f.Tensors[1].Data)
	assert.Equal(t, Tensor{Name: "c", DType: "F32", Shape: []int{}, Data: []float32{7}}, f.Tensors[2], "a scalar")
	assert.Equal(t, []int{0, 3}, f.Tensors[3].Shape, "an empty tensor")
	assert.Nil(t, f.Metadata)

	for _, c := range []struct {
		h    uint16
		want float32
	}{{0x0000, 0}, {0x7bff, 65504}, {0x0400, 0x1p-14}, {0x03ff, 1023 * 0x1p-24}, {0x3555, 0.333251953125}} {
		assert.Equal(t, c.want, halfToFloat(c.h), "%#04x", c.h)
	}
	assert.True(t, math.Signbit(float64(halfToFloat(0x8000))), "-0")
	assert.True(t, math.IsInf(float64(halfToFloat(0xfc00)), -1))
	assert.True(t, math.IsNaN(float64(halfToFloat(0x7e00))))
}

// TestReadSafetensorsRefuses: each broken file is refused with an error
// that says what is wrong and names the tensor.
func TestReadSafetensorsRefuses(t *testing.T) {
	ok := `{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`
	data := f32s(1, 2)
	bigLen := binary.LittleEndian.AppendUint64(nil, MaxHeaderBytes+1)
	longLen := binary.LittleEndian.AppendUint64(nil, 1000)
	cases := []struct {
		name string
		raw  []byte
		want string
	}{
		{"empty", nil, "model: 0 bytes: too short for a safetensors file (an 8-byte header length, then the header)"},
		{"short", []byte{1, 2, 3}, "model: 3 bytes: too short for a safetensors file (an 8-byte header length, then the header)"},
		{"oversized header", append(bigLen, "{}"...), "model: the header length is 104857601 bytes, more than the 100 MiB allowed: not a safetensors file, or a corrupt one"},
		{"huge header length", append(binary.LittleEndian.AppendUint64(nil, math.MaxUint64), "{}"...), "model: the header length is 18446744073709551615 bytes, more than the 100 MiB allowed: not a safetensors file, or a corrupt one"},
		{"header past the end", append(longLen, ok...), "model: the header length is 1000 bytes, but the file holds only 54 after the length: truncated, or not a safetensors file"},
		{"header of one byte", file("{", nil), "model: the header length is 1 bytes: too short for a JSON object"},
		{"not UTF-8", file("{\"\xff\":1}", nil), "model: the header is not UTF-8 text: not a safetensors file, or a corrupt one"},
		{"not an object", file(`["w"]`, nil), `model: the header starts with "[\"w\"]", not '{': not a safetensors file, or a corrupt one`},
		{"bad JSON", file(`{"w":{"dtype":"F32",}}`, nil), "model: the header is not valid JSON (invalid character '}' looking for beginning of object key string): a corrupt safetensors file"},
		{"garbage after", file(ok+`{}`, data), `model: the header has 2 bytes after its JSON object ("{}"): a corrupt safetensors file`},
		{"repeated name", file(`{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, data), `model: the header names "w" twice`},
		{"metadata not strings", file(`{"__metadata__":{"n":1}}`, nil), `model: the header's __metadata__ is not an object of strings: {"n":1}`},
		{"entry not an object", file(`{"w":[1,2]}`, nil), `model: tensor "w": its header entry [1,2] is not {dtype, shape, data_offsets}: json: cannot unmarshal array into Go value of type model.headerEntry`},
		{"unknown field", file(`{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"offsets":[0,8]}}`, data), `model: tensor "w": its header entry {"dtype":"F32","shape":[2],"data_offsets":[0,8],"offsets":[0,8]} is not {dtype, shape, data_offsets}: json: unknown field "offsets"`},
		{"no dtype", file(`{"w":{"shape":[2],"data_offsets":[0,8]}}`, data), `model: tensor "w": its header entry has no dtype`},
		{"no shape", file(`{"w":{"dtype":"F32","data_offsets":[0,8]}}`, data), `model: tensor "w": its header entry has no shape`},
		{"no offsets", file(`{"w":{"dtype":"F32","shape":[2]}}`, data), `model: tensor "w": its header entry has no data_offsets`},
		{"three offsets", file(`{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4,8]}}`, data), `model: tensor "w": data_offsets has 3 numbers, want 2 (begin, end)`},
		{"F64", file(`{"w":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}}`, data), `model: tensor "w": dtype F64 is not supported (F32, F16 and BF16 are; in PyTorch, model.float() before saving)`},
		{"I64", file(`{"w":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}}`, data), `model: tensor "w": dtype I64 is not supported (F32, F16 and BF16 are; in PyTorch, model.float() before saving)`},
		{"unknown dtype", file(`{"w":{"dtype":"float32","shape":[2],"data_offsets":[0,8]}}`, data), `model: tensor "w": unknown dtype "float32"`},
		{"negative dim", file(`{"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}`, data), `model: tensor "w": shape [-2]: -2 is not a size`},
		{"fractional dim", file(`{"w":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}}`, data), `model: tensor "w": shape [2.5]: 2.5 is not a size`},
		{"overflowing shape", file(`{"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}}`, data), `model: tensor "w": shape [4294967296 4294967296]: too many elements`},
		{"negative offset", file(`{"w":{"dtype":"F32","shape":[2],"data_offsets":[-8,0]}}`, data), `model: tensor "w": data_offsets [-8 0]: -8 is not a byte offset`},
		{"offsets backwards", file(`{"w":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}}`, data), `model: tensor "w": data_offsets [8, 0] end before they begin`},
		{"offsets disagree with shape", file(`{"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, data), `model: tensor "w": shape [3] of F32 is 12 bytes, but data_offsets [0, 8] hold 8`},
		{"truncated data", file(`{"w":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}}`, data), `model: tensor "w": data_offsets [0, 12] reach past the end of the data (8 bytes after the header): the file is truncated, or its offsets are wrong`},
		{"overlap", file(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, data),
			`model: tensor "b": data_offsets [4, 8] overlap tensor "a", which ends at 8`},
		{"gap", file(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}`, f32s(1, 2, 3)),
			`model: tensor "b": data_offsets [8, 12] leave a gap of 4 bytes after tensor "a", which ends at 4`},
		{"gap first", file(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, data),
			`model: tensor "a": data_offsets [4, 8] leave 4 bytes unused before it: the data starts at offset 0`},
		{"bytes after the last tensor", file(ok, f32s(1, 2, 3)), `model: 4 bytes of data follow the last tensor, "w", which ends at 8: a safetensors file's tensors cover its data exactly`},
		{"data without tensors", file(`{}`, data), "model: 8 bytes of data follow a header that names no tensor"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := readBytes(c.raw)
			assert.EqualError(t, err, c.want)
		})
	}
	// The well-formed file those are variations of.
	f, err := readBytes(file(ok, data))
	require.NoError(t, err)
	assert.Equal(t, []float32{1, 2}, f.Tensors[0].Data)
	// Trailing spaces, as the writer pads the header, are not garbage.
	_, err = readBytes(file(ok+"   \n", data))
	assert.NoError(t, err)
}

// TestReadSafetensorsFile names the file in its errors and refuses what
// is not a regular file.
func TestReadSafetensorsFile(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/bad.safetensors"
	require.NoError(t, os.WriteFile(path, []byte{1}, 0o644))
	_, err := ReadSafetensorsFile(path)
	assert.EqualError(t, err, "model: "+path+": 1 bytes: too short for a safetensors file (an 8-byte header length, then the header)")
	_, err = ReadSafetensorsFile(dir)
	assert.EqualError(t, err, "model: "+dir+": not a regular file")
	_, err = ReadSafetensorsFile(dir + "/none")
	assert.True(t, strings.HasPrefix(err.Error(), "model: open "+dir+"/none: no such file"), err.Error())
}

func TestWriteSafetensorsRefuses(t *testing.T) {
	var b bytes.Buffer
	assert.EqualError(t, WriteSafetensors(&b, []Tensor{{Name: "a", Shape: []int{3}, Data: []float32{1}}}, nil), `model: tensor "a": shape [3] holds 3 elements, but Data has 1`)
	assert.EqualError(t, WriteSafetensors(&b, []Tensor{{Name: "__metadata__"}}, nil), `model: cannot write a tensor named "__metadata__" (empty, reserved or repeated)`)
	assert.EqualError(t, WriteSafetensors(&b, []Tensor{{Name: "a", Shape: []int{0}}, {Name: "a", Shape: []int{0}}}, nil), `model: cannot write a tensor named "a" (empty, reserved or repeated)`)
	b.Reset()
	require.NoError(t, WriteSafetensors(&b, []Tensor{{Name: "a<b>&", Shape: []int{1}, Data: []float32{3}}}, map[string]string{"k": "<v>"}))
	f, err := readBytes(b.Bytes())
	require.NoError(t, err)
	assert.Equal(t, "a<b>&", f.Tensors[0].Name)
	assert.Equal(t, "<v>", f.Metadata["k"])
	assert.Contains(t, b.String(), `"a<b>&"`, "no HTML escapes, as the format's writer")
	assert.Zero(t, (b.Len()-8-4)%8, "the header is padded to a multiple of 8")
}
