package overlap_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/model"
	"github.com/purecuda/overlap/nvrtc"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/pipeline/sim"
	"github.com/purecuda/overlap/ptx"
	"github.com/purecuda/overlap/ptx/kernels"
)

// README:begin runSeed
// runSeed runs the seed kernel (100 iterations) over in into out on GPU 0,
// prints what the run reports, and checks every element.
func runSeed(in, out []float32) error {
	dev, err := driver.DeviceAt(0)
	if err != nil {
		return err
	}
	ctx, err := driver.NewContext(dev)
	if err != nil {
		return err
	}
	defer ctx.Close()
	var mods kernels.Modules // loads each kernel on each context once
	defer mods.Close()
	k, err := kernels.Seed.Pipeline(&mods, 100) // 100 iterations
	if err != nil {
		return err
	}
	p, err := pipeline.New(pipeline.GPU(ctx), pipeline.Float32Config(1, 1))
	if err != nil {
		return err
	}
	defer p.Close()
	rep, err := p.Run(context.Background(), pipeline.Job{
		N:       len(in),
		Kernel:  k,
		Inputs:  []pipeline.Buffer{pipeline.Slice(in)},
		Outputs: []pipeline.Buffer{pipeline.Slice(out)},
	})
	if err != nil {
		return err
	}
	fmt.Printf("%d chunks in %v, host memory %s\n", rep.Chunks, rep.Elapsed, rep.Mode)
	return kernels.Seed.Verify([][]float32{in}, out, 100)
}

// README:end

var _ = runSeed // compiled here; the GPU tests run the same calls

// README:begin runMLP
// runMLP runs the MLP saved in path over x, rows of m.In() float32, on
// backend: pipeline.GPU(ctx), or sim.New(1, 0) without a GPU.
func runMLP(backend pipeline.Backend, path string, x []float32) ([]float32, error) {
	m, err := model.Load(path, model.Options{}) // safetensors, as PyTorch saves it
	if err != nil {
		return nil, err
	}
	var gemm kernels.GemmModules // loads the GEMM kernels on each GPU context once
	defer gemm.Close()
	k, err := m.Kernel(model.KernelOptions{Precision: model.FP32, Gemm: &gemm})
	if err != nil {
		return nil, err
	}
	cfg, err := m.Config(0) // the model's default rows per chunk
	if err != nil {
		return nil, err
	}
	p, err := pipeline.New(backend, cfg)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	y := make([]float32, len(x)/m.In()*m.Out())
	if _, err := p.Run(context.Background(), pipeline.Job{
		N:       len(x) / m.In(),
		Kernel:  k,
		Inputs:  []pipeline.Buffer{pipeline.Rows(x, m.In())},
		Outputs: []pipeline.Buffer{pipeline.Rows(y, m.Out())},
	}); err != nil {
		return nil, err
	}
	return y, m.Verify(x, y, model.VerifyOptions{Precision: model.FP32})
}

// README:end

// README:begin runCUDA
// runCUDA compiles the kernel entry of the CUDA C file path at run time
// (NVRTC) for ctx's GPU, and runs it over in into out through the pipeline.
func runCUDA(ctx *driver.Context, path, entry string, in, out []float32) error {
	res, err := nvrtc.CompileKernelFile(path, entry, nvrtc.Options{Device: ctx.Device()})
	if err != nil {
		return err // names the library files looked for, or holds the compiler's log
	}
	prog, err := ptx.Load(ctx, path, res.PTX, entry, driver.ModuleOptions{})
	if err != nil {
		return err
	}
	defer prog.Close()
	p, err := pipeline.New(pipeline.GPU(ctx), pipeline.Float32Config(1, 1))
	if err != nil {
		return err
	}
	defer p.Close()
	_, err = p.Run(context.Background(), pipeline.Job{
		N:       len(in),
		Kernel:  kernels.Elementwise(entry, pipeline.FunctionOn(ctx, prog.Function)),
		Inputs:  []pipeline.Buffer{pipeline.Slice(in)},
		Outputs: []pipeline.Buffer{pipeline.Slice(out)},
	})
	return err
}

// README:end

// runCUDA needs NVRTC and a GPU; nvrtc's GPU tests run the same steps
// (TestGPUCompileKernelFile). Here it only has to compile.
var _ = runCUDA

// TestREADMESnippet: the README's library snippets are the functions
// between README markers above, as written and in order, so they compile,
// and the README has no other Go block there. Issue 10: it used names it
// never defined.
func TestREADMESnippet(t *testing.T) {
	src, err := os.ReadFile("readme_test.go")
	if err != nil {
		t.Fatal(err)
	}
	marked := regexp.MustCompile(`(?s)// README:begin (\w+)\n(.*?)\n// README:end`).FindAllSubmatch(src, -1)
	if len(marked) != 3 {
		t.Fatalf("readme_test.go has %d README snippets, want 3 (runSeed, runMLP, runCUDA)", len(marked))
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	section := regexp.MustCompile("(?s)\n## Using the library\n(.*?)(\n## |$)").FindSubmatch(readme)
	if section == nil {
		t.Fatal("README.md has no '## Using the library' section")
	}
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllSubmatch(section[1], -1)
	if len(blocks) != len(marked) {
		t.Fatalf("README.md has %d Go blocks under '## Using the library', want %d, one per README snippet in readme_test.go", len(blocks), len(marked))
	}
	for i, m := range marked {
		if got, want := strings.TrimSpace(string(blocks[i][1])), strings.TrimSpace(string(m[2])); got != want {
			t.Errorf("README.md's Go block %d differs from %s in readme_test.go; copy it from there:\n%s", i+1, m[1], want)
		}
	}
}

// TestREADMEModelSnippet runs the README's runMLP on the simulator over a
// random model written as PyTorch would save it, so that the snippet does
// what it says, not only compiles.
func TestREADMEModelSnippet(t *testing.T) {
	m, err := model.Random([]int{24, 32, 5}, model.GELU, 1)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "mlp.safetensors")
	if err := m.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	const rows = 1000
	x := make([]float32, rows*m.In())
	kernels.FillPattern(x, 0)
	y, err := runMLP(sim.New(1, 0), path, x)
	if err != nil {
		t.Fatalf("runMLP on the simulator: %v", err)
	}
	if len(y) != rows*m.Out() {
		t.Fatalf("runMLP returned %d values, want %d", len(y), rows*m.Out())
	}
	want, err := m.Forward(x)
	if err != nil {
		t.Fatal(err)
	}
	for i := range y {
		if d := float64(y[i]) - want[i]; d > 1e-3 || d < -1e-3 {
			t.Fatalf("value %d: %g, the float64 reference %g", i, y[i], want[i])
		}
	}
}

// TestNoPointersOutsideTheRepository: users have only the repository, so
// nothing in it may send them to files outside it. Issue 10: comments and
// scripts cited shared/GPU.md.
func TestNoPointersOutsideTheRepository(t *testing.T) {
	outside := regexp.MustCompile(`\bshared/(GPU|STYLE|LAYOUT|reference)|/work/(main|wt)`)
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", ".gpu", "testdata": // testdata holds nvcc's own output, paths and all
				return filepath.SkipDir
			}
			return nil
		}
		if path == "readme_test.go" || d.Name() == ".git" { // a worktree's .git is a file
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.IndexByte(string(b), 0) >= 0 {
			return nil // a binary
		}
		for i, line := range strings.Split(string(b), "\n") {
			if outside.MatchString(line) {
				t.Errorf("%s:%d points outside the repository: %s", path, i+1, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
