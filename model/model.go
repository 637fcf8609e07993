package model

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/purecuda/overlap/internal/units"
)

// Activation is the function applied between Linear layers (not after
// the last).
type Activation int

// The activations. The zero value means "not given": the file's
// "activation" metadata, else ReLU.
const (
	ReLU Activation = iota + 1
	GELU            // exact: 0.5·x·(1 + erf(x/√2)), PyTorch's nn.GELU()
)

func (a Activation) String() string {
	switch a {
	case ReLU:
		return "relu"
	case GELU:
		return "gelu"
	case 0:
		return "unset"
	}
	return fmt.Sprintf("Activation(%d)", int(a))
}

// ParseActivation reads "relu" or "gelu" (in any case).
func ParseActivation(s string) (Activation, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "relu":
		return ReLU, nil
	case "gelu":
		return GELU, nil
	}
	return 0, fmt.Errorf("model: unknown activation %q (want relu or gelu)", s)
}

// MetadataActivation is the __metadata__ key that names a model's
// activation ("relu" or "gelu").
const MetadataActivation = "activation"

// Layer is one Linear layer: Out×In weights, row-major as PyTorch stores
// nn.Linear's weight ([out, in]), and Out biases.
type Layer struct {
	// Index is the layer's index in the nn.Sequential (the N of
	// "N.weight").
	Index int
	// WeightName and BiasName are the tensors' names in the file;
	// BiasName is empty for a layer without bias (Linear(bias=False)).
	WeightName, BiasName string
	In, Out              int
	Weight               []float32
	// Bias holds Out values, zeros when the layer has none.
	Bias []float32
}

// Model is a stack of Linear layers with an activation between them: an
// nn.Sequential(Linear, act, Linear, act, ..., Linear).
type Model struct {
	Layers     []Layer
	Activation Activation
	// ActivationFrom says where Activation came from: "option", "file"
	// (the __metadata__) or "default".
	ActivationFrom string
	// Metadata is the file's __metadata__.
	Metadata map[string]string

	ref     sync.Once
	refData []refLayer
	// norms and normData are each layer's norms, for Compare.
	norms    sync.Once
	normData []normLayer
}

// Options are how a model is read. The zero value reads any model.
type Options struct {
	// Activation, when set, is the activation between layers, whatever
	// the file's metadata says; unset, the file's "activation" metadata
	// decides, and ReLU when it has none.
	Activation Activation
	// MaxParamBytes, when positive, refuses a model whose weights and
	// biases take more bytes as float32 (a device's memory, say), before
	// their data is read.
	MaxParamBytes int64
}

// Load reads a model from a safetensors file as PyTorch writes it
// (safetensors.torch.save_file(model.state_dict(), path)): see [FromFile].
func Load(path string, opts Options) (*Model, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("model: %s: not a regular file", path)
	}
	m, err := Read(f, st.Size(), opts)
	if err != nil {
		return nil, fmt.Errorf("model: %s: %s", path, strings.TrimPrefix(err.Error(), "model: "))
	}
	return m, nil
}

// Read reads a model from a safetensors file of size bytes. The file's
// tensors must be the weights and biases of the Linear layers of one
// nn.Sequential: "N.weight" ([out, in]) and "N.bias" ([out], optional),
// where N is the layer's index (0, 2, 4, … when activations sit between
// them), all under one prefix when the Sequential is a submodule
// ("net.0.weight"). Layers run in index order; each layer's in must be the
// previous one's out. Any other tensor is refused, since it would be
// silently ignored (a BatchNorm's statistics, say), and so are
// non-finite values.
func Read(r io.ReaderAt, size int64, opts Options) (*Model, error) {
	infos, meta, dataStart, err := readHeader(r, size)
	if err != nil {
		return nil, err
	}
	plan, err := planLayers(infos)
	if err != nil {
		return nil, err
	}
	m := &Model{Metadata: meta}
	if err := m.setActivation(opts.Activation); err != nil {
		return nil, err
	}
	var params int64
	for _, p := range plan {
		params += int64(p.weight.end-p.weight.begin)/int64(dtypeSizes[p.weight.dtype])*4 + 4*int64(p.weight.shape[0])
	}
	if opts.MaxParamBytes > 0 && params > opts.MaxParamBytes {
		return nil, fmt.Errorf("model: the weights and biases take %s as float32, more than the %s allowed (the device's memory)", humanBytes(params), humanBytes(opts.MaxParamBytes))
	}
	for _, p := range plan {
		l := Layer{Index: p.index, WeightName: p.weight.name, Out: p.weight.shape[0], In: p.weight.shape[1]}
		if l.Weight, err = readTensor(r, dataStart, p.weight); err != nil {
			return nil, err
		}
		if p.bias != nil {
			l.BiasName = p.bias.name
			if l.Bias, err = readTensor(r, dataStart, *p.bias); err != nil {
				return nil, err
			}
		} else {
			l.Bias = make([]float32, l.Out)
		}
		m.Layers = append(m.Layers, l)
	}
	if err := m.Check(); err != nil {
		return nil, err
	}
	return m, nil
}

