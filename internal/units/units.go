// Package units writes byte counts the two ways overlap prints them: in
// tables, with one decimal ("1.5 GiB", "12.0 MiB", "12 B"), and in
// errors, without a trailing ".0" ("150 GiB", "1.5 MiB", "12 B").
package units

import (
	"fmt"
	"strings"
)

var binary = [...]struct {
	shift uint
	name  string
}{{40, "TiB"}, {30, "GiB"}, {20, "MiB"}, {10, "KiB"}}

// Bytes writes b for a table: the largest binary unit up to GiB that
// fits, with one decimal, or bytes.
func Bytes(b int64) string {
	for _, u := range binary[1:] {
		if b >= 1<<u.shift {
			return fmt.Sprintf("%.1f %s", float64(b)/float64(int64(1)<<u.shift), u.name)
		}
	}
	return fmt.Sprintf("%d B", b)
}

// Short writes b for an error: the largest binary unit up to TiB that
// fits, with one decimal unless it is ".0", or bytes.
func Short(b int64) string {
	for _, u := range binary {
		if b >= 1<<u.shift {
			s := strings.TrimSuffix(fmt.Sprintf("%.1f", float64(b)/float64(int64(1)<<u.shift)), ".0")
			return s + " " + u.name
		}
	}
	return fmt.Sprintf("%d B", b)
}
