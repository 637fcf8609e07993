package nvrtc

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/purecuda/overlap/ptx"
)

// MaxSourceSize bounds what CompileKernelFile reads: a kernel's source is
// kilobytes, so anything larger is refused before it is read whole.
const MaxSourceSize = 16 << 20

// CompileKernelFile reads the CUDA C++ file path, compiles it with
// [Compile] and opts (set opts.Device to the GPU it will run on, so that
// the PTX is for its compute capability) and checks that the PTX defines
// the kernel entry, so that the result can go where a PTX file goes:
// ptx.Load(ctx, path, res.PTX, entry, ...), as overlap run's --ptx FILE
// --entry NAME path loads a file. The kernel must be declared extern "C"
// (else its name is C++-mangled, and the error says so) and, for overlap
// run, take (float *out, const float *in..., unsigned n) and guard its
// index against n: the pipeline launches it over a chunk of n elements,
// 256 threads a block.
//
// Compile errors carry the compiler's log; warnings are in the result's
// Log.
func CompileKernelFile(path, entry string, opts Options) (*Result, error) {
	if entry == "" {
		return nil, fmt.Errorf("%w: no kernel entry name to look for in %s", ErrInvalidArgument, path)
	}
	// Stat first: opening a FIFO for reading would wait for a writer, and
	// a device or socket is no source file either.
	if fi, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("nvrtc: %w", err)
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file (%v)", ErrInvalidArgument, path, fi.Mode().Type())
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("nvrtc: %w", err)
	}
	defer f.Close()
	src, err := io.ReadAll(io.LimitReader(f, MaxSourceSize+1))
	if err != nil {
		return nil, fmt.Errorf("nvrtc: reading %s: %w", path, err)
	}
	if len(src) > MaxSourceSize {
		return nil, fmt.Errorf("nvrtc: %s: larger than %d MiB: not a kernel's source", path, MaxSourceSize>>20)
	}
	res, err := Compile(string(src), filepath.Base(path), opts)
	if err != nil {
		return nil, err
	}
	if err := checkEntry(path, res.PTX, entry); err != nil {
		return nil, err
	}
	return res, nil
}

// checkEntry parses the PTX that path compiled to and checks that it
// defines entry, naming a C++-mangled match when there is one.
func checkEntry(path string, src []byte, entry string) error {
	if len(src) == 0 {
		return fmt.Errorf("nvrtc: %s: the compilation gave no PTX", path)
	}
	file, err := ptx.Parse(src)
	if err != nil {
		return fmt.Errorf("nvrtc: %s: the PTX that NVRTC wrote does not parse: %w", path, err)
	}
	if _, ok := file.Entry(entry); ok {
		return nil
	}
	names := file.EntryNames()
	for _, n := range names {
		// Itanium mangling: _Z, the name's length, the name.
		if strings.HasPrefix(n, "_Z") && strings.Contains(n, fmt.Sprintf("%d%s", len(entry), entry)) {
			return fmt.Errorf("%w: %s: kernel %q is compiled as the C++ name %s: declare it extern \"C\"", ptx.ErrNoEntry, path, entry, n)
		}
	}
	if len(names) == 0 {
		return fmt.Errorf("%w: %s defines no __global__ kernel, so %q cannot be launched", ptx.ErrNoEntry, path, entry)
	}
	return fmt.Errorf("%w: %s has no kernel %q; its kernels are: %s", ptx.ErrNoEntry, path, entry, strings.Join(names, ", "))
}
