package driver

import (
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ipcChildEnv carries the handles from TestGPUIPC to its child process:
// the memory handle, the buffer's length and the event handle, in hex.
const ipcChildEnv = "OVERLAP_IPC_CHILD"

// ipcByte is byte i of the buffer that TestGPUIPC shares; its child writes
// it back complemented.
func ipcByte(i int) byte { return byte(i*31 + i>>9) }

// TestGPUIPC shares a 24 MiB buffer and an interprocess event with a
// second process of the same test binary (TestGPUIPCChild): the parent
// fills the buffer on a stream and records the event; the child opens
// both, waits on the event, checks every byte, writes every byte back
// complemented and records the event; the parent then checks every byte
// of the child's writes.
func TestGPUIPC(t *testing.T) {
	ctx := requireGPU(t)
	const n = 24<<20 + 5
	want := make([]byte, n)
	for i := range want {
		want[i] = ipcByte(i)
	}
	b, err := ctx.Alloc(n)
	require.NoError(t, err)
	defer b.Close()
	h, err := ctx.AllocHost(n, HostAllocOptions{})
	require.NoError(t, err)
	defer h.Close()
	copy(h.Bytes(), want)
	s, err := ctx.NewStream(StreamOptions{})
	require.NoError(t, err)
	defer s.Close()
	e, err := ctx.NewIPCEvent()
	require.NoError(t, err)
	defer e.Close()
	require.NoError(t, s.CopyToDevice(b, 0, h, 0, n))
	require.NoError(t, e.Record(s))
	mh, err := b.IPCHandle()
	require.NoError(t, err)
	eh, err := e.IPCHandle()
	require.NoError(t, err)

	// Opening one's own handle: the driver's answer, logged.
	if own, err := ctx.OpenIPCMem(mh, n); err != nil {
		t.Logf("opening the process's own handle: %v", err)
	} else {
		t.Logf("the driver opened the process's own handle")
		assert.NoError(t, own.Close())
	}

	cmd := exec.Command(os.Args[0], "-test.run=^TestGPUIPCChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%d,%s", ipcChildEnv, hex.EncodeToString(mh[:]), n, hex.EncodeToString(eh[:])))
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "child: %s", out)
	require.Contains(t, string(out), "ipc child: checked and rewrote", "the child ran, not skipped: %s", out)

	require.NoError(t, s.Synchronize())
	got := make([]byte, n)
	require.NoError(t, b.CopyToHost(got, 0))
	for i := range got {
		if got[i] != ^want[i] {
			t.Fatalf("byte %d after the child: %#x, want %#x", i, got[i], ^want[i])
		}
	}
}

// TestGPUIPCChild is TestGPUIPC's second process; it skips unless run by
// it.
func TestGPUIPCChild(t *testing.T) {
	arg := os.Getenv(ipcChildEnv)
	if arg == "" {
		t.Skip("run by TestGPUIPC")
	}
	ctx := requireGPU(t)
	parts := strings.Split(arg, ",")
	require.Len(t, parts, 3)
	var mh IPCMemHandle
	var eh IPCEventHandle
	m, err := hex.DecodeString(parts[0])
	require.NoError(t, err)
	copy(mh[:], m)
	n, err := strconv.Atoi(parts[1])
	require.NoError(t, err)
	ev, err := hex.DecodeString(parts[2])
	require.NoError(t, err)
	copy(eh[:], ev)

	e, err := ctx.OpenIPCEvent(eh)
	require.NoError(t, err)
	defer e.Close()
	require.NoError(t, e.Synchronize(), "the parent's copy is done")
	b, err := ctx.OpenIPCMem(mh, n)
	require.NoError(t, err)
	got := make([]byte, n)
	require.NoError(t, b.CopyToHost(got, 0))
	for i := range got {
		if got[i] != ipcByte(i) {
			t.Fatalf("byte %d in the child: %#x, want %#x", i, got[i], ipcByte(i))
		}
		got[i] = ^got[i]
	}
	require.NoError(t, b.CopyFromHost(0, got))
	s, err := ctx.NewStream(StreamOptions{})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, e.Record(s))
	require.NoError(t, s.Synchronize())
	require.NoError(t, b.Close())
	t.Logf("ipc child: checked and rewrote %d bytes", n)
}
