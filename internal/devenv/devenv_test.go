package devenv_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/devenv"
)

// write puts a .dev/env holding lines under a new working directory.
func write(t *testing.T, lines string) string {
	t.Helper()
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.MkdirAll(filepath.Join(dir, ".dev"), 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, devenv.File)
	if err := os.WriteFile(path, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// makeDev is a live process whose command line names dev.sh, as make
// dev's is; its ID goes in the file.
func makeDev(t *testing.T) string {
	t.Helper()
	// Two commands, so bash stays the process (one it would exec in
	// place, and the ID would name a sleep, not a dev.sh).
	cmd := exec.Command("bash", "-c", "sleep 60; exit 0", "dev.sh")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return strconv.Itoa(cmd.Process.Pid)
}

// TestASecondShellTakesTheRunningStacksSettings: a running make dev's
// settings fill what the shell leaves unset, and never override what it
// sets.
func TestASecondShellTakesTheRunningStacksSettings(t *testing.T) {
	path := write(t, devenv.PIDKey+"="+makeDev(t)+"\nTOOLGATE_DEV=1\nDEVENV_TEST_URL=postgres://x/y?a=b\nDEVENV_TEST_KEPT=from-make-dev\n")
	t.Setenv("TOOLGATE_DEV", "")
	os.Unsetenv("TOOLGATE_DEV")
	t.Setenv("DEVENV_TEST_URL", "")
	os.Unsetenv("DEVENV_TEST_URL")
	t.Setenv("DEVENV_TEST_KEPT", "from-the-shell")
	if err := devenv.LoadFile(path); err != nil {
		t.Fatalf("LoadFile: %v", err)
	}
	for k, want := range map[string]string{"TOOLGATE_DEV": "1", "DEVENV_TEST_URL": "postgres://x/y?a=b", "DEVENV_TEST_KEPT": "from-the-shell"} {
		if v := os.Getenv(k); v != want {
			t.Errorf("%s = %q, want %q", k, v, want)
		}
	}
}

// TestAStoppedStacksSettingsAreNotRead: a file whose make dev has exited,
// whose process is not a make dev (this test, an ID reused), that names
// none, or that others may read or write, sets nothing, dev mode least of
// all, and says why.
func TestAStoppedStacksSettingsAreNotRead(t *testing.T) {
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	live := makeDev(t)
	for _, c := range []struct {
		lines string
		mode  os.FileMode
		want  error
		// says is what the refusal names, when it is no sentinel.
		says string
	}{
		{devenv.PIDKey + "=" + strconv.Itoa(gone.Process.Pid) + "\nTOOLGATE_DEV=1\n", 0o600, devenv.ErrStopped, ""},
		{devenv.PIDKey + "=" + strconv.Itoa(os.Getpid()) + "\nTOOLGATE_DEV=1\n", 0o600, devenv.ErrStopped, ""},
		{devenv.PIDKey + "=1\nTOOLGATE_DEV=1\n", 0o600, devenv.ErrStopped, ""},
		{devenv.PIDKey + "=" + live + "\nTOOLGATE_DEV=1\n", 0o644, nil, "not this user's alone"},
		{devenv.PIDKey + "=" + live + "\nTOOLGATE_DEV=1\n", 0o620, nil, "not this user's alone"},
		{"TOOLGATE_DEV=1\n", 0o600, nil, "no " + devenv.PIDKey + " line"},
		{"TOOLGATE_DEV=1\nnot a setting\n", 0o600, nil, "line 2 is not NAME=value"},
	} {
		path := write(t, c.lines)
		if err := os.Chmod(path, c.mode); err != nil {
			t.Fatal(err)
		}
		t.Setenv("TOOLGATE_DEV", "")
		os.Unsetenv("TOOLGATE_DEV")
		err := devenv.LoadFile(path)
		if err == nil || c.want != nil && !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%q (%v): %v, want an error (%v)", c.lines, c.mode, err, c.want)
		}
		if _, set := os.LookupEnv("TOOLGATE_DEV"); set {
			t.Errorf("%q (%v) set TOOLGATE_DEV", c.lines, c.mode)
		}
	}
}

// TestAWorkingDirectorysFileIsNotRead: Load reads the file beside the
// binary's checkout alone, never one in the working directory, where
// anyone who can write a folder could plant one.
func TestAWorkingDirectorysFileIsNotRead(t *testing.T) {
	write(t, devenv.PIDKey+"="+makeDev(t)+"\nTOOLGATE_DEV=1\n")
	t.Setenv("TOOLGATE_DEV", "")
	os.Unsetenv("TOOLGATE_DEV")
	if got, err := devenv.Load(); got != "" || err != nil {
		t.Fatalf("Load with a file in the working directory: %q %v", got, err)
	}
	if _, set := os.LookupEnv("TOOLGATE_DEV"); set {
		t.Error("a working directory's file set TOOLGATE_DEV")
	}
}

// TestAShellsOwnPacksTakeNoneOfMakeDevsPackSettings: a shell that names
// its own packs is not handed make dev's upstreams, queues or exchanges,
// which name packs it does not load; the rest still come.
func TestAShellsOwnPacksTakeNoneOfMakeDevsPackSettings(t *testing.T) {
	path := write(t, devenv.PIDKey+"="+makeDev(t)+"\nTOOLGATE_PACKS=mangrove,northgate\nTOOLGATE_UPSTREAMS=northgate=http://127.0.0.1:8085\nTOOLGATE_TASK_QUEUES=northgate=q\nDEVENV_TEST_DB=postgres://x\n")
	t.Setenv("TOOLGATE_PACKS", "mangrove,my.yaml")
	for _, k := range []string{"TOOLGATE_UPSTREAMS", "TOOLGATE_TASK_QUEUES", "DEVENV_TEST_DB"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	if err := devenv.LoadFile(path); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"TOOLGATE_PACKS": "mangrove,my.yaml", "TOOLGATE_UPSTREAMS": "", "TOOLGATE_TASK_QUEUES": "", "DEVENV_TEST_DB": "postgres://x"} {
		if v := os.Getenv(k); v != want {
			t.Errorf("%s = %q, want %q", k, v, want)
		}
	}
}
