package workflows_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/policy"
	historypb "go.temporal.io/api/history/v1"
)

// specFlips change one field of a tool's spec each, as a redeploy might.
var specFlips = map[string]func(*policy.ToolSpec){
	"idempotent":          func(s *policy.ToolSpec) { s.Idempotent = !s.Idempotent },
	"requires credential": func(s *policy.ToolSpec) { s.RequiresCredential = !s.RequiresCredential },
	"dry run":             func(s *policy.ToolSpec) { s.DryRun = !s.DryRun },
	"timeout":             func(s *policy.ToolSpec) { s.Timeout *= 3 },
	"tier": func(s *policy.ToolSpec) {
		if s.Tier == policy.TierRead {
			s.Tier = policy.TierWrite
		} else {
			s.Tier = policy.TierRead
		}
	},
}

// TestSpecChangesDoNotBreakCallsInFlight flips each spec field of each tool
// and replays every golden history of a call to that tool: the facts a call
// acts on are the ones recorded with its verdict, never the live spec.
func TestSpecChangesDoNotBreakCallsInFlight(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(goldenDir, "*.json"))
	byTool := map[string][]string{}
	for _, f := range files {
		name, _, _ := strings.Cut(strings.TrimSuffix(filepath.Base(f), ".json"), ".")
		for _, p := range goldenPaths {
			if p.name == name {
				byTool[p.in.Tool] = append(byTool[p.in.Tool], f)
			}
		}
	}
	shipped := slices.Clone(policy.Tools)
	t.Cleanup(func() { policy.Tools = shipped })
	replays := 0
	for i, spec := range shipped {
		for field, flip := range specFlips {
			policy.Tools = slices.Clone(shipped)
			flip(&policy.Tools[i])
			for _, f := range byTool[spec.Name] {
				replays++
				if err := replayFile(f); err != nil {
					t.Errorf("%s with %s flipped: %s no longer replays: %v", spec.Name, field, filepath.Base(f), err)
				}
			}
		}
	}
	if replays < len(specFlips)*len(files)/2 {
		t.Fatalf("only %d replays: the golden files are not matched to their tools", replays)
	}
	t.Logf("%d replays with one spec field flipped", replays)
}

// replayWithFlips replays a history once per spec flip of its tool.
func replayWithFlips(h *historypb.History, tool, workflowID string) error {
	shipped := slices.Clone(policy.Tools)
	defer func() { policy.Tools = shipped }()
	for i, spec := range shipped {
		if spec.Name != tool {
			continue
		}
		for field, flip := range specFlips {
			policy.Tools = slices.Clone(shipped)
			flip(&policy.Tools[i])
			if err := replay(h, workflowID); err != nil {
				return fmt.Errorf("with %s's %s flipped the history no longer replays: %w", tool, field, err)
			}
		}
	}
	return nil
}
