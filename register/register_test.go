package register_test

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/packs"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/register"
)

// devPacks are the packs make dev runs (scripts/dev.sh): the register
// covers every one of them.
var devPacks = packs.MustLoad("mangrove,../examples/packs/carddesk.yaml,plancover,northgate").Policy

// TestEveryToolsGuardsAreProved: the register of make dev's packs builds,
// so every check each tool's calls pass has a guard in the guard-proof
// list, and every tool of the table is in it with the facts of its row.
func TestEveryToolsGuardsAreProved(t *testing.T) {
	p := devPacks
	r, err := register.Default(p)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(r.Tools); got != len(p.Names()) {
		t.Fatalf("%d tools in the register, %d in the table", got, len(p.Names()))
	}
	for _, e := range r.Tools {
		row, _ := p.Row(e.Tool)
		if e.Decision != p.Effective(e.Tool) || !slices.Equal(e.Roles, row.Roles) || len(e.Limits) != len(row.Limits) {
			t.Errorf("%s: the register says %s %v %v; the table %s %v %v", e.Tool, e.Decision, e.Roles, e.Limits, p.Effective(e.Tool), row.Roles, row.Limits)
		}
		if len(e.Checks) == 0 {
			t.Errorf("%s: no checks", e.Tool)
		}
		for _, c := range e.Checks {
			if len(c.Proofs) == 0 || len(c.Enforced) == 0 {
				t.Errorf("%s %s: proofs %v, enforced %v", e.Tool, c.ID, c.Proofs, c.Enforced)
			}
			for _, l := range c.Enforced {
				if l.Func == "" {
					t.Errorf("%s %s: a guard in %s has no function (go generate ./register)", e.Tool, c.ID, l.File)
				}
			}
		}
		if e.Decision == policy.DecisionApprove && (len(e.Routing) == 0 || len(e.Evidence) == 0) {
			t.Errorf("%s approves but names no routing or evidence: %+v", e.Tool, e)
		}
	}
}

// TestARemovedGuardProofFailsTheRegister: each guard proof, taken out of
// the list in turn, leaves the register incomplete exactly when it was a
// check's only proof; the checks with a single proof are named, so the
// loop never passes vacuously.
func TestARemovedGuardProofFailsTheRegister(t *testing.T) {
	gs, err := register.Guards()
	if err != nil {
		t.Fatal(err)
	}
	locs, _ := register.Locations()
	proofs := map[string]int{}
	for _, g := range gs {
		for _, c := range g.Checks {
			proofs[c]++
		}
	}
	full, err := register.Build(testenv.Policy, gs, locs)
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for _, e := range append(full.Tools, register.Entry{Checks: full.Deployment}) {
		for _, c := range e.Checks {
			used[c.ID] = true
		}
	}
	sole := 0
	for i, g := range gs {
		_, err := register.Build(testenv.Policy, slices.Delete(slices.Clone(gs), i, i+1), locs)
		only := slices.ContainsFunc(g.Checks, func(c string) bool { return proofs[c] == 1 && used[c] })
		if only {
			sole++
			if err == nil || !strings.Contains(err.Error(), "no guard proves") {
				t.Errorf("without %q (the only proof of one of %v) the register still builds", g.Name, g.Checks)
			}
		} else if err != nil {
			t.Errorf("without %q the register fails, though its checks %v have other proofs: %v", g.Name, g.Checks, err)
		}
	}
	if sole == 0 {
		t.Fatal("no check has a single proof, so this test removed nothing that mattered")
	}
	// Taking every proof of the chain's step 5 out names the tools left bare.
	bare := slices.DeleteFunc(slices.Clone(gs), func(g register.Guard) bool { return slices.Contains(g.Checks, "chain.resource_scope") })
	_, err = register.Build(testenv.Policy, bare, locs)
	if err == nil || !strings.Contains(err.Error(), `get_stock: no guard proves "chain.resource_scope"`) {
		t.Fatalf("without step 5's guards: %v", err)
	}
}

// TestLocationsAreCurrent: locations.json is what the source says today.
func TestLocationsAreCurrent(t *testing.T) {
	gs, err := register.Guards()
	if err != nil {
		t.Fatal(err)
	}
	now, err := register.Locate("..", gs)
	if err != nil {
		t.Fatal(err)
	}
	kept, err := register.Locations()
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(now, kept) {
		b, _ := json.MarshalIndent(now, "", "  ")
		t.Fatalf("register/locations.json is stale: run go generate ./register\nwant:\n%s", b)
	}
}

// TestGuardsNameKnownChecks: a guard tagged with a check the catalogue
// does not know fails the build of the register.
func TestGuardsNameKnownChecks(t *testing.T) {
	gs, _ := register.Guards()
	locs, _ := register.Locations()
	gs = append(slices.Clone(gs), register.Guard{Name: "stray", Checks: []string{"chain.nonsense"}, File: "policy/policy.go"})
	if _, err := register.Build(testenv.Policy, gs, locs); err == nil || !strings.Contains(err.Error(), `unknown check "chain.nonsense"`) {
		t.Fatalf("a guard of an unknown check: %v", err)
	}
}

// TestDocsRegisterIsCurrent: docs/register.md is what starter register
// prints today for make dev's packs (regenerate it with
// TOOLGATE_PACKS=mangrove,examples/packs/carddesk.yaml,plancover,northgate bin/starter register > docs/register.md).
func TestDocsRegisterIsCurrent(t *testing.T) {
	r, err := register.Default(devPacks)
	if err != nil {
		t.Fatal(err)
	}
	var now bytes.Buffer
	if err := register.Markdown(&now, r); err != nil {
		t.Fatal(err)
	}
	kept, err := os.ReadFile("../docs/register.md")
	if err != nil || !bytes.Equal(kept, now.Bytes()) {
		t.Fatalf("docs/register.md is stale (%v): run TOOLGATE_PACKS=mangrove,examples/packs/carddesk.yaml,plancover,northgate go run ./starter register > docs/register.md", err)
	}
}
