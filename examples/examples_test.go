// Package examples_test runs the examples in other languages against the
// real stack.
package examples_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/packs/mangrove"
	"github.com/toolgate/toolgate/signoff"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/workflows"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestTypeScriptTemporalClient runs examples/temporal-ts with
// @temporalio/client from npm: Update-with-Start gives the first outcome
// (the card), decrypted through the codec endpoint with its token; once
// approved, the final outcome arrives. With a wrong token the codec
// endpoint refuses and nothing starts.
func TestTypeScriptTemporalClient(t *testing.T) {
	dir, _ := filepath.Abs("temporal-ts")
	node, err := exec.LookPath("node")
	if _, statErr := os.Stat(filepath.Join(dir, "node_modules", "@temporalio", "client")); err != nil || statErr != nil {
		if testenv.Required() {
			t.Fatalf("TOOLGATE_REQUIRE_SERVICES=1 but Node.js or @temporalio/client is missing (make node installs it): %v %v", err, statErr)
		}
		t.Skip("skipped: no Node.js or @temporalio/client (make node)")
	}
	s := testenv.NewStack(t)
	token := strings.Repeat("k", 40)
	codec := httptest.NewServer(testenv.Codec.Handler(nil, token))
	defer codec.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	run := func(callID, tok string) (*exec.Cmd, *bufio.Scanner, *strings.Builder) {
		cmd := exec.CommandContext(ctx, node, "index.mjs")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "TEMPORAL_ADDRESS="+testenv.TemporalAddress(t), "TOOLGATE_TASK_QUEUE="+s.TaskQueue, "CODEC_URL="+codec.URL,
			"CODEC_AUTH_TOKEN="+tok, "CONVERSATION=ts", "CALL_ID="+callID)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd, bufio.NewScanner(out), &stderr
	}

	cmd, lines, stderr := run("c1", token)
	var first struct {
		First workflows.Outcome `json:"first"`
	}
	if !lines.Scan() || json.Unmarshal(lines.Bytes(), &first) != nil {
		_ = cmd.Wait()
		t.Fatalf("no first outcome: %s", stderr.String())
	}
	if first.First.Status != workflows.StatusPendingApproval || first.First.ValueCents != 38400 || !strings.Contains(first.First.Card, "Move 40 cases") {
		t.Fatalf("first outcome: %+v", first.First)
	}
	if err := workflows.SendDecision(ctx, s.Client, first.First.IdempotencyKey, signoff.Approval{Decision: signoff.Approve,
		Approver: policy.Identity{UserID: "ama", Role: mangrove.RoleStoreManager, Resources: mangrove.Stores(112)}, Evidence: testenv.Evidence("ama", time.Now())},
		testenv.ApprovalSigner); err != nil {
		t.Fatal(err)
	}
	var final struct {
		Final workflows.ToolCallResult `json:"final"`
	}
	if !lines.Scan() || json.Unmarshal(lines.Bytes(), &final) != nil {
		_ = cmd.Wait()
		t.Fatalf("no final outcome: %s", stderr.String())
	}
	if err := cmd.Wait(); err != nil || final.Final.Status != workflows.StatusExecuted || !strings.Contains(string(final.Final.Result), "TR-") {
		t.Fatalf("final outcome: %v %+v %s", err, final.Final, stderr.String())
	}
	t.Logf("the TypeScript client read %s, then %s", first.First.Status, final.Final.Status)

	cmd, _, stderr = run("c2", strings.Repeat("x", 40))
	if err := cmd.Wait(); err == nil || !strings.Contains(stderr.String(), "401") {
		t.Fatalf("a wrong codec token: %v %s", err, stderr.String())
	}
	if _, err := s.Client.DescribeWorkflow(ctx, workflows.WorkflowID("ts", "c2"), ""); err == nil {
		t.Fatal("a call started though its input could not be encoded")
	}
}
