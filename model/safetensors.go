package model

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxHeaderBytes bounds a safetensors header: a header length above it is
// refused before anything is read (the format's reference implementation
// refuses headers above 100 MB too).
const MaxHeaderBytes = 100 << 20

// Tensor is one tensor of a safetensors file, its values converted to
// float32.
type Tensor struct {
	Name string
	// DType is the file's element type: "F32", "F16" or "BF16".
	DType string
	Shape []int
	// Data holds the elements in row-major (C) order.
	Data []float32
}

// File is a safetensors file as [ReadSafetensors] reads it.
type File struct {
	// Tensors are in the order of their data in the file.
	Tensors []Tensor
	// Metadata is the header's "__metadata__" (nil when absent).
	Metadata map[string]string
}

// Tensor returns the tensor called name.
func (f *File) Tensor(name string) (*Tensor, bool) {
	for i := range f.Tensors {
		if f.Tensors[i].Name == name {
			return &f.Tensors[i], true
		}
	}
	return nil, false
}

// dtypeSizes are the element sizes of the types this package converts
// to float32.
var dtypeSizes = map[string]int{"F32": 4, "F16": 2, "BF16": 2}

// knownDTypes are the other types of the format, refused by name.
var knownDTypes = map[string]int{
	"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "I16": 2, "U16": 2,
	"I32": 4, "U32": 4, "F64": 8, "I64": 8, "U64": 8,
}

// headerEntry is one tensor's header entry before it is checked.
type headerEntry struct {
	DType   *string        `json:"dtype"`
	Shape   *[]json.Number `json:"shape"`
	Offsets *[]json.Number `json:"data_offsets"`
}

// tensorInfo is one checked header entry.
type tensorInfo struct {
	name       string
	dtype      string
	shape      []int
	begin, end int64
}

// ReadSafetensorsFile reads the safetensors file at path; see
// [ReadSafetensors].
func ReadSafetensorsFile(path string) (*File, error) {
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
	sf, err := ReadSafetensors(f, st.Size())
	if err != nil {
		return nil, fmt.Errorf("model: %s: %s", path, strings.TrimPrefix(err.Error(), "model: "))
	}
	return sf, nil
}

// ReadSafetensors reads a safetensors file of size bytes from r: an 8-byte
// little-endian header length, a JSON header naming each tensor's dtype,
// shape and data_offsets (and "__metadata__", a map of strings), then the
// tensors' data, back to back. It checks what the format requires and
// refuses, naming the tensor, anything else: a header longer than
// [MaxHeaderBytes] or than the file, a header that is not one JSON object
// of UTF-8 text (or that repeats a key), entries with missing or unknown
// fields, dtypes other than F32, F16 and BF16 (both converted exactly to
// float32), shapes whose size overflows, data_offsets that disagree with
// the shape, overlap, leave a gap or reach past the end of the file, and
// bytes after the last tensor.
func ReadSafetensors(r io.ReaderAt, size int64) (*File, error) {
	infos, meta, dataStart, err := readHeader(r, size)
	if err != nil {
		return nil, err
	}
	f := &File{Metadata: meta}
	for _, ti := range infos {
		t := Tensor{Name: ti.name, DType: ti.dtype, Shape: ti.shape}
		if t.Data, err = readTensor(r, dataStart, ti); err != nil {
			return nil, err
		}
		f.Tensors = append(f.Tensors, t)
	}
	return f, nil
}

// readHeader reads and checks the header, and returns its tensors sorted
// by offset, the metadata and where the data starts.
func readHeader(r io.ReaderAt, size int64) ([]tensorInfo, map[string]string, int64, error) {
	if size < 8 {
		return nil, nil, 0, fmt.Errorf("model: %d bytes: too short for a safetensors file (an 8-byte header length, then the header)", size)
	}
	var lenBuf [8]byte
	if _, err := r.ReadAt(lenBuf[:], 0); err != nil {
		return nil, nil, 0, fmt.Errorf("model: reading the header length: %w", err)
	}
	n := binary.LittleEndian.Uint64(lenBuf[:])
	switch {
	case n > MaxHeaderBytes:
		return nil, nil, 0, fmt.Errorf("model: the header length is %d bytes, more than the %d MiB allowed: not a safetensors file, or a corrupt one", n, MaxHeaderBytes>>20)
	case int64(n) > size-8:
		return nil, nil, 0, fmt.Errorf("model: the header length is %d bytes, but the file holds only %d after the length: truncated, or not a safetensors file", n, size-8)
	case n < 2:
		return nil, nil, 0, fmt.Errorf("model: the header length is %d bytes: too short for a JSON object", n)
	}
	hdr := make([]byte, n)
	if _, err := r.ReadAt(hdr, 8); err != nil {
		return nil, nil, 0, fmt.Errorf("model: reading the %d-byte header: %w", n, err)
	}
	infos, meta, err := parseHeader(hdr)
	if err != nil {
		return nil, nil, 0, err
	}
	dataStart := 8 + int64(n)
	if err := checkOffsets(infos, size-dataStart); err != nil {
		return nil, nil, 0, err
	}
	return infos, meta, dataStart, nil
}

