package workflows_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/workflows"
	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/worker"
	"google.golang.org/protobuf/encoding/protojson"
)

const goldenDir = "testdata/golden"

// goldenPaths are the paths whose histories are kept: every one must keep
// replaying after any code change, or calls in flight would break.
var goldenPaths = []struct {
	name string
	in   workflows.ToolCallInput
}{
	{"allowed_read", workflows.ToolCallInput{Tool: "get_stock", Args: json.RawMessage(`{"articleId":40211}`)}},
	{"executed_task", workflows.ToolCallInput{Tool: "create_task", Args: json.RawMessage(`{"title":"Check cooler 3"}`)}},
	{"denied_unknown_tool", workflows.ToolCallInput{Tool: "constructor", Args: json.RawMessage(`{}`)}},
	{"denied_tool_denied", workflows.ToolCallInput{Tool: "change_price", Args: json.RawMessage(`{"articleId":40211,"newPriceCents":1}`)}},
	{"denied_invalid_arguments", workflows.ToolCallInput{Tool: "get_stock", Args: json.RawMessage(`{"articleId":40211,"userId":"kofi"}`)}},
	{"denied_store_scope", workflows.ToolCallInput{Tool: "get_stock", Args: json.RawMessage(`{"articleId":40211,"storeId":118}`)}},
	{"failed_upstream_error", workflows.ToolCallInput{Tool: "get_stock", Args: json.RawMessage(`{"articleId":99999}`)}},
}

// TestGoldenHistoriesReplay replays every history under testdata/golden
// with today's code. A non-deterministic change fails here.
func TestGoldenHistoriesReplay(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(goldenDir, "*.json"))
	if len(files) < len(goldenPaths) {
		t.Fatalf("%d golden histories, want at least %d: record them with make golden", len(files), len(goldenPaths))
	}
	for _, f := range files {
		r := worker.NewWorkflowReplayer()
		workflows.Register(r, workflows.Settings{})
		if err := r.ReplayWorkflowHistoryFromJSONFile(nil, f); err != nil {
			t.Errorf("%s no longer replays: %v", f, err)
		}
	}
}

// TestRecordGoldenHistories runs each golden path on the real stack and
// replays its fresh history. With TOOLGATE_RECORD_GOLDEN=1 (make golden) it
// also writes the histories to testdata/golden.
func TestRecordGoldenHistories(t *testing.T) {
	s := testenv.NewStack(t)
	record := os.Getenv("TOOLGATE_RECORD_GOLDEN") == "1"
	for _, p := range goldenPaths {
		in := p.in
		in.ToolCallID, in.Session = p.name, ama("golden")
		s.Run(t, in)
		iter := s.Client.GetWorkflowHistory(context.Background(), workflows.WorkflowID("golden", p.name), "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		h := &historypb.History{}
		for iter.HasNext() {
			ev, err := iter.Next()
			if err != nil {
				t.Fatal(err)
			}
			h.Events = append(h.Events, ev)
		}
		r := worker.NewWorkflowReplayer()
		workflows.Register(r, workflows.Settings{})
		if err := r.ReplayWorkflowHistory(nil, h); err != nil {
			t.Fatalf("%s: a fresh history does not replay: %v", p.name, err)
		}
		if record {
			b, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(h)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(goldenDir, p.name+".json"), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}
