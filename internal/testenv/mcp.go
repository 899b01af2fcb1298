package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// ReferenceServer is the command that starts one of the official MCP
// reference servers from npm (examples/mcp, pinned by its lock file and
// installed by make node) over stdio: its bin name ("mcp-server-filesystem",
// "mcp-server-memory") and its args. Without Node.js or the package the
// test skips, or fails under TOOLGATE_REQUIRE_SERVICES=1.
func ReferenceServer(t testing.TB, bin string, args ...string) []string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	path, _ := filepath.Abs(filepath.Join(filepath.Dir(file), "..", "..", "examples", "mcp", "node_modules", ".bin", bin))
	_, nodeErr := exec.LookPath("node")
	if _, err := os.Stat(path); err != nil || nodeErr != nil {
		unavailable(t, "Node.js or the reference server %s is missing (make node installs it): %v %v", bin, err, nodeErr)
	}
	return append([]string{path}, args...)
}

// Build builds the named main packages of the module (e.g. "./worker")
// into a folder of the test's and returns it, for tests that run and kill
// toolgate's own processes.
func Build(t testing.TB, pkgs ...string) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	dir := t.TempDir()
	build := exec.Command("go", append([]string{"build", "-o", dir + "/"}, pkgs...)...)
	build.Dir = filepath.Join(filepath.Dir(file), "..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build %v: %v\n%s", pkgs, err, out)
	}
	return dir
}