// FromFile builds a model from a safetensors file read with
// [ReadSafetensors], by the rules of [Read].
func FromFile(f *File, opts Options) (*Model, error) {
	var infos []tensorInfo
	byName := map[string]*Tensor{}
	for i := range f.Tensors {
		t := &f.Tensors[i]
		infos = append(infos, tensorInfo{name: t.Name, dtype: t.DType, shape: t.Shape})
		byName[t.Name] = t
	}
	plan, err := planLayers(infos)
	if err != nil {
		return nil, err
	}
	m := &Model{Metadata: f.Metadata}
	if err := m.setActivation(opts.Activation); err != nil {
		return nil, err
	}
	for _, p := range plan {
		w := byName[p.weight.name]
		l := Layer{Index: p.index, WeightName: w.Name, Out: w.Shape[0], In: w.Shape[1], Weight: w.Data}
		if p.bias != nil {
			l.BiasName, l.Bias = p.bias.name, byName[p.bias.name].Data
		} else {
			l.Bias = make([]float32, l.Out)
		}
		m.Layers = append(m.Layers, l)
	}
	if err := m.Check(); err != nil {
		return nil, err
	}
	if opts.MaxParamBytes > 0 && m.ParamBytes() > opts.MaxParamBytes {
		return nil, fmt.Errorf("model: the weights and biases take %s as float32, more than the %s allowed (the device's memory)", humanBytes(m.ParamBytes()), humanBytes(opts.MaxParamBytes))
	}
	return m, nil
}

// layerName reads "PREFIX.N.weight" and "PREFIX.N.bias".
var layerName = regexp.MustCompile(`^(.*?)(0|[1-9][0-9]{0,8})\.(weight|bias)$`)

type layerPlan struct {
	index  int
	weight tensorInfo
	bias   *tensorInfo
}

