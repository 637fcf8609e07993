package model

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tensorFile writes tensors (F32) with metadata as a safetensors file in
// memory.
func tensorFile(t *testing.T, meta map[string]string, ts ...Tensor) []byte {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, WriteSafetensors(&b, ts, meta))
	return b.Bytes()
}

// lin returns the tensors of layer idx ("idx.weight", "idx.bias") of out×in
// with values from a simple formula; bias false leaves it out.
func lin(prefix string, idx, out, in int, bias bool) []Tensor {
	w := make([]float32, out*in)
	for i := range w {
		w[i] = float32((i*7+idx)%11-5) / 8
	}
	ts := []Tensor{{Name: fmt.Sprintf("%s%d.weight", prefix, idx), Shape: []int{out, in}, Data: w}}
	if bias {
		b := make([]float32, out)
		for i := range b {
			b[i] = float32(i%3-1) / 4
		}
		ts = append(ts, Tensor{Name: fmt.Sprintf("%s%d.bias", prefix, idx), Shape: []int{out}, Data: b})
	}
	return ts
}

func readModel(raw []byte, opts Options) (*Model, error) {
	return Read(bytes.NewReader(raw), int64(len(raw)), opts)
}

func cat(tss ...[]Tensor) []Tensor {
	var out []Tensor
	for _, ts := range tss {
		out = append(out, ts...)
	}
	return out
}

// TestLoadTiny: the checked-in model, run on two rows whose outputs are
// exact (every weight is a multiple of 1/8).
func TestLoadTiny(t *testing.T) {
	m, err := Load("testdata/tiny.safetensors", Options{})
	require.NoError(t, err)
	assert.Equal(t, "3→4→2, relu", m.String())
	assert.Equal(t, "file", m.ActivationFrom)
	assert.Equal(t, []int{3, 4, 2}, m.Widths())
	assert.Equal(t, int64(4*(12+4+8+2)), m.ParamBytes())
	assert.Equal(t, 2.0*(3*4+4*2), m.FLOPsPerRow())
	x := []float32{1, 2, -1, 0.5, -1, 2}
	want := []float32{0.375, 3, 3.4375, -2}
	got64, err := m.Forward(x)
	require.NoError(t, err)
	assert.Equal(t, []float64{0.375, 3, 3.4375, -2}, got64)
	got32, err := m.Forward32(x)
	require.NoError(t, err)
	assert.Equal(t, want, got32)
	require.NoError(t, m.Verify(x, got32, VerifyOptions{}))

	g, err := Load("testdata/tiny.safetensors", Options{Activation: GELU})
	require.NoError(t, err)
	assert.Equal(t, GELU, g.Activation, "an explicit activation wins over the file's")
	assert.Equal(t, "option", g.ActivationFrom)
	h, err := g.Forward(x[:3])
	require.NoError(t, err)
	// GELU of the hidden layer [−0.875, −0.125, 1.25, −0.375].
	z := []float64{-0.875, -0.125, 1.25, -0.375}
	hid := make([]float64, 4)
	for i, v := range z {
		hid[i] = 0.5 * v * (1 + math.Erf(v/math.Sqrt2))
	}
	want0 := 1*hid[0] - 2*hid[1] + 0.5*hid[2] + 0.25*hid[3] - 0.25
	assert.InDelta(t, want0, h[0], 1e-15)
}

func TestLayerNamesAndOrder(t *testing.T) {
	// Indexes 0, 2 and 10 sort as numbers; a Sequential inside a module
	// has a prefix; a layer without bias gets zeros.
	raw := tensorFile(t, nil, cat(lin("net.", 10, 3, 5, true), lin("net.", 0, 4, 6, false), lin("net.", 2, 5, 4, true))...)
	m, err := readModel(raw, Options{})
	require.NoError(t, err)
	require.Len(t, m.Layers, 3)
	assert.Equal(t, []int{0, 2, 10}, []int{m.Layers[0].Index, m.Layers[1].Index, m.Layers[2].Index})
	assert.Equal(t, "net.0.weight", m.Layers[0].WeightName)
	assert.Equal(t, "", m.Layers[0].BiasName)
	assert.Equal(t, make([]float32, 4), m.Layers[0].Bias)
	assert.Equal(t, "net.2.bias", m.Layers[1].BiasName)
	assert.Equal(t, "6→4→5→3, relu", m.String())
	assert.Equal(t, "default", m.ActivationFrom)
	assert.Equal(t, lin("net.", 10, 3, 5, true)[0].Data, m.Layers[2].Weight)
}

