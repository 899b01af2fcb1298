package workflows_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/packs/mangrove"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/workflows"
)

func ama(conv string) policy.Session {
	return policy.Session{UserID: "ama", Role: mangrove.RoleStoreManager, Resources: mangrove.Stores(112), SessionID: "s1", ConversationID: conv, CredentialRef: "cred-ama"}
}

// TestReadmeCalls runs the demo calls the docs walk
// against the real dev server, upstream and PostgreSQL.
func TestReadmeCalls(t *testing.T) {
	s := testenv.NewStack(t)
	cases := []struct {
		name     string
		tool     string
		args     string
		session  func(policy.Session) policy.Session
		status   workflows.CallStatus
		code     policy.Code
		auth     bool
		contains string
	}{
		{"get_stock", "get_stock", `{"articleId":40211}`, nil, "executed", "ok", false, `"cases":6`},
		{"other store", "get_stock", `{"articleId":40211,"storeId":118}`, nil, "denied", "resource_scope", false, ""},
		{"signed out", "get_stock", `{"articleId":40211}`, func(s policy.Session) policy.Session { s.CredentialRef = ""; return s }, "awaiting_sign_in", "credential_unavailable", true, ""},
		{"constructor", "constructor", `{}`, nil, "denied", "unknown_tool", false, ""},
		{"extra field", "get_stock", `{"articleId":40211,"userId":"kofi"}`, nil, "denied", "invalid_arguments", false, ""},
		{"change_price", "change_price", `{"articleId":40211,"newPriceCents":1}`, nil, "denied", "tool_denied", false, ""},
		{"revoked or foreign credential", "get_stock", `{"articleId":40211}`, func(s policy.Session) policy.Session { s.CredentialRef = "cred-kofi"; return s }, "awaiting_sign_in", "credential_unavailable", true, ""},
		{"unknown article", "get_stock", `{"articleId":99999}`, nil, "failed", "upstream_error", false, `"candidates":[{"articleId":40207`},
		{"ambiguous article", "get_stock", `{"articleId":4021}`, nil, "failed", "upstream_error", false, `{"articleId":40211,"name":"UHT milk 1 L, case of 12"}`},
		{"deliveries today", "get_deliveries", `{}`, nil, "executed", "ok", false, `delayed, now expected today at 16:00`},
		{"delayed only", "get_deliveries", `{"status":"delayed"}`, nil, "executed", "ok", false, `"total":1`},
		{"deliveries tomorrow page", "get_deliveries", `{"day":"tomorrow"}`, nil, "executed", "ok", false, `"nextCursor":"10"`},
		{"received yesterday with its GRN", "get_deliveries", `{"day":"yesterday"}`, nil, "executed", "ok", false, `"grnId":"GRN-88201"`},
		{"grn", "get_grn", `{"grnId":"GRN-88213"}`, nil, "executed", "ok", false, "6 cases short"},
		{"other store's grn", "get_grn", `{"grnId":"GRN-88190"}`, nil, "failed", "upstream_error", false, ""},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sess := ama("readme")
			if c.session != nil {
				sess = c.session(sess)
			}
			res := s.First(t, workflows.ToolCallInput{Tool: c.tool, ToolCallID: "call" + string(rune('a'+i)), Args: json.RawMessage(c.args), Session: sess}).ToolCallResult
			if res.Status != c.status || res.Code != c.code || res.AuthRequired != c.auth {
				t.Fatalf("got %s/%s auth=%v %q, want %s/%s auth=%v", res.Status, res.Code, res.AuthRequired, res.Message, c.status, c.code, c.auth)
			}
			if !strings.Contains(string(res.Result), c.contains) {
				t.Fatalf("result %s lacks %s", res.Result, c.contains)
			}
			if res.Message == "" || res.IdempotencyKey != workflows.WorkflowID("readme", "call"+string(rune('a'+i))) {
				t.Fatalf("message %q key %q", res.Message, res.IdempotencyKey)
			}
		})
	}
}
