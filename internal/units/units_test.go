package units

import "testing"

func TestBytes(t *testing.T) {
	for _, c := range []struct {
		b           int64
		table, errs string
	}{
		{0, "0 B", "0 B"},
		{1023, "1023 B", "1023 B"},
		{1024, "1.0 KiB", "1 KiB"},
		{1536, "1.5 KiB", "1.5 KiB"},
		{12 << 20, "12.0 MiB", "12 MiB"},
		{3 << 29, "1.5 GiB", "1.5 GiB"},
		{150 << 30, "150.0 GiB", "150 GiB"},
		{2 << 40, "2048.0 GiB", "2 TiB"},
		{-5, "-5 B", "-5 B"},
	} {
		if got := Bytes(c.b); got != c.table {
			t.Errorf("Bytes(%d) = %q, want %q", c.b, got, c.table)
		}
		if got := Short(c.b); got != c.errs {
			t.Errorf("Short(%d) = %q, want %q", c.b, got, c.errs)
		}
	}
}
