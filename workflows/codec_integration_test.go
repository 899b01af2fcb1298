package workflows_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/codec"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/workflows"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// payloadsOf collects the payloads of the events that carry args and results.
func payloadsOf(ev *historypb.HistoryEvent) []*commonpb.Payload {
	var out []*commonpb.Payload
	out = append(out, ev.GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads()...)
	out = append(out, ev.GetActivityTaskScheduledEventAttributes().GetInput().GetPayloads()...)
	out = append(out, ev.GetActivityTaskCompletedEventAttributes().GetResult().GetPayloads()...)
	out = append(out, ev.GetWorkflowExecutionCompletedEventAttributes().GetResult().GetPayloads()...)
	for _, d := range ev.GetMarkerRecordedEventAttributes().GetDetails() {
		out = append(out, d.GetPayloads()...)
	}
	return out
}

// TestHistoryHoldsOnlyCiphertext reads a call's history through the raw
// API: every payload is encrypted and none shows the args; the codec
// endpoint (as Temporal Web calls it, CORS included) decodes them.
func TestHistoryHoldsOnlyCiphertext(t *testing.T) {
	s := testenv.NewStack(t)
	in := workflows.ToolCallInput{Tool: "get_stock", ToolCallID: "enc", Args: json.RawMessage(`{"articleId":40211}`), Session: ama("codec")}
	if res := s.Run(t, in); res.Status != "executed" || !strings.Contains(string(res.Result), `"cases":6`) {
		t.Fatalf("%+v", res)
	}
	iter := s.Client.GetWorkflowHistory(context.Background(), workflows.WorkflowID("codec", "enc"), "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var all []*commonpb.Payload
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, payloadsOf(ev)...)
	}
	if len(all) < 5 {
		t.Fatalf("only %d payloads found", len(all))
	}
	for _, p := range all {
		if string(p.Metadata["encoding"]) != codec.EncodingEncrypted {
			t.Fatalf("a payload is stored as %q: %s", p.Metadata["encoding"], p.Data)
		}
		for _, plain := range []string{"articleId", "ama", "40211", "cred-ama", "UHT milk"} {
			if bytes.Contains(p.Data, []byte(plain)) {
				t.Fatalf("ciphertext contains %q", plain)
			}
		}
	}

	endpoint := testenv.CodecServer(t)
	pre, _ := http.NewRequest(http.MethodOptions, endpoint+"/decode", nil)
	pre.Header.Set("Origin", "http://localhost:8233")
	pre.Header.Set("Access-Control-Request-Method", "POST")
	resp, err := http.DefaultClient.Do(pre)
	if err != nil || resp.Header.Get("Access-Control-Allow-Origin") != "http://localhost:8233" {
		t.Fatalf("CORS preflight: %v %v", err, resp.Header)
	}
	body, _ := protojson.Marshal(&commonpb.Payloads{Payloads: all[:1]})
	req, _ := http.NewRequest(http.MethodPost, endpoint+"/decode", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Namespace", "default")
	resp, err = http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("decode: %v %v", err, resp.Status)
	}
	defer resp.Body.Close()
	var decoded struct {
		Payloads []struct {
			Metadata map[string][]byte `json:"metadata"`
			Data     []byte            `json:"data"`
		} `json:"payloads"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&decoded); err != nil || len(decoded.Payloads) != 1 {
		t.Fatalf("decode response: %v", err)
	}
	if string(decoded.Payloads[0].Metadata["encoding"]) != "json/plain" || !strings.Contains(string(decoded.Payloads[0].Data), `"articleId":40211`) {
		t.Fatalf("decoded: %s", decoded.Payloads[0].Data)
	}
}
