package packtest_test

import (
	"path/filepath"
	"testing"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/pack/packtest"
	"github.com/toolgate/toolgate/packs/mangrove"
)

// TestTheKitOverEveryPackInTheTree: the core's second pack (the library:
// no stores, no money, no dry run) and every example pack file, each beside
// Mangrove as a deployment loads them (the reference pack's tools as
// their servers' definitions were accepted, in its pins file).
func TestTheKitOverEveryPackInTheTree(t *testing.T) {
	t.Run("library", func(t *testing.T) { packtest.Chain(t, testenv.LibraryPack(), mangrove.Policy()) })
	// The folder the reference pack's MCP servers work in, which its
	// example paths are under.
	t.Setenv("TOOLGATE_SCRATCH", "/srv/scratch")
	files, err := filepath.Glob("../../examples/packs/*.yaml")
	if err != nil || len(files) < 3 {
		t.Fatalf("the example packs: %v %v", files, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) { packtest.ChainFile(t, f, mangrove.Policy()) })
	}
}
