package activities_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/toolgate/toolgate/packs/mangrove"

	"github.com/toolgate/toolgate/activities"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/policy"
	"go.uber.org/zap"
)

// TestEveryLimitHoldsUnderConcurrency loops over every rate and spend limit
// of the policy table: with the bucket filled to 3 below its cap, 20
// admissions at once admit exactly 3. A new limit is covered the day it is
// added.
func TestEveryLimitHoldsUnderConcurrency(t *testing.T) {
	p := testenv.Policy
	const room, burst = 3, 20
	for _, row := range mangrove.Table {
		for i, l := range row.Limits {
			for _, kind := range []string{"calls", "cents"} {
				if (kind == "calls" && l.MaxCalls == 0) || (kind == "cents" && l.MaxCents == 0) {
					continue
				}
				t.Run(fmt.Sprintf("%s/%d/%s", row.Tool, i, kind), func(t *testing.T) {
					url := testenv.Database(t)
					a := testenv.NewActivities(testenv.AppPool(t, url), "http://unused", zap.NewNop())
					spec, _ := p.Spec(row.Tool)
					sess := policy.Session{UserID: "kofi", Role: mangrove.RoleAreaManager, Resources: mangrove.Stores(115), SessionID: "s", ConversationID: "c", CredentialRef: "cred-kofi"}
					value := int64(960)
					if row.HardLimitCents > 0 && value > row.HardLimitCents {
						value = row.HardLimitCents
					}
					req := policy.Request{Tool: row.Tool, Args: json.RawMessage(spec.Example), Session: sess}
					in := activities.AdmitInput{Verdict: p.Check(req, &value), Tool: row.Tool, Session: sess, ValueCents: &value}
					if v := in.Verdict; v.Code != policy.CodeOK {
						t.Fatalf("the example call does not pass steps 0-6: %s %s", v.Code, v.Message)
					}
					// Fill the bucket straight into audit_log, as earlier calls would have.
					seed := 0
					var seedValue int64
					if kind == "calls" {
						seed = l.MaxCalls - room
					} else {
						seed, seedValue = 1, l.MaxCents-room*value
					}
					owner := testenv.OwnerPool(t, url)
					for n := range seed {
						v := seedValue / int64(seed)
						if _, err := owner.Exec(context.Background(), `INSERT INTO audit_log (event, reason, tool, user_id, role, session_id, conversation_id, store_id, value_cents, workflow_id, run_id, event_key)
							VALUES ('allowed', 'ok', $1, 'kofi', 'area_manager', 's', 'c', 115, $2, $3, 'run', 'decision')`, row.Tool, v, fmt.Sprint("seed-", n)); err != nil {
							t.Fatal(err)
						}
					}
					var wg sync.WaitGroup
					var mu sync.Mutex
					admitted := 0
					start := make(chan struct{})
					for n := range burst {
						wg.Add(1)
						go func() {
							defer wg.Done()
							<-start
							v, err := a.AdmitRun(context.Background(), fmt.Sprint("burst-", n), "run", in)
							if err != nil {
								t.Error(err)
								return
							}
							if v.Code != policy.CodeOK && v.Code != policy.CodeRateLimit {
								t.Errorf("unexpected %s", v.Code)
							}
							mu.Lock()
							if v.Code == policy.CodeOK {
								admitted++
							}
							mu.Unlock()
						}()
					}
					close(start)
					wg.Wait()
					if admitted != room {
						t.Fatalf("%d of %d admitted with room for %d", admitted, burst, room)
					}
				})
			}
		}
	}
}
