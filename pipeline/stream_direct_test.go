package pipeline_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/purecuda/overlap/pipeline"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// directDir is a directory on a file system that allows O_DIRECT writes:
// t.TempDir() if it does, else one under /var/tmp, else the test skips.
// tmpfs refuses O_DIRECT with EINVAL.
func directDir(t *testing.T) string {
	t.Helper()
	var reasons []string
	for _, base := range []string{"", "/var/tmp"} {
		var dir string
		if base == "" {
			dir = t.TempDir()
		} else {
			d, err := os.MkdirTemp(base, "overlap-direct-*")
			if err != nil {
				reasons = append(reasons, err.Error())
				continue
			}
			t.Cleanup(func() { os.RemoveAll(d) })
			dir = d
		}
		f, err := pipeline.CreateDirect(filepath.Join(dir, "probe"))
		if err != nil {
			reasons = append(reasons, err.Error())
			continue
		}
		f.Close()
		return dir
	}
	t.Skipf("skipping: no directory here allows O_DIRECT (tmpfs refuses it with EINVAL): %s", strings.Join(reasons, "; "))
	return ""
}

// TestStreamDirectOutput writes outputs opened with CreateDirect, of
// lengths that are and are not multiples of DirectAlign, with one writer
// and several, with and without preallocation, and checks every byte
// and the file's exact length.
func TestStreamDirectOutput(t *testing.T) {
	const chunk = 2 * pipeline.DirectAlign / 4 // elements: two pages of float32
	dir := directDir(t)
	lengths := []struct {
		name string
		n    int
	}{
		{"whole chunks", 5 * chunk},
		{"a whole page past the chunks", 5*chunk + pipeline.DirectAlign/4},
		{"123 elements past the chunks", 5*chunk + 123},
		{"one element", 1},
		{"less than a page", 1000},
		{"a page and an element", pipeline.DirectAlign/4 + 1},
		{"nothing", 0},
	}
	for _, l := range lengths {
		for _, writers := range []int{1, 3} {
			for _, prealloc := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/writers %d/preallocate %v", l.name, writers, prealloc), func(t *testing.T) {
					in, want := streamData(l.n)
					path := filepath.Join(dir, fmt.Sprintf("out-%d-%d-%v", l.n, writers, prealloc))
					f, err := pipeline.CreateDirect(path)
					require.NoError(t, err)
					defer f.Close()
					p, _ := streamPipeline(t, 31, chunk, 1)
					job := pipeline.StreamJob{Inputs: []io.Reader{bytes.NewReader(in)}, Outputs: []io.Writer{f},
						Kernel: seedKernel(nil, streamIters), Writers: writers, PieceBytes: pipeline.DirectAlign}
					if prealloc {
						// More than the run writes: the file must still end where the output does.
						job.Preallocate = []int64{int64(len(want)) + 3*pipeline.DirectAlign}
					}
					rep, err := p.RunStream(context.Background(), job)
					require.NoError(t, err)
					assert.Equal(t, []int64{int64(len(want))}, rep.OutputBytes)
					st, err := os.Stat(path)
					require.NoError(t, err)
					assert.Equal(t, int64(len(want)), st.Size(), "the file's length")
					got, err := os.ReadFile(path)
					require.NoError(t, err)
					sameBytes(t, want, got)
					if !prealloc {
						assert.Equal(t, []int64{0}, rep.Preallocated)
					}
					// The file is still open with O_DIRECT, at the end of the output.
					at, err := f.Seek(0, io.SeekCurrent)
					require.NoError(t, err)
					assert.Equal(t, int64(len(want)), at)
				})
			}
		}
	}
}

// TestStreamDirectOutputMisaligned streams chunks whose output bytes are
// not a multiple of DirectAlign to an O_DIRECT output: the run fails
// with an error naming what O_DIRECT needs, and the file holds exactly
// the first chunk, correct.
func TestStreamDirectOutputMisaligned(t *testing.T) {
	const chunk = 1000 // elements: 4000 bytes
	dir := directDir(t)
	in, want := streamData(4*chunk + 7)
	path := filepath.Join(dir, "out")
	f, err := pipeline.CreateDirect(path)
	require.NoError(t, err)
	defer f.Close()
	p, _ := streamPipeline(t, 32, chunk, 1)
	rep, err := p.RunStream(context.Background(), pipeline.StreamJob{Inputs: []io.Reader{bytes.NewReader(in)}, Outputs: []io.Writer{f},
		Kernel: seedKernel(nil, streamIters), PieceBytes: pipeline.DirectAlign})
	require.Error(t, err)
	var se *pipeline.StreamError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "output 0", se.Stream)
	assert.Contains(t, err.Error(), "O_DIRECT")
	assert.Contains(t, err.Error(), "multiples of 4096 bytes")
	// The first piece, 4096 bytes at 0, is not even a chunk: nothing is
	// written in full but what the report says, an exact prefix.
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, rep.OutputBytes[0], int64(len(got)))
	sameBytes(t, want[:len(got)], got)
}

// TestStreamPreallocate preallocates a plain output file: more than the
// run writes, exactly as much, and for a file that already held more;
// the file always ends where it should, and holds the output.
func TestStreamPreallocate(t *testing.T) {
	const chunk = 512
	n := 7*chunk + 5
	in, want := streamData(n)
	cases := []struct {
		name   string
		before int64 // bytes in the file before, at offset 0; the run writes from before
		extra  int64 // preallocated beyond the output
		size   int64 // the file's size after
	}{
		{"exact", 0, 0, int64(len(want))},
		{"more than written", 0, 1 << 20, int64(len(want))},
		{"after 100 bytes", 100, 5000, 100 + int64(len(want))},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "out")
			f, err := os.Create(path)
			require.NoError(t, err)
			defer f.Close()
			head := bytes.Repeat([]byte{7}, int(c.before))
			_, err = f.Write(head)
			require.NoError(t, err)
			p, _ := streamPipeline(t, 33, chunk, 1)
			rep, err := p.RunStream(context.Background(), pipeline.StreamJob{Inputs: []io.Reader{bytes.NewReader(in)}, Outputs: []io.Writer{f},
				Kernel: seedKernel(nil, streamIters), Writers: 2, Preallocate: []int64{int64(len(want)) + c.extra}})
			require.NoError(t, err)
			require.Len(t, rep.Preallocated, 1)
			if rep.Preallocated[0] == 0 {
				t.Logf("the file system did not preallocate (EOPNOTSUPP)")
			} else {
				assert.Equal(t, int64(len(want))+c.extra, rep.Preallocated[0])
			}
			st, err := os.Stat(path)
			require.NoError(t, err)
			assert.Equal(t, c.size, st.Size(), "the file's length")
			got, err := os.ReadFile(path)
			require.NoError(t, err)
			sameBytes(t, append(head, want...), got)
		})
	}
}

// TestStreamPreallocateValidation refuses negative sizes and more sizes
// than outputs, before anything is read.
func TestStreamPreallocateValidation(t *testing.T) {
	p, _ := streamPipeline(t, 34, 256, 1)
	for _, pre := range [][]int64{{-1}, {1, 2}} {
		_, err := p.RunStream(context.Background(), pipeline.StreamJob{Inputs: []io.Reader{bytes.NewReader(nil)}, Outputs: []io.Writer{io.Discard},
			Kernel: seedKernel(nil, streamIters), Preallocate: pre})
		require.Error(t, err, "%v", pre)
		assert.Contains(t, err.Error(), "Preallocate")
	}
}