// planLayers finds the layers among the header's tensors and checks
// their names and shapes.
func planLayers(infos []tensorInfo) ([]layerPlan, error) {
	// By name, so that errors name the same tensors whatever the file's
	// order.
	infos = append([]tensorInfo(nil), infos...)
	sort.Slice(infos, func(i, j int) bool { return infos[i].name < infos[j].name })
	byIndex := map[int]*layerPlan{}
	prefix, prefixOf := "", ""
	var biases []tensorInfo
	for _, ti := range infos {
		sm := layerName.FindStringSubmatch(ti.name)
		if sm == nil || sm[1] != "" && !strings.HasSuffix(sm[1], ".") {
			return nil, fmt.Errorf("model: tensor %q is not a Linear layer's weight or bias in an nn.Sequential (\"N.weight\", \"N.bias\"): this reads stacks of Linear layers only", ti.name)
		}
		if prefixOf == "" {
			prefix, prefixOf = sm[1], ti.name
		} else if sm[1] != prefix {
			return nil, fmt.Errorf("model: tensors %q and %q belong to different modules (%q and %q): the layers must be one nn.Sequential", prefixOf, ti.name, prefix, sm[1])
		}
		idx, _ := strconv.Atoi(sm[2])
		if sm[3] == "bias" {
			biases = append(biases, ti)
			continue
		}
		if len(ti.shape) != 2 {
			return nil, fmt.Errorf("model: tensor %q has shape %v; a Linear weight is [out, in]", ti.name, ti.shape)
		}
		if ti.shape[0] == 0 || ti.shape[1] == 0 {
			return nil, fmt.Errorf("model: tensor %q has shape %v: a layer without inputs or outputs", ti.name, ti.shape)
		}
		byIndex[idx] = &layerPlan{index: idx, weight: ti}
	}
	for _, b := range biases {
		sm := layerName.FindStringSubmatch(b.name)
		idx, _ := strconv.Atoi(sm[2])
		p, ok := byIndex[idx]
		if !ok {
			return nil, fmt.Errorf("model: tensor %q has no weight %q", b.name, sm[1]+sm[2]+".weight")
		}
		if len(b.shape) != 1 || b.shape[0] != p.weight.shape[0] {
			return nil, fmt.Errorf("model: tensor %q has shape %v, but %q has %d outputs (%v): a Linear bias is [out]", b.name, b.shape, p.weight.name, p.weight.shape[0], p.weight.shape)
		}
		bb := b
		p.bias = &bb
	}
	if len(byIndex) == 0 {
		return nil, errors.New("model: the file holds no Linear layer (no \"N.weight\" tensor)")
	}
	var plan []layerPlan
	for _, p := range byIndex {
		plan = append(plan, *p)
	}
	sort.Slice(plan, func(i, j int) bool { return plan[i].index < plan[j].index })
	for i := 1; i < len(plan); i++ {
		a, b := plan[i-1].weight, plan[i].weight
		if a.shape[0] != b.shape[1] {
			return nil, fmt.Errorf("model: the layers' widths do not chain: %q is %v (%d outputs), but %q, the next layer, is %v (%d inputs)",
				a.name, a.shape, a.shape[0], b.name, b.shape, b.shape[1])
		}
	}
	return plan, nil
}

// setActivation picks the activation: the option when given, else the
// file's metadata, else ReLU.
func (m *Model) setActivation(opt Activation) error {
	if opt != 0 {
		if opt != ReLU && opt != GELU {
			return fmt.Errorf("model: unknown activation %v", opt)
		}
		m.Activation, m.ActivationFrom = opt, "option"
		return nil
	}
	if s, ok := m.Metadata[MetadataActivation]; ok {
		a, err := ParseActivation(s)
		if err != nil {
			return fmt.Errorf("model: the file's __metadata__ names the activation %q, which is not supported (relu, gelu); give one to override it", s)
		}
		m.Activation, m.ActivationFrom = a, "file"
		return nil
	}
	m.Activation, m.ActivationFrom = ReLU, "default"
	return nil
}

// Check checks the model's shape: at least one layer, weights and biases
// of their layer's size, widths that chain, finite values, and an
// activation. Models from Load, Read, FromFile and Random pass it; a
// Model built by hand is checked by Kernel, Forward and Verify.
func (m *Model) Check() error {
	if m == nil || len(m.Layers) == 0 {
		return errors.New("model: no layers")
	}
	if m.Activation != ReLU && m.Activation != GELU {
		return fmt.Errorf("model: unknown activation %v", m.Activation)
	}
	for i, l := range m.Layers {
		name := l.WeightName
		if name == "" {
			name = fmt.Sprintf("layer %d", i)
		}
		switch {
		case l.In <= 0 || l.Out <= 0:
			return fmt.Errorf("model: %s is %d×%d: a layer without inputs or outputs", name, l.Out, l.In)
		case int64(l.In)*int64(l.Out) > math.MaxInt32:
			return fmt.Errorf("model: %s is %d×%d: more than 2³¹ weights in one layer", name, l.Out, l.In)
		case len(l.Weight) != l.In*l.Out:
			return fmt.Errorf("model: %s holds %d weights, not %d×%d", name, len(l.Weight), l.Out, l.In)
		case len(l.Bias) != l.Out:
			return fmt.Errorf("model: %s has %d biases for %d outputs", name, len(l.Bias), l.Out)
		case i > 0 && m.Layers[i-1].Out != l.In:
			p := m.Layers[i-1]
			return fmt.Errorf("model: the layers' widths do not chain: %s is [%d, %d] (%d outputs), but %s, the next layer, is [%d, %d] (%d inputs)",
				p.WeightName, p.Out, p.In, p.Out, name, l.Out, l.In, l.In)
		}
		for _, t := range []struct {
			name string
			v    []float32
			cols int
		}{{name, l.Weight, l.In}, {l.BiasName, l.Bias, 0}} {
			for j, v := range t.v {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					where := fmt.Sprintf("[%d]", j)
					if t.cols > 0 {
						where = fmt.Sprintf("[%d, %d]", j/t.cols, j%t.cols)
					}
					return fmt.Errorf("model: tensor %q holds %v at %s", t.name, v, where)
				}
			}
		}
	}
	return nil
}

