package main

import (
	"strings"
	"testing"
)

// TestCallRefusesAToolItsPacksLack: a starter that does not load a tool's
// pack would start its call on the wrong task queue with its free text
// unredacted; it refuses before reaching Temporal and says what to set.
func TestCallRefusesAToolItsPacksLack(t *testing.T) {
	t.Setenv("TOOLGATE_PACKS", "mangrove")
	t.Setenv("TEMPORAL_ADDRESS", "127.0.0.1:1") // never dialled
	var out strings.Builder
	err := run([]string{"call", "--tool", "search_policy_knowledge", "--call-id", "k1", "--conversation", "c1", "--user", "meera", "--role", "member",
		"--args", `{"query":"call me on +91 98450 77123"}`}, &out)
	if err == nil || !strings.Contains(err.Error(), `"search_policy_knowledge" is not a tool of the packs this starter loads (mangrove): set TOOLGATE_PACKS`) {
		t.Fatalf("a PlanCover tool from a Mangrove starter: %v", err)
	}
}
