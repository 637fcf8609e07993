package driver

import (
	"bytes"
	"encoding/binary"
	"runtime"
	"unicode/utf8"
)

// Image magic: a cubin is an ELF file for the CUDA machine; a fatbin starts
// with the fat binary header, whose magic, version, header size and size of
// what follows the header are little-endian.
const (
	elfMachineCUDA = 190 // EM_CUDA, the ELF header's e_machine
	fatbinMagic    = 0xBA55ED50
	fatbinHeader   = 16 // magic (4), version (2), header size (2), fat size (8)
)

// CheckImage tells what a module image holds, by its first bytes: a cubin
// (an ELF file for EM_CUDA), a fatbin (the fat binary magic 0xBA55ED50 and
// a header whose sizes fit the image) or PTX (UTF-8 text without control
// bytes, trailing NULs allowed). Anything else is an error for which
// errors.Is(err, ErrInvalidArgument) holds and that says what the image
// starts with. [DetectImage] guesses instead, PTX when in doubt.
func CheckImage(image []byte) (ImageKind, error) { return checkImage("CheckImage", image) }

// checkImage is CheckImage for op, whose errors it names.
func checkImage(op string, image []byte) (ImageKind, error) {
	switch {
	case len(image) == 0:
		return 0, argError(op, "empty image")
	case bytes.HasPrefix(image, []byte("\x7fELF")):
		if len(image) < 64 || image[4] != 2 {
			return 0, argError(op, "a %d-byte ELF file that is not 64-bit (class %d): not a cubin", len(image), at(image, 4))
		}
		if m := binary.LittleEndian.Uint16(image[18:]); m != elfMachineCUDA {
			return 0, argError(op, "an ELF file for machine %d, not a cubin (EM_CUDA, %d)", m, elfMachineCUDA)
		}
		return ImageCubin, nil
	case len(image) >= 4 && binary.LittleEndian.Uint32(image) == fatbinMagic:
		if len(image) < fatbinHeader {
			return 0, argError(op, "a fatbin of %d bytes, shorter than its %d-byte header", len(image), fatbinHeader)
		}
		hdr := uint64(binary.LittleEndian.Uint16(image[6:]))
		size := binary.LittleEndian.Uint64(image[8:])
		if hdr < fatbinHeader || size > uint64(len(image)) || hdr+size > uint64(len(image)) {
			return 0, argError(op, "a fatbin whose header (%d bytes) and contents (%d bytes) do not fit its %d bytes", hdr, size, len(image))
		}
		return ImageFatbin, nil
	}
	text := bytes.TrimRight(image, "\x00")
	if len(bytes.TrimSpace(text)) == 0 {
		return 0, argError(op, "PTX image of %d bytes holds no text", len(image))
	}
	if !utf8.Valid(text) {
		return 0, argError(op, "image starts with % x: neither a cubin (ELF), a fatbin nor PTX text (not UTF-8)", head(image))
	}
	for i, c := range text {
		if c < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != '\f' && c != '\v' || c == 0x7f {
			return 0, argError(op, "image starts with % x: neither a cubin (ELF), a fatbin nor PTX text (byte %#02x at offset %d)", head(image), c, i)
		}
	}
	return ImagePTX, nil
}

func at(b []byte, i int) int {
	if i < len(b) {
		return int(b[i])
	}
	return -1
}

func head(b []byte) []byte { return b[:min(len(b), 8)] }

// LoadImage loads a module image whose kind [CheckImage] tells: PTX
// through [Context.LoadModule] with the default options, a cubin with
// cuModuleLoadData and a fatbin with cuModuleLoadFatBinary, neither of
// which JIT-compiles (a fatbin's PTX is compiled only when it holds no
// cubin for the device). An image of no known kind is refused before the
// driver sees it. The caller owns the Module and must Close it.
func (c *Context) LoadImage(image []byte) (*Module, error) {
	const op = "Context.LoadImage"
	if c == nil || c.core == nil {
		return nil, argError(op, "nil *Context")
	}
	kind, err := checkImage(op, image)
	if err != nil {
		return nil, err
	}
	if kind == ImagePTX {
		return c.LoadModule(image, ModuleOptions{})
	}
	img := append([]byte(nil), image...)
	k, err := c.begin(op)
	if err != nil {
		return nil, err
	}
	defer k.end()
	var h uintptr
	if kind == ImageCubin {
		err = cuModuleLoadData(&h, &img[0])
	} else {
		err = cuModuleLoadFatBinary(&h, &img[0])
	}
	runtime.KeepAlive(img)
	if err != nil {
		return nil, err
	}
	r, err := k.adopt(op, kindModule, h, nil)
	if err != nil {
		return nil, err
	}
	m := &Module{}
	own(m, &m.owned, c, r, true)
	return m, nil
}