// TestLayerErrors: files that are not a stack of Linear layers, each
// refused naming the tensors.
func TestLayerErrors(t *testing.T) {
	nan := lin("", 0, 2, 2, true)
	nan[0].Data = []float32{0, 1, float32(math.NaN()), 0}
	inf := lin("", 0, 2, 2, true)
	inf[1].Data = []float32{float32(math.Inf(-1)), 0}
	cases := []struct {
		name string
		ts   []Tensor
		meta map[string]string
		want string
	}{
		{"no tensors", nil, nil, `model: the file holds no Linear layer (no "N.weight" tensor)`},
		{"widths do not chain", cat(lin("", 0, 256, 768, true), lin("", 2, 16, 128, true)), nil,
			`model: the layers' widths do not chain: "0.weight" is [256 768] (256 outputs), but "2.weight", the next layer, is [16 128] (128 inputs)`},
		{"bias without weight", cat(lin("", 0, 4, 3, true), lin("", 2, 2, 4, true)[1:]), nil, `model: tensor "2.bias" has no weight "2.weight"`},
		{"bias of the wrong size", cat(lin("", 0, 4, 3, false), []Tensor{{Name: "0.bias", Shape: []int{3}, Data: make([]float32, 3)}}), nil,
			`model: tensor "0.bias" has shape [3], but "0.weight" has 4 outputs ([4 3]): a Linear bias is [out]`},
		{"weight not 2-D", []Tensor{{Name: "0.weight", Shape: []int{2, 2, 2}, Data: make([]float32, 8)}}, nil, `model: tensor "0.weight" has shape [2 2 2]; a Linear weight is [out, in]`},
		{"empty weight", []Tensor{{Name: "0.weight", Shape: []int{0, 4}}}, nil, `model: tensor "0.weight" has shape [0 4]: a layer without inputs or outputs`},
		{"other tensor", cat(lin("", 0, 4, 3, true), []Tensor{{Name: "1.running_mean", Shape: []int{4}, Data: make([]float32, 4)}}), nil,
			`model: tensor "1.running_mean" is not a Linear layer's weight or bias in an nn.Sequential ("N.weight", "N.bias"): this reads stacks of Linear layers only`},
		{"named layer", []Tensor{{Name: "fc.weight", Shape: []int{1, 1}, Data: []float32{1}}}, nil,
			`model: tensor "fc.weight" is not a Linear layer's weight or bias in an nn.Sequential ("N.weight", "N.bias"): this reads stacks of Linear layers only`},
		{"index glued to a name", []Tensor{{Name: "fc1.weight", Shape: []int{1, 1}, Data: []float32{1}}}, nil,
			`model: tensor "fc1.weight" is not a Linear layer's weight or bias in an nn.Sequential ("N.weight", "N.bias"): this reads stacks of Linear layers only`},
		{"two modules", cat(lin("a.", 0, 4, 3, true), lin("b.", 2, 2, 4, true)), nil,
			`model: tensors "a.0.bias" and "b.2.bias" belong to different modules ("a." and "b."): the layers must be one nn.Sequential`},
		{"NaN weight", nan, nil, `model: tensor "0.weight" holds NaN at [1, 0]`},
		{"Inf bias", inf, nil, `model: tensor "0.bias" holds -Inf at [0]`},
		{"unknown activation", lin("", 0, 2, 2, true), map[string]string{"activation": "tanh"},
			`model: the file's __metadata__ names the activation "tanh", which is not supported (relu, gelu); give one to override it`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := readModel(tensorFile(t, c.meta, c.ts...), Options{})
			assert.EqualError(t, err, c.want)
			// FromFile, on the same tensors, agrees.
			if c.ts != nil {
				_, err = FromFile(&File{Tensors: c.ts, Metadata: c.meta}, Options{})
				assert.EqualError(t, err, c.want)
			}
		})
	}
	// An explicit activation overrides a file's unknown one.
	m, err := readModel(tensorFile(t, map[string]string{"activation": "tanh"}, lin("", 0, 2, 2, true)...), Options{Activation: ReLU})
	require.NoError(t, err)
	assert.Equal(t, "option", m.ActivationFrom)
}

