package workflows_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/packs/mangrove"

	"github.com/toolgate/toolgate/policy"
	historypb "go.temporal.io/api/history/v1"
)

// specFlips change one field of a tool's spec each, as a redeploy might.
var specFlips = map[string]func(*policy.ToolSpec){
	"idempotent": func(s *policy.ToolSpec) {
		// A write made idempotent says its upstream dedupes (policy.New):
		// the redeploy changes both.
		s.Idempotent = !s.Idempotent
		s.Route.Dedupes = s.Idempotent && s.Route.Method == "POST"
	},
	"requires credential": func(s *policy.ToolSpec) { s.RequiresCredential = !s.RequiresCredential },
	"dry run":             func(s *policy.ToolSpec) { s.DryRun = !s.DryRun },
	"timeout":             func(s *policy.ToolSpec) { s.Timeout *= 3 },
	"tier": func(s *policy.ToolSpec) {
		if s.Tier == policy.TierRead {
			s.Tier = policy.TierWrite
		} else {
			// A read's route is a GET (policy.New): the redeploy changes both.
			s.Tier, s.Route.Method = policy.TierRead, "GET"
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
	replays := 0
	for i, spec := range mangrove.Tools {
		for field, flip := range specFlips {
			flipped := flippedPolicy(t, i, flip)
			for _, f := range byTool[spec.Name] {
				replays++
				if err := replayFileWith(f, flipped); err != nil {
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
	for i, spec := range mangrove.Tools {
		if spec.Name != tool {
			continue
		}
		for field, flip := range specFlips {
			flipped, err := flipped(i, flip)
			if err != nil {
				return err
			}
			if err := replayWith(h, workflowID, flipped); err != nil {
				return fmt.Errorf("with %s's %s flipped the history no longer replays: %w", tool, field, err)
			}
		}
	}
	return nil
}

// flipped is the Mangrove pack's policy with one field of tool i's spec flipped.
func flipped(i int, flip func(*policy.ToolSpec)) (*policy.Policy, error) {
	d := mangrove.Policy()
	flip(&d.Tools[i])
	return policy.New(d)
}

// flippedPolicy is flipped, for a test.
func flippedPolicy(t *testing.T, i int, flip func(*policy.ToolSpec)) *policy.Policy {
	t.Helper()
	p, err := flipped(i, flip)
	if err != nil {
		t.Fatalf("flipped spec: %v", err)
	}
	return p
}