// parseHeader reads the JSON header.
func parseHeader(hdr []byte) ([]tensorInfo, map[string]string, error) {
	if !utf8.Valid(hdr) {
		return nil, nil, errors.New("model: the header is not UTF-8 text: not a safetensors file, or a corrupt one")
	}
	if hdr[0] != '{' {
		return nil, nil, fmt.Errorf("model: the header starts with %q, not '{': not a safetensors file, or a corrupt one", hdr[:min(len(hdr), 8)])
	}
	dec := json.NewDecoder(bytes.NewReader(hdr))
	dec.UseNumber()
	bad := func(err error) error {
		return fmt.Errorf("model: the header is not valid JSON (%v): a corrupt safetensors file", err)
	}
	if _, err := dec.Token(); err != nil { // the '{'
		return nil, nil, bad(err)
	}
	var meta map[string]string
	var infos []tensorInfo
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, bad(err)
		}
		name := tok.(string) // an object's keys are strings
		if seen[name] {
			return nil, nil, fmt.Errorf("model: the header names %q twice", name)
		}
		seen[name] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, nil, bad(err)
		}
		if name == "__metadata__" {
			if err := json.Unmarshal(raw, &meta); err != nil || meta == nil {
				return nil, nil, fmt.Errorf("model: the header's __metadata__ is not an object of strings: %s", clip(raw))
			}
			continue
		}
		ti, err := parseEntry(name, raw)
		if err != nil {
			return nil, nil, err
		}
		infos = append(infos, ti)
	}
	if _, err := dec.Token(); err != nil { // the '}'
		return nil, nil, bad(err)
	}
	if rest := bytes.TrimLeft(hdr[dec.InputOffset():], " \t\r\n"); len(rest) > 0 {
		return nil, nil, fmt.Errorf("model: the header has %d bytes after its JSON object (%q): a corrupt safetensors file", len(rest), rest[:min(len(rest), 16)])
	}
	return infos, meta, nil
}

// parseEntry checks one tensor's header entry.
func parseEntry(name string, raw json.RawMessage) (tensorInfo, error) {
	ti := tensorInfo{name: name}
	var e headerEntry
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return ti, fmt.Errorf("model: tensor %q: its header entry %s is not {dtype, shape, data_offsets}: %v", name, clip(raw), err)
	}
	switch {
	case e.DType == nil:
		return ti, fmt.Errorf("model: tensor %q: its header entry has no dtype", name)
	case e.Shape == nil:
		return ti, fmt.Errorf("model: tensor %q: its header entry has no shape", name)
	case e.Offsets == nil:
		return ti, fmt.Errorf("model: tensor %q: its header entry has no data_offsets", name)
	case len(*e.Offsets) != 2:
		return ti, fmt.Errorf("model: tensor %q: data_offsets has %d numbers, want 2 (begin, end)", name, len(*e.Offsets))
	}
	ti.dtype = *e.DType
	if _, ok := dtypeSizes[ti.dtype]; !ok {
		if _, known := knownDTypes[ti.dtype]; known {
			return ti, fmt.Errorf("model: tensor %q: dtype %s is not supported (F32, F16 and BF16 are; in PyTorch, model.float() before saving)", name, ti.dtype)
		}
		return ti, fmt.Errorf("model: tensor %q: unknown dtype %q", name, ti.dtype)
	}
	numel := int64(1)
	for _, d := range *e.Shape {
		v, err := strconv.ParseInt(d.String(), 10, 64)
		if err != nil || v < 0 {
			return ti, fmt.Errorf("model: tensor %q: shape %v: %s is not a size", name, *e.Shape, d)
		}
		if v != 0 && numel > math.MaxInt64/8/v {
			return ti, fmt.Errorf("model: tensor %q: shape %v: too many elements", name, *e.Shape)
		}
		numel *= v
		ti.shape = append(ti.shape, int(v))
	}
	if ti.shape == nil {
		ti.shape = []int{}
	}
	var off [2]int64
	for i, d := range *e.Offsets {
		v, err := strconv.ParseInt(d.String(), 10, 64)
		if err != nil || v < 0 {
			return ti, fmt.Errorf("model: tensor %q: data_offsets %v: %s is not a byte offset", name, *e.Offsets, d)
		}
		off[i] = v
	}
	ti.begin, ti.end = off[0], off[1]
	if ti.end < ti.begin {
		return ti, fmt.Errorf("model: tensor %q: data_offsets [%d, %d] end before they begin", name, ti.begin, ti.end)
	}
	if want := numel * int64(dtypeSizes[ti.dtype]); ti.end-ti.begin != want {
		return ti, fmt.Errorf("model: tensor %q: shape %v of %s is %d bytes, but data_offsets [%d, %d] hold %d", name, ti.shape, ti.dtype, want, ti.begin, ti.end, ti.end-ti.begin)
	}
	return ti, nil
}