// layers is m's layers; none for a nil Model.
func (m *Model) layers() []Layer {
	if m == nil {
		return nil
	}
	return m.Layers
}

// In is the model's input width: the values in one row of input; 0 for
// a nil Model or one without layers.
func (m *Model) In() int {
	if len(m.layers()) == 0 {
		return 0
	}
	return m.Layers[0].In
}

// Out is the model's output width; 0 for a nil Model or one without
// layers.
func (m *Model) Out() int {
	if len(m.layers()) == 0 {
		return 0
	}
	return m.Layers[len(m.Layers)-1].Out
}

// Widths are the model's input width and each layer's output width; nil
// for a nil Model or one without layers.
func (m *Model) Widths() []int {
	if len(m.layers()) == 0 {
		return nil
	}
	w := []int{m.In()}
	for _, l := range m.Layers {
		w = append(w, l.Out)
	}
	return w
}

// String describes the model: "768→256→16, relu".
func (m *Model) String() string {
	if len(m.layers()) == 0 {
		return "no layers"
	}
	parts := make([]string, 0, len(m.Layers)+1)
	for _, w := range m.Widths() {
		parts = append(parts, strconv.Itoa(w))
	}
	s := strings.Join(parts, "→")
	if len(m.Layers) > 1 {
		s += ", " + m.Activation.String()
	}
	return s
}

// ParamBytes is the bytes of the weights and biases as float32: what
// each device holds.
func (m *Model) ParamBytes() int64 {
	var n int64
	for _, l := range m.layers() {
		n += 4 * (int64(l.In)*int64(l.Out) + int64(l.Out))
	}
	return n
}

// FLOPsPerRow is the arithmetic of one row through every layer: 2·in·out
// a layer.
func (m *Model) FLOPsPerRow() float64 {
	f := 0.0
	for _, l := range m.layers() {
		f += 2 * float64(l.In) * float64(l.Out)
	}
	return f
}

// CheckFits refuses a model whose weights and biases do not fit in
// deviceBytes of device memory.
func (m *Model) CheckFits(deviceBytes int64) error {
	if p := m.ParamBytes(); p > deviceBytes {
		return fmt.Errorf("model: the weights and biases take %s, more than the device's %s", humanBytes(p), humanBytes(deviceBytes))
	}
	return nil
}

// CheckInput checks that values float32 values in rows of width are an
// input for m, and returns the number of rows.
func (m *Model) CheckInput(values int64, width int) (int64, error) {
	if len(m.layers()) == 0 {
		return 0, errors.New("model: no layers")
	}
	switch {
	case width != m.In():
		return 0, fmt.Errorf("model: the input's rows are %d values wide, but the model's first layer (%s, [%d, %d]) takes %d", width, m.Layers[0].WeightName, m.Layers[0].Out, m.In(), m.In())
	case values == 0:
		return 0, errors.New("model: the input is empty: no rows")
	case values < 0 || values%int64(width) != 0:
		return 0, fmt.Errorf("model: an input of %d values is not a whole number of rows of %d", values, width)
	}
	return values / int64(width), nil
}

// CheckInputBytes checks that bytes of raw float32 are whole rows of the
// model's input, and returns the number of rows.
func (m *Model) CheckInputBytes(bytes int64) (int64, error) {
	if len(m.layers()) == 0 {
		return 0, errors.New("model: no layers")
	}
	row := 4 * int64(m.In())
	switch {
	case bytes == 0:
		return 0, errors.New("model: the input is empty: no rows")
	case bytes < 0 || bytes%row != 0:
		return 0, fmt.Errorf("model: an input of %d bytes is not a whole number of rows of %d float32 (%d bytes each)", bytes, m.In(), row)
	}
	return bytes / row, nil
}

