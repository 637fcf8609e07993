package loader

import "strings"

// LoadLibraryEx flags (libloaderapi.h).
const (
	loadWithAlteredSearchPath = 0x00000008
	loadLibrarySearchSystem32 = 0x00000800
)

// windowsLoadFlags returns the LoadLibraryEx flags for a candidate path. A
// bare name such as "nvcuda.dll" is looked up in System32 alone: the default
// search order starts with the program's directory and the current one,
// which lets anyone who can drop a file there be loaded in the driver's
// place (DLL preloading). A path with a directory loads that file, and
// resolves its own dependencies beside it.
func windowsLoadFlags(path string) uint32 {
	if strings.ContainsAny(path, `\/:`) {
		return loadWithAlteredSearchPath
	}
	return loadLibrarySearchSystem32
}
