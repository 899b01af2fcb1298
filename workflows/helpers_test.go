package workflows_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/workflows"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/encoding/protojson"
)

// awaitResult waits at most within for a run's result; what says what was
// expected of it when it does not come.
func awaitResult(t *testing.T, run client.WorkflowRun, within time.Duration, what string) workflows.ToolCallResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var res workflows.ToolCallResult
	if err := run.Get(ctx, &res); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return res
}

// historyTexts is everything a call's history says: each event as stored
// (payloads encrypted) and each payload decrypted, the start input left out
// when withInput is false.
func historyTexts(t *testing.T, s *testenv.Stack, workflowID string, withInput bool) []string {
	t.Helper()
	var out []string
	iter := s.Client.GetWorkflowHistory(context.Background(), workflowID, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := protojson.Marshal(ev)
		out = append(out, string(b))
		if !withInput && ev.GetWorkflowExecutionStartedEventAttributes() != nil {
			continue
		}
		plain, err := testenv.Codec.Decode(payloadsOf(ev))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range plain {
			out = append(out, string(p.Data))
		}
	}
	return out
}

// logAndAuditTexts are the stack's log lines and the audit rows matching
// where (SQL after WHERE, "true" for all), as text.
func logAndAuditTexts(t *testing.T, s *testenv.Stack, where string, args ...any) (logs, rows []string) {
	t.Helper()
	for _, e := range s.Logs.All() {
		b, _ := json.Marshal(e.ContextMap())
		logs = append(logs, e.Message+string(b))
	}
	r, err := s.Owner.Query(context.Background(), `SELECT a::text FROM audit_log a WHERE `+where, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for r.Next() {
		var row string
		_ = r.Scan(&row)
		rows = append(rows, row)
	}
	return logs, rows
}