// checkOffsets sorts the tensors by offset and checks that they cover the
// data exactly: no overlap, no gap, nothing past the end or after the
// last tensor.
func checkOffsets(infos []tensorInfo, dataBytes int64) error {
	sort.SliceStable(infos, func(i, j int) bool {
		if infos[i].begin != infos[j].begin {
			return infos[i].begin < infos[j].begin
		}
		return infos[i].end < infos[j].end
	})
	at, prev := int64(0), ""
	for _, ti := range infos {
		switch {
		case ti.end > dataBytes:
			return fmt.Errorf("model: tensor %q: data_offsets [%d, %d] reach past the end of the data (%d bytes after the header): the file is truncated, or its offsets are wrong", ti.name, ti.begin, ti.end, dataBytes)
		case ti.begin < at:
			return fmt.Errorf("model: tensor %q: data_offsets [%d, %d] overlap tensor %q, which ends at %d", ti.name, ti.begin, ti.end, prev, at)
		case ti.begin > at && prev == "":
			return fmt.Errorf("model: tensor %q: data_offsets [%d, %d] leave %d bytes unused before it: the data starts at offset 0", ti.name, ti.begin, ti.end, ti.begin)
		case ti.begin > at:
			return fmt.Errorf("model: tensor %q: data_offsets [%d, %d] leave a gap of %d bytes after tensor %q, which ends at %d", ti.name, ti.begin, ti.end, ti.begin-at, prev, at)
		}
		at, prev = ti.end, ti.name
	}
	switch {
	case at == dataBytes:
		return nil
	case prev == "":
		return fmt.Errorf("model: %d bytes of data follow a header that names no tensor", dataBytes)
	}
	return fmt.Errorf("model: %d bytes of data follow the last tensor, %q, which ends at %d: a safetensors file's tensors cover its data exactly", dataBytes-at, prev, at)
}

// readTensor reads one tensor's data and converts it to float32.
func readTensor(r io.ReaderAt, dataStart int64, ti tensorInfo) ([]float32, error) {
	size := dtypeSizes[ti.dtype]
	n := (ti.end - ti.begin) / int64(size)
	if n > math.MaxInt/4 {
		return nil, fmt.Errorf("model: tensor %q: %d elements do not fit in memory", ti.name, n)
	}
	out := make([]float32, n)
	const block = 1 << 20 // bytes read at a time
	buf := make([]byte, min(int64(block), ti.end-ti.begin))
	for done := int64(0); done < n; {
		m := min(int64(len(buf)/size), n-done)
		b := buf[:m*int64(size)]
		if _, err := r.ReadAt(b, dataStart+ti.begin+done*int64(size)); err != nil {
			return nil, fmt.Errorf("model: tensor %q: reading its data: %w", ti.name, err)
		}
		dst := out[done : done+m]
		switch ti.dtype {
		case "F32":
			for i := range dst {
				dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
			}
		case "BF16":
			for i := range dst {
				dst[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(b[2*i:])) << 16)
			}
		case "F16":
			for i := range dst {
				dst[i] = halfToFloat(binary.LittleEndian.Uint16(b[2*i:]))
			}
		}
		done += m
	}
	return out, nil
}