// TestActivationChoice: the option, else the file's metadata, else ReLU.
func TestActivationChoice(t *testing.T) {
	ts := cat(lin("", 0, 4, 3, true), lin("", 2, 2, 4, true))
	for _, c := range []struct {
		meta     map[string]string
		opt      Activation
		want     Activation
		wantFrom string
	}{
		{nil, 0, ReLU, "default"},
		{map[string]string{"activation": "gelu"}, 0, GELU, "file"},
		{map[string]string{"activation": "GELU"}, 0, GELU, "file"},
		{map[string]string{"activation": "gelu"}, ReLU, ReLU, "option"},
		{map[string]string{"format": "pt"}, GELU, GELU, "option"},
	} {
		m, err := readModel(tensorFile(t, c.meta, ts...), Options{Activation: c.opt})
		require.NoError(t, err)
		assert.Equal(t, c.want, m.Activation, "%v %v", c.meta, c.opt)
		assert.Equal(t, c.wantFrom, m.ActivationFrom)
	}
	for s, want := range map[string]Activation{"relu": ReLU, "ReLU": ReLU, "gelu": GELU} {
		a, err := ParseActivation(s)
		require.NoError(t, err)
		assert.Equal(t, want, a)
	}
	_, err := ParseActivation("swish")
	assert.EqualError(t, err, `model: unknown activation "swish" (want relu or gelu)`)
	_, err = readModel(tensorFile(t, nil, ts...), Options{Activation: 7})
	assert.EqualError(t, err, "model: unknown activation Activation(7)")
}

// TestWriteFileFails: a write that fails (a full device) returns the
// error and leaves nothing behind: a regular file it made is removed, and
// a device is not. ParamBytesOf sizes what Random would make.
func TestWriteFileFails(t *testing.T) {
	m, err := Random([]int{1024, 1024}, ReLU, 1)
	require.NoError(t, err)
	assert.Equal(t, int64(4*(1024*1024+1024)), ParamBytesOf([]int{1024, 1024}))
	assert.Equal(t, m.ParamBytes(), ParamBytesOf([]int{1024, 1024}))
	assert.Zero(t, ParamBytesOf([]int{1024, 0}))
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("skipping the full device: no /dev/full")
	}
	err = m.WriteFile("/dev/full")
	assert.ErrorContains(t, err, "no space left on device")
	_, err = os.Stat("/dev/full")
	assert.NoError(t, err, "the device is still there")
}

// TestRandomRoundTrip: a random model written and read back is the same
// model, with its activation in the metadata.
func TestRandomRoundTrip(t *testing.T) {
	m, err := Random([]int{8, 16, 4}, GELU, 3)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "m.safetensors")
	require.NoError(t, m.WriteFile(path))
	back, err := Load(path, Options{})
	require.NoError(t, err)
	assert.Equal(t, GELU, back.Activation)
	assert.Equal(t, "file", back.ActivationFrom)
	require.Len(t, back.Layers, 2)
	for i := range m.Layers {
		assert.Equal(t, m.Layers[i].Weight, back.Layers[i].Weight)
		assert.Equal(t, m.Layers[i].Bias, back.Layers[i].Bias)
		assert.Equal(t, m.Layers[i].WeightName, back.Layers[i].WeightName)
	}
	assert.Equal(t, []string{"0.weight", "2.weight"}, []string{back.Layers[0].WeightName, back.Layers[1].WeightName})
	// PyTorch's default bounds, ±1/√in.
	for _, l := range m.Layers {
		bound := float32(1 / math.Sqrt(float64(l.In)))
		for _, v := range append(append([]float32(nil), l.Weight...), l.Bias...) {
			require.LessOrEqual(t, float32(math.Abs(float64(v))), bound)
		}
	}
	again, _ := Random([]int{8, 16, 4}, GELU, 3)
	assert.Equal(t, m.Layers[1].Weight, again.Layers[1].Weight, "the same seed, the same model")
	for _, bad := range [][]int{{8}, {8, 0}, {8, -1, 4}, {1 << 21, 2}} {
		_, err := Random(bad, ReLU, 1)
		assert.Error(t, err, "%v", bad)
	}
	_, err = Random([]int{8}, ReLU, 1)
	assert.EqualError(t, err, "model: widths [8]: want the input width and at least one layer's")
}

