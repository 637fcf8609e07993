package sim_test

import (
	"os"
	"testing"

	"github.com/purecuda/overlap/internal/gputest"
)

// TestMain bounds the test process's Go memory (gputest.TestMemoryLimit
// says why).
func TestMain(m *testing.M) { os.Exit(gputest.RunWithMemoryLimit(m)) }
