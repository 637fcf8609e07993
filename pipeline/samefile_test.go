package pipeline_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/pipeline/sim"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStreamRefusesOutputThatIsInput guards issue 28: a streaming run
// whose output is one of its inputs would overwrite the input as it reads
// it. RunStream refuses it before reading or writing a byte, however the
// file is reached: the same *os.File, two opens of one path, a relative
// and an absolute path, a symlink, a hard link; and so it does for one
// object as input and output, and for two outputs that are one file.
func TestStreamRefusesOutputThatIsInput(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	data, _ := streamData(100)
	require.NoError(t, os.WriteFile("in.f32", data, 0o644))
	require.NoError(t, os.Symlink("in.f32", "link.f32"))
	require.NoError(t, os.Link("in.f32", "hard.f32"))
	abs := filepath.Join(dir, "in.f32")
	open := func(t *testing.T, name string, flag int) *os.File {
		f, err := os.OpenFile(name, flag, 0)
		require.NoError(t, err)
		t.Cleanup(func() { f.Close() })
		return f
	}
	const refused = "pipeline: stream job: in.f32 and out.f32 are the same file: the run would overwrite one with the other"
	for _, tc := range []struct {
		name string
		job  func(t *testing.T) ([]io.Reader, []io.Writer)
		want string
	}{
		{"one *os.File", func(t *testing.T) ([]io.Reader, []io.Writer) {
			f := open(t, "in.f32", os.O_RDWR)
			return []io.Reader{f}, []io.Writer{f}
		}, refused},
		{"two opens of one path", func(t *testing.T) ([]io.Reader, []io.Writer) {
			return []io.Reader{open(t, "in.f32", os.O_RDONLY)}, []io.Writer{open(t, "in.f32", os.O_WRONLY)}
		}, refused},
		{"relative and absolute paths", func(t *testing.T) ([]io.Reader, []io.Writer) {
			return []io.Reader{open(t, "in.f32", os.O_RDONLY)}, []io.Writer{open(t, abs, os.O_WRONLY)}
		}, refused},
		{"a symlink", func(t *testing.T) ([]io.Reader, []io.Writer) {
			return []io.Reader{open(t, "in.f32", os.O_RDONLY)}, []io.Writer{open(t, "link.f32", os.O_WRONLY)}
		}, refused},
		{"a hard link", func(t *testing.T) ([]io.Reader, []io.Writer) {
			return []io.Reader{open(t, "hard.f32", os.O_RDONLY)}, []io.Writer{open(t, "in.f32", os.O_WRONLY)}
		}, refused},
		{"one object", func(t *testing.T) ([]io.Reader, []io.Writer) {
			b := bytes.NewBuffer(append([]byte(nil), data...))
			return []io.Reader{b}, []io.Writer{b}
		}, refused},
		{"a closed file", func(t *testing.T) ([]io.Reader, []io.Writer) {
			f := open(t, "in.f32", os.O_RDONLY)
			require.NoError(t, f.Close())
			return []io.Reader{f}, []io.Writer{io.Discard}
		}, "pipeline: stream job: in.f32 and out.f32: stat in.f32: file already closed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, dev := streamPipeline(t, 28, 16, 1)
			ins, outs := tc.job(t)
			rep, err := p.RunStream(context.Background(), pipeline.StreamJob{Inputs: ins, Outputs: outs, Kernel: seedKernel(nil, streamIters),
				InputNames: []string{"in.f32"}, OutputNames: []string{"out.f32"}})
			assert.EqualError(t, err, tc.want)
			assert.Nil(t, rep)
			assert.Zero(t, dev.Count("copy"), "nothing was run")
			got, err := os.ReadFile("in.f32")
			require.NoError(t, err)
			assert.True(t, bytes.Equal(data, got), "the input is intact")
			for _, r := range ins {
				if f, ok := r.(*os.File); ok && tc.name != "a closed file" {
					off, err := f.Seek(0, io.SeekCurrent)
					require.NoError(t, err)
					assert.Zero(t, off, "nothing was read")
				}
			}
		})
	}

	t.Run("two outputs, one file", func(t *testing.T) {
		dev := sim.New(28, 0)
		cfg := pipeline.Float32Config(1, 2)
		cfg.ChunkElems = 16
		p, err := pipeline.New(dev, cfg)
		require.NoError(t, err)
		defer p.Close()
		out := open(t, "out.f32", os.O_WRONLY|os.O_CREATE)
		_, err = p.RunStream(context.Background(), pipeline.StreamJob{Inputs: []io.Reader{bytes.NewReader(data)},
			Outputs: []io.Writer{out, open(t, "./out.f32", os.O_WRONLY)}, Kernel: seedKernel(nil, streamIters)})
		assert.EqualError(t, err, "pipeline: stream job: output 0 and output 1 are the same file: the run would overwrite one with the other")
	})

	t.Run("distinct streams run", func(t *testing.T) {
		p, _ := streamPipeline(t, 28, 16, 1)
		// One file read twice by two runs, io.Discard, a pipe's ends: none
		// is refused.
		out := open(t, "out.f32", os.O_RDWR|os.O_CREATE|os.O_TRUNC)
		rep, err := p.RunStream(context.Background(), pipeline.StreamJob{Inputs: []io.Reader{open(t, "link.f32", os.O_RDONLY)},
			Outputs: []io.Writer{out}, Kernel: seedKernel(nil, streamIters)})
		require.NoError(t, err)
		assert.Equal(t, []int64{400}, rep.OutputBytes)
		_, err = p.RunStream(context.Background(), pipeline.StreamJob{Inputs: []io.Reader{open(t, "in.f32", os.O_RDONLY)},
			Outputs: []io.Writer{io.Discard}, Kernel: seedKernel(nil, streamIters)})
		require.NoError(t, err)
	})
}

