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
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/ptx/kernels"
)

// README:begin
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

// TestREADMESnippet: the README's library snippet is runSeed above, as
// written, so it compiles. Issue 10: it used names it never defined.
func TestREADMESnippet(t *testing.T) {
	src, err := os.ReadFile("readme_test.go")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)// README:begin\n(.*?)\n// README:end`).FindSubmatch(src)
	if m == nil {
		t.Fatal("no README markers in readme_test.go")
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile("(?s)## Using the library\n.*?```go\n(.*?)```").FindSubmatch(readme)
	if block == nil {
		t.Fatal("README.md has no Go block under '## Using the library'")
	}
	if got, want := strings.TrimSpace(string(block[1])), strings.TrimSpace(string(m[1])); got != want {
		t.Errorf("README.md's snippet differs from runSeed in readme_test.go; copy it from there:\n%s", want)
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