// Random returns a model of the given widths (input, then each layer's
// output) with PyTorch's default initialisation of nn.Linear: weights and
// biases uniform in ±1/√in, from seed.
func Random(widths []int, act Activation, seed uint64) (*Model, error) {
	if len(widths) < 2 {
		return nil, fmt.Errorf("model: widths %v: want the input width and at least one layer's", widths)
	}
	for _, w := range widths {
		if w <= 0 || w > 1<<20 {
			return nil, fmt.Errorf("model: widths %v: each must be 1 to %d", widths, 1<<20)
		}
	}
	if act == 0 {
		act = ReLU
	}
	rng := rand.New(rand.NewPCG(seed, 0x6d6f64656c))
	m := &Model{Activation: act, ActivationFrom: "option", Metadata: map[string]string{MetadataActivation: act.String()}}
	for i := 0; i+1 < len(widths); i++ {
		in, out := widths[i], widths[i+1]
		bound := 1 / math.Sqrt(float64(in))
		l := Layer{Index: 2 * i, WeightName: fmt.Sprintf("%d.weight", 2*i), BiasName: fmt.Sprintf("%d.bias", 2*i), In: in, Out: out,
			Weight: make([]float32, in*out), Bias: make([]float32, out)}
		for j := range l.Weight {
			l.Weight[j] = float32((2*rng.Float64() - 1) * bound)
		}
		for j := range l.Bias {
			l.Bias[j] = float32((2*rng.Float64() - 1) * bound)
		}
		m.Layers = append(m.Layers, l)
	}
	return m, m.Check()
}

// Tensors returns the model's weights and biases as tensors named as in
// its file (a layer without bias has no bias tensor).
func (m *Model) Tensors() []Tensor {
	var ts []Tensor
	for i, l := range m.layers() {
		name := l.WeightName
		if name == "" {
			name = fmt.Sprintf("%d.weight", 2*i)
		}
		ts = append(ts, Tensor{Name: name, DType: "F32", Shape: []int{l.Out, l.In}, Data: l.Weight})
		if l.BiasName != "" {
			ts = append(ts, Tensor{Name: l.BiasName, DType: "F32", Shape: []int{l.Out}, Data: l.Bias})
		}
	}
	return ts
}

// Write writes the model as a safetensors file, with its metadata and
// its activation under "activation".
func (m *Model) Write(w io.Writer) error {
	if err := m.Check(); err != nil {
		return err
	}
	meta := map[string]string{}
	for k, v := range m.Metadata {
		meta[k] = v
	}
	meta[MetadataActivation] = m.Activation.String()
	return WriteSafetensors(w, m.Tensors(), meta)
}

// WriteFile writes the model to path as a safetensors file; see Write.
// It streams the file, so that it needs little memory beside the model's
// own (it built the whole file in memory, two to three times the
// parameters' size, first), and removes what it wrote, a regular file,
// when it fails.
func (m *Model) WriteFile(path string) error {
	if err := m.Check(); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644) // os.WriteFile's mode, as before
	if err != nil {
		return fmt.Errorf("model: %w", err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	err = m.Write(w)
	if err == nil {
		if err = w.Flush(); err != nil {
			err = fmt.Errorf("model: writing %s: %w", path, err)
		}
	}
	if cerr := f.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("model: %w", cerr)
	}
	if err != nil {
		// A regular file only: the path may be a device (/dev/full).
		if st, serr := os.Lstat(path); serr == nil && st.Mode().IsRegular() {
			os.Remove(path)
		}
		return err
	}
	return nil
}

// ParamBytesOf is the size of the parameters (float32 weights and biases)
// of the model that Random would make for widths, without making it; 0
// for widths Random refuses.
func ParamBytesOf(widths []int) int64 {
	var n int64
	for i := 0; i+1 < len(widths); i++ {
		in, out := int64(widths[i]), int64(widths[i+1])
		if in <= 0 || out <= 0 || in > 1<<20 || out > 1<<20 {
			return 0
		}
		n += 4 * (in*out + out)
	}
	return n
}

func humanBytes(b int64) string { return units.Bytes(b) }