// TestSameFile checks the exported check on its own, as a caller such as
// the CLI uses it before it creates an output: paths, files, a path that
// does not exist yet, pipes and other values.
func TestSameFile(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	require.NoError(t, os.WriteFile("a", []byte("a"), 0o644))
	require.NoError(t, os.WriteFile("b", []byte("b"), 0o644))
	require.NoError(t, os.Symlink("a", "link"))
	require.NoError(t, os.Link("a", "hard"))
	require.NoError(t, os.Mkdir("sub", 0o755))
	require.NoError(t, os.Symlink(".", "here"))
	require.NoError(t, os.Symlink("new", "dangling"))
	fa, err := os.Open("a")
	require.NoError(t, err)
	defer fa.Close()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	defer w.Close()
	closed, err := os.Open("b")
	require.NoError(t, err)
	require.NoError(t, closed.Close())
	buf := new(bytes.Buffer)
	for _, tc := range []struct {
		name string
		a, b any
		same bool
		err  string
	}{
		{"one path", "a", "a", true, ""},
		{"relative and absolute", "a", filepath.Join(dir, "a"), true, ""},
		{"a symlink", "link", "a", true, ""},
		{"a hard link", fa, "hard", true, ""},
		{"a file and its path", fa, "./a", true, ""},
		{"one *os.File", fa, fa, true, ""},
		{"two files", "a", "b", false, ""},
		{"a path not there yet", fa, "missing", false, ""},
		{"an existing path and one not there yet", "a", "missing", false, ""},
		{"a path not there yet and an existing one", "missing", "a", false, ""},
		{"two spellings of a path not there yet", "new", filepath.Join(dir, "here", "new"), true, ""},
		{"a path not there yet through ..", "new", "sub/../here/new", true, ""},
		{"a dangling symlink and its target", "new", "dangling", true, ""},
		{"two paths not there yet", "new", "sub/new", false, ""},
		{"a pipe's two ends", r, w, false, ""},
		{"one buffer", buf, buf, true, ""},
		{"two buffers", buf, new(bytes.Buffer), false, ""},
		{"io.Discard twice", io.Discard, io.Discard, false, ""},
		{"nil", nil, fa, false, ""},
		{"a nil *os.File", (*os.File)(nil), fa, false, ""},
		{"a closed file", closed, "b", false, "pipeline: SameFile: stat b: file already closed"},
	} {
		same, err := pipeline.SameFile(tc.a, tc.b)
		if tc.err != "" {
			assert.EqualError(t, err, tc.err, tc.name)
			continue
		}
		assert.NoError(t, err, tc.name)
		assert.Equal(t, tc.same, same, tc.name)
	}
}
