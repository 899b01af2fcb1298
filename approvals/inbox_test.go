package approvals_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/internal/synth"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/packs/mangrove"
	"github.com/toolgate/toolgate/policy"
)

// TestInboxAtVolume: with 100,000 cards pending and the decided cards of
// 200,000 calls kept, each approver's inbox is what the plain reading of
// its rule finds (pending, unexpired, routed or escalated to the role, over
// the resources held or none, newest first, at most 100), and the plan
// reads pending_action through its indexes alone: no sequential scan, and
// no more rows than its branches' pages.
func TestInboxAtVolume(t *testing.T) {
	ctx := context.Background()
	url := testenv.Database(t)
	owner := testenv.OwnerPool(t, url)
	anchor := time.Now()
	shape := synth.Retail
	if _, err := shape.LoadCalls(ctx, owner, anchor, 0, 200_000); err != nil {
		t.Fatal(err)
	}
	if err := shape.SetPending(ctx, owner, anchor, 100_000); err != nil {
		t.Fatal(err)
	}
	if _, err := owner.Exec(ctx, `ANALYZE pending_action`); err != nil {
		t.Fatal(err)
	}
	s := &approvals.Server{Pool: testenv.ServicePool(t, url, "approvals"), Policy: testenv.Policy}
	approvers := []struct {
		name string
		role policy.Role
		held policy.Resources
	}{
		{"a store manager of one store", mangrove.RoleStoreManager, mangrove.Stores(112)},
		{"an area manager of twelve", mangrove.RoleAreaManager, mangrove.Stores(110, 111, 112, 113, 114, 115, 116, 117, 118, 119, 120, 121)},
		{"an area manager of none", mangrove.RoleAreaManager, policy.Resources{}},
		{"a role no card is routed to", "auditor", mangrove.Stores(112)},
	}
	for _, a := range approvers {
		t.Run(a.name, func(t *testing.T) {
			cards, err := s.Inbox(ctx, a.role, a.held)
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			rows, err := owner.Query(ctx, `SELECT workflow_id FROM pending_action
				WHERE status = 'pending_approval' AND expires_at > now() AND (approver_role = $1 OR escalated_role = $1)
				  AND (resource_kind IS NULL OR resource_kind || '/' || resource_id = ANY($2))
				ORDER BY created_at DESC, workflow_id LIMIT 100`, string(a.role), a.held.Labels())
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var id string
				if err := rows.Scan(&id); err != nil {
					t.Fatal(err)
				}
				want = append(want, id)
			}
			got := make([]string, len(cards))
			for i, c := range cards {
				got[i] = c.WorkflowID
			}
			if !slices.Equal(got, want) {
				t.Fatalf("inbox of %d cards, want %d:\n got %v\nwant %v", len(got), len(want), head(got), head(want))
			}
			if a.role != "auditor" && len(got) == 0 {
				t.Fatalf("the inbox is empty: the synthetic cards reach no one, so this proves nothing")
			}
			var kinds, ids []string
			for kind, list := range a.held {
				for _, id := range list {
					kinds, ids = append(kinds, kind), append(ids, id)
				}
			}
			var plan []byte
			if err := owner.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+approvals.InboxSQL, string(a.role), kinds, ids, approvals.InboxSize).Scan(&plan); err != nil {
				t.Fatal(err)
			}
			seq, read := scans(t, plan, "pending_action")
			if seq > 0 {
				t.Fatalf("the inbox scans pending_action whole at 100,000 pending:\n%s", plan)
			}
			// Each branch (routed or escalated, each resource held or none)
			// reads at most a page of entries, and the page is then read.
			if bound := 2*approvals.InboxSize*(len(ids)+1) + approvals.InboxSize; read > bound {
				t.Fatalf("the inbox read %d rows of pending_action for %d cards (at most %d): it reads more than its branches' pages\n%s", read, len(got), bound, plan)
			}
		})
	}
	// A person's own waiting requests, listed beside their inbox: theirs
	// alone, newest first, read through the index of pending cards by
	// requester (a few hundred entries at most), never the table whole.
	t.Run("a person's own requests", func(t *testing.T) {
		var want, got int
		if err := owner.QueryRow(ctx, `SELECT count(*) FROM pending_action WHERE status = 'pending_approval' AND expires_at > now()
			AND requester_issuer = 'urn:synth' AND requester_subject = 'user-7'`).Scan(&want); err != nil || want == 0 {
			t.Fatalf("user-7 has %d pending requests (%v): the synthetic cards name no requester, so this proves nothing", want, err)
		}
		if err := owner.QueryRow(ctx, `SELECT count(*) FROM (`+approvals.MineSQL+`) m`, "urn:synth", "user-7", approvals.InboxSize).Scan(&got); err != nil || got != min(want, approvals.InboxSize) {
			t.Fatalf("user-7's requests: %d (%v), want %d", got, err, min(want, approvals.InboxSize))
		}
		var plan []byte
		if err := owner.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+approvals.MineSQL, "urn:synth", "user-7", approvals.InboxSize).Scan(&plan); err != nil {
			t.Fatal(err)
		}
		if seq, read := scans(t, plan, "pending_action"); seq > 0 || read > 2*approvals.InboxSize {
			t.Fatalf("a person's requests scan pending_action whole (%d) or read %d rows of it:\n%s", seq, read, plan)
		}
	})
}

// scans counts a plan's sequential scans of relation, and the rows its
// scans of relation read (returned, or read and filtered away).
func scans(t *testing.T, plan []byte, relation string) (seq, read int) {
	t.Helper()
	var top []struct {
		Plan map[string]any `json:"Plan"`
	}
	if err := json.Unmarshal(plan, &top); err != nil || len(top) != 1 {
		t.Fatalf("plan: %v %s", err, plan)
	}
	var walk func(n map[string]any)
	walk = func(n map[string]any) {
		if n["Relation Name"] == relation {
			if n["Node Type"] == "Seq Scan" {
				seq++
			}
			loops, _ := n["Actual Loops"].(float64)
			for _, f := range []string{"Actual Rows", "Rows Removed by Filter", "Rows Removed by Index Recheck"} {
				if v, ok := n[f].(float64); ok {
					read += int(v * max(loops, 1))
				}
			}
		}
		kids, _ := n["Plans"].([]any)
		for _, k := range kids {
			if m, ok := k.(map[string]any); ok {
				walk(m)
			}
		}
	}
	walk(top[0].Plan)
	return seq, read
}

func head(ids []string) string {
	if len(ids) > 5 {
		ids = ids[:5]
	}
	return strings.Join(ids, " ")
}
