// Package devenv lets a command typed in a second shell beside make dev use
// the dev stack's settings, so nothing in the README needs a variable set
// by hand. While it runs, make dev (scripts/dev.sh) writes the settings its
// processes were started with to .dev/env, with its own process ID; a
// command that finds that file, written by a make dev still running, takes
// each setting its own environment leaves unset (of those that name make
// dev's packs, none when it names its own packs). make dev removes the file
// when it stops, and a file whose make dev is gone is not read, so dev mode
// (TOOLGATE_DEV=1, which the demo sign-in and demo secrets need) is only
// ever the running make dev's.
package devenv

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// File is where make dev writes its settings, from the repository root.
const File = ".dev/env"

// PIDKey names the line of File that holds make dev's process ID.
const PIDKey = "TOOLGATE_DEV_PID"

// packBound are the settings that name make dev's packs: a shell that
// names its own packs (TOOLGATE_PACKS) takes none of them.
var packBound = []string{"TOOLGATE_UPSTREAMS", "TOOLGATE_TASK_QUEUES", "TOOLGATE_EXCHANGE_PACKS", "TOOLGATE_RESOURCE_CLAIMS"}

// ErrStopped is Load's error for a File whose make dev is no longer running.
var ErrStopped = errors.New("the make dev that wrote it is no longer running")

// Load reads File beside the running executable's folder (bin/.. of the
// checkout the binary was built in), never the working directory's, and
// sets each of its settings the environment does not. It returns the file
// it read, "" when there is none, and ErrStopped (wrapped, naming the file)
// when the make dev that wrote it has stopped.
func Load() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", nil
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return "", nil
	}
	path := filepath.Join(filepath.Dir(filepath.Dir(exe)), File)
	if err := LoadFile(path); errors.Is(err, os.ErrNotExist) {
		return "", nil
	} else if err != nil {
		return path, err
	}
	return path, nil
}

// LoadFile is Load of one file: it must be this user's alone (mode 0600
// or stricter) and name a make dev (scripts/dev.sh) still running as this
// user; else it sets nothing and says why.
func LoadFile(path string) error {
	info, err := os.Stat(path)
	if err != nil {
		return err
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() || info.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("%s: not this user's alone (mode %v), so not read; remove it", path, info.Mode().Perm())
	}
	settings, err := read(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	pid, err := strconv.Atoi(settings[PIDKey])
	if err != nil || pid <= 0 {
		return fmt.Errorf("%s: no %s line, so not make dev's; remove it", path, PIDKey)
	}
	if !running(pid) {
		return fmt.Errorf("%s: %w (process %d)", path, ErrStopped, pid)
	}
	_, ownPacks := os.LookupEnv("TOOLGATE_PACKS")
	for k, v := range settings {
		if ownPacks && slices.Contains(packBound, k) {
			continue
		}
		if _, set := os.LookupEnv(k); !set {
			if err := os.Setenv(k, v); err != nil {
				return fmt.Errorf("%s: %s: %w", path, k, err)
			}
		}
	}
	return nil
}

// Missing says what to do when a dev-only command finds no dev mode: start
// make dev, or start it again when the file found is from one that stopped.
func Missing(found string, err error) string {
	if errors.Is(err, ErrStopped) {
		return fmt.Sprintf("%s is from a make dev that has stopped: start make dev again in another shell", found)
	}
	return "start make dev in another shell (this command then reads its settings from " + File + ")"
}

// read parses File: NAME=value lines, the value as written to the end of
// the line.
func read(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	settings := map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("line %d is not NAME=value", n)
		}
		settings[k] = v
	}
	return settings, sc.Err()
}

// running reports whether the process with this ID is make dev's script,
// run by this user: a process of another user (EPERM), or one whose
// command line names no dev.sh (an ID reused), is not.
func running(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if errors.Is(err, os.ErrNotExist) {
		if _, statErr := os.Stat("/proc/self"); statErr != nil {
			return true // no /proc on this system: the signal check is all there is
		}
		return false
	}
	return err == nil && strings.Contains(string(cmdline), "dev.sh")
}
