//go:build linux

package driver_test

import (
	"encoding/binary"
	"testing"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/internal/fakecuda"
	"github.com/purecuda/overlap/internal/gputest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeCubin returns a minimal ELF64 header for EM_CUDA, which CheckImage
// and the fake take for a cubin.
func fakeCubin() []byte {
	b := make([]byte, 80)
	copy(b, "\x7fELF\x02\x01\x01")
	binary.LittleEndian.PutUint16(b[18:], 190)
	return b
}

// fakeFatbin returns a fat binary header followed by n bytes.
func fakeFatbin(n int) []byte {
	b := make([]byte, 16+n)
	binary.LittleEndian.PutUint32(b, 0xBA55ED50)
	binary.LittleEndian.PutUint16(b[4:], 1)
	binary.LittleEndian.PutUint16(b[6:], 16)
	binary.LittleEndian.PutUint64(b[8:], uint64(n))
	return b
}

func TestCheckImage(t *testing.T) {
	elf32 := fakeCubin()
	elf32[4] = 1
	x86 := fakeCubin()
	x86[18] = 62
	short := fakeFatbin(8)
	binary.LittleEndian.PutUint64(short[8:], 100)
	for _, tc := range []struct {
		name  string
		image []byte
		kind  driver.ImageKind
		err   string
	}{
		{"cubin", fakeCubin(), driver.ImageCubin, ""},
		{"fatbin", fakeFatbin(8), driver.ImageFatbin, ""},
		{"ptx", []byte(".version 8.0\n.target sm_90\n"), driver.ImagePTX, ""},
		{"ptx with NULs", []byte(".version 8.0\x00\x00"), driver.ImagePTX, ""},
		{"empty", nil, 0, "cuda: CheckImage: invalid argument: empty image"},
		{"blank", []byte(" \n\x00"), 0, "cuda: CheckImage: invalid argument: PTX image of 3 bytes holds no text"},
		{"32-bit ELF", elf32, 0, "cuda: CheckImage: invalid argument: a 80-byte ELF file that is not 64-bit (class 1): not a cubin"},
		{"x86 ELF", x86, 0, "cuda: CheckImage: invalid argument: an ELF file for machine 62, not a cubin (EM_CUDA, 190)"},
		{"short fatbin", short, 0, "cuda: CheckImage: invalid argument: a fatbin whose header (16 bytes) and contents (100 bytes) do not fit its 24 bytes"},
		{"tiny fatbin", fakeFatbin(0)[:8], 0, "cuda: CheckImage: invalid argument: a fatbin of 8 bytes, shorter than its 16-byte header"},
		{"gzip", []byte{0x1f, 0x8b, 8, 0, 0, 0}, 0, "cuda: CheckImage: invalid argument: image starts with 1f 8b 08 00 00 00: neither a cubin (ELF), a fatbin nor PTX text (not UTF-8)"},
		{"NUL inside", []byte("abc\x00def"), 0, "cuda: CheckImage: invalid argument: image starts with 61 62 63 00 64 65 66: neither a cubin (ELF), a fatbin nor PTX text (byte 0x00 at offset 3)"},
		{"not UTF-8", []byte{'a', 0xff, 0xfe}, 0, "cuda: CheckImage: invalid argument: image starts with 61 ff fe: neither a cubin (ELF), a fatbin nor PTX text (not UTF-8)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := driver.CheckImage(tc.image)
			if tc.err != "" {
				assert.EqualError(t, err, tc.err)
				assert.ErrorIs(t, err, driver.ErrInvalidArgument)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.kind, k)
		})
	}
}

func init() {
	fakeCases = append(fakeCases,
		// LoadImage loads each kind through its own entry point, and a
		// module loaded from a cubin or fatbin gives kernels as any other.
		fakeCase{"LoadImageKinds", func(t *testing.T, f *fakecuda.Fake) {
			c := gputest.FakeContext(t, 0)
			for _, tc := range []struct {
				name, call string
				image      []byte
			}{
				{"cubin", "cuModuleLoadData", fakeCubin()},
				{"fatbin", "cuModuleLoadFatBinary", fakeFatbin(32)},
				{"ptx", "cuModuleLoadDataEx", []byte(".version 8.0")},
			} {
				before := f.Calls(tc.call)
				m, err := c.LoadImage(tc.image)
				require.NoError(t, err, tc.name)
				assert.Equal(t, before+1, f.Calls(tc.call), tc.name)
				fn, err := m.Function("k")
				require.NoError(t, err, tc.name)
				assert.Equal(t, "k", fn.Name())
				require.NoError(t, m.Close())
				require.NoError(t, m.Close(), "a second Close")
				_, err = m.Function("k")
				assert.ErrorIs(t, err, driver.ErrClosed)
			}
			assert.Zero(t, f.Live(fakecuda.Modules))
		}},

		// Garbage is refused before the driver; the driver's own refusal
		// names the entry point; a closed or nil context is an error.
		fakeCase{"LoadImageErrors", func(t *testing.T, f *fakecuda.Fake) {
			c := gputest.FakeContext(t, 0)
			_, err := c.LoadImage([]byte{0x1f, 0x8b, 8, 0})
			assert.ErrorIs(t, err, driver.ErrInvalidArgument)
			assert.Zero(t, f.Calls("cuModuleLoadData"))
			f.Fail("cuModuleLoadData", 1, 200)
			_, err = c.LoadImage(fakeCubin())
			assert.ErrorIs(t, err, driver.ErrInvalidImage)
			assert.Contains(t, err.Error(), "cuda: cuModuleLoadData: CUDA_ERROR_INVALID_IMAGE (200)")
			_, err = (*driver.Context)(nil).LoadImage(fakeCubin())
			assert.ErrorIs(t, err, driver.ErrInvalidArgument)
			c2 := gputest.FakeContext(t, 1)
			require.NoError(t, c2.Close())
			_, err = c2.LoadImage(fakeFatbin(4))
			assert.ErrorIs(t, err, driver.ErrClosed)
			assert.Zero(t, f.Live(fakecuda.Modules))
		}},
	)
}