// TestMemoryLimits: a model larger than the device's memory is refused
// before its data is read, and by CheckFits.
func TestMemoryLimits(t *testing.T) {
	raw := tensorFile(t, nil, cat(lin("", 0, 256, 768, true), lin("", 2, 16, 256, true))...)
	params := int64(4 * (256*768 + 256 + 16*256 + 16))
	_, err := readModel(raw, Options{MaxParamBytes: params - 1})
	assert.EqualError(t, err, "model: the weights and biases take 785.1 KiB as float32, more than the 785.1 KiB allowed (the device's memory)")
	_, err = readModel(raw, Options{MaxParamBytes: 512 << 10})
	assert.EqualError(t, err, "model: the weights and biases take 785.1 KiB as float32, more than the 512.0 KiB allowed (the device's memory)")
	m, err := readModel(raw, Options{MaxParamBytes: params})
	require.NoError(t, err)
	assert.Equal(t, params, m.ParamBytes())
	assert.NoError(t, m.CheckFits(params))
	assert.EqualError(t, m.CheckFits(1<<19), "model: the weights and biases take 785.1 KiB, more than the device's 512.0 KiB")
	// A header that claims more than the limit is refused before reading:
	// here its data is not even there.
	huge := file(`{"0.weight":{"dtype":"F32","shape":[65536,65536],"data_offsets":[0,17179869184]}}`, nil)
	_, err = readModel(huge, Options{MaxParamBytes: 1 << 30})
	assert.EqualError(t, err, `model: tensor "0.weight": data_offsets [0, 17179869184] reach past the end of the data (0 bytes after the header): the file is truncated, or its offsets are wrong`)
}

// TestCheckInput: inputs that are not rows of the model's width.
func TestCheckInput(t *testing.T) {
	m, err := Load("testdata/tiny.safetensors", Options{})
	require.NoError(t, err)
	rows, err := m.CheckInput(12, 3)
	require.NoError(t, err)
	assert.Equal(t, int64(4), rows)
	for _, c := range []struct {
		values int64
		width  int
		want   string
	}{
		{12, 4, `model: the input's rows are 4 values wide, but the model's first layer (0.weight, [4, 3]) takes 3`},
		{0, 3, "model: the input is empty: no rows"},
		{10, 3, "model: an input of 10 values is not a whole number of rows of 3"},
	} {
		_, err := m.CheckInput(c.values, c.width)
		assert.EqualError(t, err, c.want)
	}
	rows, err = m.CheckInputBytes(24)
	require.NoError(t, err)
	assert.Equal(t, int64(2), rows)
	_, err = m.CheckInputBytes(0)
	assert.EqualError(t, err, "model: the input is empty: no rows")
	_, err = m.CheckInputBytes(26)
	assert.EqualError(t, err, "model: an input of 26 bytes is not a whole number of rows of 3 float32 (12 bytes each)")
	_, err = m.Forward([]float32{1, 2})
	assert.EqualError(t, err, "model: an input of 2 values is not a whole number of rows of 3")
	_, err = m.Forward32(nil)
	assert.EqualError(t, err, "model: the input is empty: no rows")
	assert.EqualError(t, m.Verify([]float32{1, 2, 3}, []float32{1}, VerifyOptions{}), "model: 1 rows of input give 2 output values (2 each), but there are 1")
}

// TestCheckHandBuilt: a Model built by hand is checked before use.
func TestCheckHandBuilt(t *testing.T) {
	var nilM *Model
	assert.EqualError(t, nilM.Check(), "model: no layers")
	m := &Model{Activation: ReLU, Layers: []Layer{{WeightName: "a", In: 2, Out: 2, Weight: make([]float32, 3), Bias: make([]float32, 2)}}}
	assert.EqualError(t, m.Check(), "model: a holds 3 weights, not 2×2")
	m.Layers[0].Weight = make([]float32, 4)
	m.Layers = append(m.Layers, Layer{WeightName: "b", In: 3, Out: 1, Weight: make([]float32, 3), Bias: make([]float32, 1)})
	assert.EqualError(t, m.Check(), "model: the layers' widths do not chain: a is [2, 2] (2 outputs), but b, the next layer, is [1, 3] (3 inputs)")
	_, err := m.Kernel(KernelOptions{})
	assert.EqualError(t, err, "model: the layers' widths do not chain: a is [2, 2] (2 outputs), but b, the next layer, is [1, 3] (3 inputs)")
	m.Layers = m.Layers[:1]
	m.Activation = 0
	assert.EqualError(t, m.Check(), "model: unknown activation unset")
}

func TestLoadErrorsNameTheFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.safetensors")
	require.NoError(t, os.WriteFile(path, file(`{"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, f32s(1)), 0o644))
	_, err := Load(path, Options{})
	assert.EqualError(t, err, "model: "+path+`: tensor "x" is not a Linear layer's weight or bias in an nn.Sequential ("N.weight", "N.bias"): this reads stacks of Linear layers only`)
	_, err = Load(dir, Options{})
	assert.EqualError(t, err, "model: "+dir+": not a regular file")
	_, err = Load(filepath.Join(dir, "none"), Options{})
	assert.True(t, strings.Contains(err.Error(), "no such file"), err.Error())
}