// halfToFloat converts an IEEE 754 binary16 value to float32, exactly.
func halfToFloat(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	frac := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // Inf or NaN
		return math.Float32frombits(sign | 0xff<<23 | frac<<13)
	case exp != 0: // normal
		return math.Float32frombits(sign | (exp+127-15)<<23 | frac<<13)
	case frac == 0: // ±0
		return math.Float32frombits(sign)
	}
	// Subnormal: frac·2⁻²⁴, exact in float32.
	v := float32(frac) * (1.0 / (1 << 24))
	if sign != 0 {
		v = -v
	}
	return v
}

// clip shortens a raw JSON value for an error message.
func clip(raw []byte) string {
	if len(raw) > 80 {
		return string(raw[:77]) + "..."
	}
	return string(raw)
}

// WriteSafetensors writes tensors as a safetensors file of F32 tensors,
// as the format's own writer lays it out: the tensors' data in order of
// name, the header's JSON compact with "__metadata__" first (when
// metadata is not nil) and padded with spaces to a multiple of 8 bytes.
// Each tensor's Data must hold the elements its Shape says.
func WriteSafetensors(w io.Writer, tensors []Tensor, metadata map[string]string) error {
	ts := append([]Tensor(nil), tensors...)
	sort.Slice(ts, func(i, j int) bool { return ts[i].Name < ts[j].Name })
	var hdr bytes.Buffer
	hdr.WriteByte('{')
	first := true
	comma := func() {
		if !first {
			hdr.WriteByte(',')
		}
		first = false
	}
	if metadata != nil {
		comma()
		hdr.WriteString(`"__metadata__":`)
		keys := make([]string, 0, len(metadata))
		for k := range metadata {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		hdr.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				hdr.WriteByte(',')
			}
			writeJSONString(&hdr, k)
			hdr.WriteByte(':')
			writeJSONString(&hdr, metadata[k])
		}
		hdr.WriteByte('}')
	}
	off := 0
	seen := map[string]bool{}
	for _, t := range ts {
		if t.Name == "" || t.Name == "__metadata__" || seen[t.Name] {
			return fmt.Errorf("model: cannot write a tensor named %q (empty, reserved or repeated)", t.Name)
		}
		seen[t.Name] = true
		numel := 1
		for _, d := range t.Shape {
			if d < 0 {
				return fmt.Errorf("model: tensor %q: shape %v", t.Name, t.Shape)
			}
			numel *= d
		}
		if numel != len(t.Data) {
			return fmt.Errorf("model: tensor %q: shape %v holds %d elements, but Data has %d", t.Name, t.Shape, numel, len(t.Data))
		}
		comma()
		writeJSONString(&hdr, t.Name)
		hdr.WriteString(`:{"dtype":"F32","shape":[`)
		for i, d := range t.Shape {
			if i > 0 {
				hdr.WriteByte(',')
			}
			hdr.WriteString(strconv.Itoa(d))
		}
		fmt.Fprintf(&hdr, `],"data_offsets":[%d,%d]}`, off, off+4*numel)
		off += 4 * numel
	}
	hdr.WriteByte('}')
	for hdr.Len()%8 != 0 {
		hdr.WriteByte(' ')
	}
	var lenBuf [8]byte
	binary.LittleEndian.PutUint64(lenBuf[:], uint64(hdr.Len()))
	if _, err := w.Write(lenBuf[:]); err != nil {
		return fmt.Errorf("model: writing safetensors: %w", err)
	}
	if _, err := w.Write(hdr.Bytes()); err != nil {
		return fmt.Errorf("model: writing safetensors: %w", err)
	}
	buf := make([]byte, 0, 1<<16)
	for _, t := range ts {
		for _, v := range t.Data {
			buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
			if len(buf) == cap(buf) {
				if _, err := w.Write(buf); err != nil {
					return fmt.Errorf("model: writing safetensors: %w", err)
				}
				buf = buf[:0]
			}
		}
	}
	if _, err := w.Write(buf); err != nil {
		return fmt.Errorf("model: writing safetensors: %w", err)
	}
	return nil
}

// writeJSONString writes s as a JSON string, with <, > and & as they are.
func writeJSONString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	enc.Encode(s)           // a string always encodes
	b.Truncate(b.Len() - 1) // Encode's newline
}
