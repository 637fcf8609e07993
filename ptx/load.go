package ptx

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/loader"
)

// ErrNoEntry reports an entry name that the PTX does not define.
var ErrNoEntry = errors.New("ptx: no such entry")

// ErrUnsupported reports PTX that this driver or GPU cannot run: an ISA
// version newer than the driver reads, or a target newer than the GPU.
var ErrUnsupported = errors.New("ptx: not supported here")

// MaxFileSize bounds what LoadFile reads: PTX modules are kilobytes to a
// few megabytes, so anything larger is refused before it is read whole.
const MaxFileSize = 64 << 20

// Program is PTX loaded onto a context: its parsed header, the module and
// the validated kernel.
type Program struct {
	File     *File
	Entry    Entry
	Module   *driver.Module
	Function *driver.Function
}

// Close unloads the module. A second Close returns nil.
func (p *Program) Close() error {
	if p == nil {
		return nil
	}
	return p.Module.Close()
}

// LoadFile reads a PTX file (ReadFile) and loads its entry onto ctx.
func LoadFile(ctx *driver.Context, path, entry string, opts driver.ModuleOptions) (*Program, error) {
	src, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Load(ctx, path, src, entry, opts)
}

// Load parses src (named name in errors), checks that it defines entry and
// that this driver and GPU can run it, loads it onto ctx with opts, and
// returns the validated kernel. Every failure says what went wrong in words
// a user can act on: the parse error's line, the entries that do exist, the
// PTX ISA against what the driver reads, the target against the GPU, or
// the JIT's error log.
func Load(ctx *driver.Context, name string, src []byte, entry string, opts driver.ModuleOptions) (*Program, error) {
	f, err := Parse(src)
	if err != nil {
		return nil, fmt.Errorf("ptx: %s: %w", name, trimPrefix(err))
	}
	e, ok := f.Entry(entry)
	if !ok {
		return nil, noEntryError(name, entry, f)
	}
	if err := checkRunnable(ctx, name, f); err != nil {
		return nil, err
	}
	mod, err := ctx.LoadModule(src, opts)
	if err != nil {
		if errors.Is(err, driver.ErrUnsupportedPTXVersion) {
			return nil, fmt.Errorf("%w: %s: PTX ISA %s: %s (%v)", ErrUnsupported, name, f.Version, driverISAText(), err)
		}
		return nil, fmt.Errorf("ptx: %s: %w", name, err)
	}
	fn, err := mod.Function(entry)
	if err != nil {
		mod.Close()
		return nil, fmt.Errorf("ptx: %s: %w", name, err)
	}
	layout := Layout(e.Params)
	if err := fn.SetParams(layout); err != nil {
		mod.Close()
		return nil, fmt.Errorf("ptx: %s: entry %s: the PTX's parameters disagree with the driver's: %w", name, entry, err)
	}
	return &Program{File: f, Entry: e, Module: mod, Function: fn}, nil
}

func noEntryError(name, entry string, f *File) error {
	if len(f.Entries) == 0 {
		return fmt.Errorf("%w: %s defines no .entry (kernel) at all, so %q cannot be launched", ErrNoEntry, name, entry)
	}
	return fmt.Errorf("%w: %s has no entry %q; its entries are: %s", ErrNoEntry, name, entry, strings.Join(f.EntryNames(), ", "))
}

// Layout computes each parameter's offset in the parameter buffer from its
// size and alignment, as the driver lays them out.
func Layout(params []Param) []driver.ParamInfo {
	out := make([]driver.ParamInfo, len(params))
	off := 0
	for i, p := range params {
		align := max(p.Align, 1)
		off = (off + align - 1) / align * align
		out[i] = driver.ParamInfo{Offset: off, Size: p.Size}
		off += p.Size
	}
	return out
}

// isaByDriver maps a driver's CUDA version to the newest PTX ISA it reads.
var isaByDriver = []struct {
	cuda int
	isa  Version
}{
	{11000, Version{7, 0}}, {11010, Version{7, 1}}, {11020, Version{7, 2}}, {11030, Version{7, 3}},
	{11040, Version{7, 4}}, {11050, Version{7, 5}}, {11060, Version{7, 6}}, {11070, Version{7, 7}},
	{11080, Version{7, 8}}, {12000, Version{8, 0}}, {12010, Version{8, 1}}, {12020, Version{8, 2}},
	{12030, Version{8, 3}}, {12040, Version{8, 4}}, {12050, Version{8, 5}}, {12060, Version{8, 5}},
	{12080, Version{8, 7}}, {12090, Version{8, 8}}, {13000, Version{9, 0}},
}

// MaxISA returns the newest PTX ISA a driver of the given CUDA version
// reads, and false for versions newer than this table knows.
func MaxISA(cudaVersion int) (Version, bool) {
	last := isaByDriver[len(isaByDriver)-1]
	if cudaVersion > last.cuda+5 { // a newer minor release than we know
		return Version{}, false
	}
	best := Version{}
	for _, row := range isaByDriver {
		if row.cuda <= cudaVersion {
			best = row.isa
		}
	}
	return best, true
}

func driverISAText() string {
	v, err := driver.DriverVersion()
	if err != nil {
		return "the driver's version is unknown"
	}
	isa, ok := MaxISA(v)
	if !ok {
		return fmt.Sprintf("the driver is CUDA %s", loader.FormatVersion(v))
	}
	return fmt.Sprintf("this driver (CUDA %s) reads PTX ISA up to %s; lower the PTX .version or update the driver", loader.FormatVersion(v), isa)
}

// checkRunnable compares the PTX's ISA version and target with the driver
// and the GPU before the JIT sees them.
func checkRunnable(ctx *driver.Context, name string, f *File) error {
	if v, err := driver.DriverVersion(); err == nil {
		if isa, ok := MaxISA(v); ok && isa.Less(f.Version) {
			return fmt.Errorf("%w: %s declares PTX ISA %s, but %s", ErrUnsupported, name, f.Version, driverISAText())
		}
	}
	target := f.Target()
	want, ok := smNumber(target)
	if !ok {
		return nil
	}
	dev := ctx.Device()
	major, minor, err := dev.ComputeCapability()
	if err != nil {
		return nil // let the driver judge
	}
	have := major*10 + minor
	if want > have {
		gpu, _ := dev.Name()
		return fmt.Errorf("%w: %s targets %s, but %s (%s) is sm_%d; compile the PTX for sm_%d or lower",
			ErrUnsupported, name, target, dev, gpu, have, have)
	}
	return nil
}

// smNumber reads "sm_90a" as 90.
func smNumber(target string) (int, bool) {
	digits := strings.TrimPrefix(target, "sm_")
	if digits == target {
		return 0, false
	}
	end := 0
	for end < len(digits) && digits[end] >= '0' && digits[end] <= '9' {
		end++
	}
	n, err := strconv.Atoi(digits[:end])
	return n, err == nil
}

// trimPrefix drops the "ptx: " of an error from this package, so that
// wrapping it does not repeat the word.
func trimPrefix(err error) error {
	var se *SyntaxError
	if errors.As(err, &se) {
		return &lineError{se}
	}
	return err
}

type lineError struct{ *SyntaxError }

func (e *lineError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Msg) }
func (e *lineError) Unwrap() error { return e.SyntaxError }
