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
