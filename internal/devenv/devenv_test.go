package devenv_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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

// TestASecondShellTakesTheRunningStacksSettings: a running make dev's
// settings fill what the shell leaves unset, and never override what it
// sets.
func TestASecondShellTakesTheRunningStacksSettings(t *testing.T) {
	path := write(t, devenv.PIDKey+"="+strconv.Itoa(os.Getpid())+"\nTOOLGATE_DEV=1\nDEVENV_TEST_URL=postgres://x/y?a=b\nDEVENV_TEST_KEPT=from-make-dev\n")
	t.Setenv("TOOLGATE_DEV", "")
	os.Unsetenv("TOOLGATE_DEV")
	t.Setenv("DEVENV_TEST_URL", "")
	os.Unsetenv("DEVENV_TEST_URL")
	t.Setenv("DEVENV_TEST_KEPT", "from-the-shell")
	got, err := devenv.Load()
	if err != nil || got != path {
		t.Fatalf("Load: %q %v, want %s", got, err, path)
	}
	for k, want := range map[string]string{"TOOLGATE_DEV": "1", "DEVENV_TEST_URL": "postgres://x/y?a=b", "DEVENV_TEST_KEPT": "from-the-shell"} {
		if v := os.Getenv(k); v != want {
			t.Errorf("%s = %q, want %q", k, v, want)
		}
	}
}

// TestAStoppedStacksSettingsAreNotRead: a file whose make dev has exited
// (or that names none) sets nothing, dev mode least of all, and says why.
func TestAStoppedStacksSettingsAreNotRead(t *testing.T) {
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	for lines, want := range map[string]error{
		devenv.PIDKey + "=" + strconv.Itoa(gone.Process.Pid) + "\nTOOLGATE_DEV=1\n": devenv.ErrStopped,
		"TOOLGATE_DEV=1\n":                nil,
		"TOOLGATE_DEV=1\nnot a setting\n": nil,
	} {
		write(t, lines)
		t.Setenv("TOOLGATE_DEV", "")
		os.Unsetenv("TOOLGATE_DEV")
		_, err := devenv.Load()
		if err == nil || want != nil && !errors.Is(err, want) {
			t.Errorf("%q: %v, want an error (%v)", lines, err, want)
		}
		if _, set := os.LookupEnv("TOOLGATE_DEV"); set {
			t.Errorf("%q set TOOLGATE_DEV", lines)
		}
	}
}

// TestNoFileIsNoSettings: without make dev there is nothing to read.
func TestNoFileIsNoSettings(t *testing.T) {
	t.Chdir(t.TempDir())
	if got, err := devenv.Load(); got != "" || err != nil {
		t.Fatalf("Load with no file: %q %v", got, err)
	}
}

// TestAShellsOwnPacksTakeNoneOfMakeDevsPackSettings: a shell that names
// its own packs is not handed make dev's upstreams, queues or exchanges,
// which name packs it does not load; the rest still come.
func TestAShellsOwnPacksTakeNoneOfMakeDevsPackSettings(t *testing.T) {
	write(t, devenv.PIDKey+"="+strconv.Itoa(os.Getpid())+"\nTOOLGATE_PACKS=mangrove,northgate\nTOOLGATE_UPSTREAMS=northgate=http://127.0.0.1:8085\nTOOLGATE_TASK_QUEUES=northgate=q\nDEVENV_TEST_DB=postgres://x\n")
	t.Setenv("TOOLGATE_PACKS", "mangrove,my.yaml")
	for _, k := range []string{"TOOLGATE_UPSTREAMS", "TOOLGATE_TASK_QUEUES", "DEVENV_TEST_DB"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	if _, err := devenv.Load(); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"TOOLGATE_PACKS": "mangrove,my.yaml", "TOOLGATE_UPSTREAMS": "", "TOOLGATE_TASK_QUEUES": "", "DEVENV_TEST_DB": "postgres://x"} {
		if v := os.Getenv(k); v != want {
			t.Errorf("%s = %q, want %q", k, v, want)
		}
	}
}
