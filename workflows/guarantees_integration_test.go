package workflows_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/codec"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signoff"
	"github.com/toolgate/toolgate/workflows"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
)

// These tests attack the approval signal from outside, as anyone with
// access to the namespace could: the temporal CLI and a bare client.

// TestUndecodableApprovalSignalsAreRefused: a payload that is not a
// decision (a bare string, a store list as text, a payload encrypted with a
// key the worker lacks) is refused and audited, and the card still expires.
func TestUndecodableApprovalSignalsAreRefused(t *testing.T) {
	s := testenv.NewStackTTL(t, 4*time.Second)
	ctx := context.Background()
	first, run, err := workflows.Call(ctx, s.Client, s.Policy, s.TaskQueue, transferIn("undecodable", "c1", fortyCases, ama("")))
	if err != nil || first.Status != workflows.StatusPendingApproval {
		t.Fatalf("%v %+v", err, first)
	}
	cli, err := testenv.TemporalCLI()
	if err != nil {
		t.Fatal(err)
	}
	for _, input := range []string{`"x"`, `{"decision":"approve","argsHash":"` + first.ArgsHash + `","approver":{"userId":"ama","role":"store_manager","storeIds":"112"}}`} {
		out, err := exec.Command(cli, "workflow", "signal", "--address", testenv.TemporalAddress(t), "--workflow-id", run.GetID(),
			"--name", workflows.ApprovalSignal, "--input", input).CombinedOutput()
		if err != nil {
			t.Fatalf("temporal workflow signal %s: %v\n%s", input, err, out)
		}
	}
	other, err := codec.Parse(codec.NewKey("stranger"), "")
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := client.NewClientFromExisting(s.Client, client.Options{Namespace: testenv.Namespace(), DataConverter: other.DataConverter()})
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Close()
	if err := stranger.SignalWorkflow(ctx, run.GetID(), "", workflows.ApprovalSignal, signoff.Approval{Decision: signoff.Approve, ArgsHash: first.ArgsHash, Approver: amaID}); err != nil {
		t.Fatal(err)
	}
	res := awaitResult(t, run, 30*time.Second, "the card never ended (wedged by an undecodable signal?)")
	if res.Status != workflows.StatusExpired || res.Code != policy.CodeExpired {
		t.Fatalf("%+v", res)
	}
	// The card also escalates at half its TTL (its row's place depends on when the signals land).
	got := (&stackAudit{s}).rows(t, `SELECT event, reason FROM audit_log WHERE workflow_id = $1 AND event <> 'escalated' ORDER BY id`, run.GetID())
	want := []string{"needs_approval ok", "approval_refused invalid_arguments", "approval_refused invalid_arguments", "approval_refused invalid_arguments", "expired expired"}
	if esc := (&stackAudit{s}).rows(t, `SELECT event FROM audit_log WHERE workflow_id = $1 AND event = 'escalated'`, run.GetID()); len(esc) != 1 {
		t.Fatalf("%d escalations, want 1", len(esc))
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("audit:\n got %v\nwant %v", got, want)
	}
}

// TestFloodedCardLocks: 5,000 distinct signed decisions that are refused
// (each for another action) against one card lock it after MaxRefusedDecisions: it
// ends rejected/locked, audited once, its history stays bounded, and
// nothing runs.
func TestFloodedCardLocks(t *testing.T) {
	s := testenv.NewStack(t)
	ctx := context.Background()
	first, run, err := workflows.Call(ctx, s.Client, s.Policy, s.TaskQueue, transferIn("flood", "c1", fortyCases, ama("")))
	if err != nil || first.Status != workflows.StatusPendingApproval {
		t.Fatalf("%v %+v", err, first)
	}
	const signals = 5000
	var sent, closed atomic.Int64
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < signals; i += 16 {
				// Decisions signed by ama for another action, each its own: each is refused (the hash is not the card's).
				a := testenv.Sign(signoff.Approval{Decision: signoff.Approve, ArgsHash: strings.Repeat("0", 64), Approver: amaID,
					Reason: fmt.Sprintf("flood %d ", i) + strings.Repeat("flood ", 40)}, first.CardRef())
				if err := s.Client.SignalWorkflow(ctx, run.GetID(), "", workflows.ApprovalSignal, a); err != nil {
					closed.Add(1)
					continue
				}
				sent.Add(1)
			}
		}()
	}
	wg.Wait()
	res := awaitResult(t, run, 60*time.Second, "the flooded card did not end")
	if res.Status != workflows.StatusRejected || res.Code != policy.CodeLocked {
		t.Fatalf("%+v", res)
	}
	// A valid approval afterwards changes nothing.
	_ = s.Client.SignalWorkflow(ctx, run.GetID(), "", workflows.ApprovalSignal,
		testenv.Sign(signoff.Approval{Decision: signoff.Approve, ArgsHash: first.ArgsHash, Approver: amaID}, first.CardRef()))
	var events int
	iter := s.Client.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		if _, err := iter.Next(); err != nil {
			t.Fatal(err)
		}
		events++
	}
	rows := (&stackAudit{s}).rows(t, `SELECT event, reason, length(coalesce(message, '')) <= 1000 FROM audit_log WHERE workflow_id = $1 AND event_key <> 'refused-past-cap' ORDER BY id`, run.GetID())
	refused, locked := 0, 0
	for _, r := range rows {
		switch {
		case r == "approval_refused invalid_arguments true":
			refused++
		case r == "rejected locked true":
			locked++
		case r != "needs_approval ok true" && !strings.HasPrefix(r, "approval_refused locked"):
			t.Errorf("unexpected audit row %q", r)
		}
	}
	var transfers int
	_ = s.Owner.QueryRow(ctx, `SELECT count(*) FROM mangrove.transfers`).Scan(&transfers)
	// Every accepted signal is one history event; what the workflow adds
	// for them is bounded by the cap, not by the flood.
	bound := int(sent.Load()) + 40*workflows.MaxRefusedDecisions
	t.Logf("flood: %d signals accepted, %d refused by the closed run, %d history events (bound %d), %d refusals audited, locked %d, %d transfers",
		sent.Load(), closed.Load(), events, bound, refused, locked, transfers)
	if sent.Load() > 1000 {
		t.Errorf("%d signals accepted: the server's history.maximumSignalsPerExecution (1,000) is not in force", sent.Load())
	}
	if refused != workflows.MaxRefusedDecisions || locked != 1 || transfers != 0 || events > bound {
		t.Fatalf("refused %d (want %d), locked %d, transfers %d, events %d (bound %d)", refused, workflows.MaxRefusedDecisions, locked, transfers, events, bound)
	}
}

// TestOnlyASignedDecisionCanEndACard: anyone who may signal the workflow
// (every pack's agent backend) can send payloads; those whose signature
// does not verify (unsigned, forged, undecodable) never count towards the
// lock. Forty of them are refused, the first MaxUnsignedAudited audited one
// by one and the rest in one row when the card ends, and the card still
// waits: ama's signed approval then runs it, once.
func TestOnlyASignedDecisionCanEndACard(t *testing.T) {
	s := testenv.NewStack(t)
	ctx := context.Background()
	first, run, err := workflows.Call(ctx, s.Client, s.Policy, s.TaskQueue, transferIn("junk", "c1", fortyCases, ama("")))
	if err != nil || first.Status != workflows.StatusPendingApproval {
		t.Fatalf("%v %+v", err, first)
	}
	const junk = 40
	for i := range junk {
		var payload any = signoff.Approval{Decision: signoff.Approve, ArgsHash: first.ArgsHash, Approver: amaID, Signature: "unsigned"}
		switch i % 4 {
		case 1:
			forged := testenv.Sign(signoff.Approval{Decision: signoff.Approve, ArgsHash: first.ArgsHash, Approver: amaID}, first.CardRef())
			forged.Approver.Role = "regional_director" // changed after signing
			payload = forged
		case 2:
			payload = "not a decision"
		case 3:
			payload = map[string]any{"decision": "approve", "argsHash": first.ArgsHash, "extra": true}
		}
		if err := s.Client.SignalWorkflow(ctx, run.GetID(), "", workflows.ApprovalSignal, payload); err != nil {
			t.Fatal(err)
		}
	}
	// Each is judged before the approval arrives: the card says so.
	audit := &stackAudit{s}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if rows := audit.rows(t, `SELECT event_key FROM audit_log WHERE workflow_id = $1 AND event = 'approval_refused'`, run.GetID()); len(rows) == workflows.MaxUnsignedAudited {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("%d refusals audited while the card waits, want %d: %v", len(rows), workflows.MaxUnsignedAudited, rows)
		}
	}
	if err := s.Client.SignalWorkflow(ctx, run.GetID(), "", workflows.ApprovalSignal,
		testenv.Sign(signoff.Approval{Decision: signoff.Approve, ArgsHash: first.ArgsHash, Approver: amaID}, first.CardRef())); err != nil {
		t.Fatal(err)
	}
	res := awaitResult(t, run, 30*time.Second, "the card did not end")
	if res.Status != workflows.StatusExecuted {
		t.Fatalf("after %d unsigned payloads and ama's approval: %s/%s %q", junk, res.Status, res.Code, res.Message)
	}
	got := audit.rows(t, `SELECT event || ' ' || reason || ' ' || (approver_id IS NULL) FROM audit_log WHERE workflow_id = $1 ORDER BY id`, run.GetID())
	want := []string{"needs_approval ok true"}
	for range workflows.MaxUnsignedAudited {
		want = append(want, "") // an unsigned payload's refusal, of its own code
	}
	want = append(want, "approved ok false", "executed ok true", "approval_refused credential_unavailable true")
	if len(got) != len(want) {
		t.Fatalf("audit rows:\n%s", strings.Join(got, "\n"))
	}
	for i, w := range want {
		if w == "" && (!strings.HasPrefix(got[i], "approval_refused ") || !strings.HasSuffix(got[i], " true")) || w != "" && got[i] != w {
			t.Fatalf("audit row %d is %q, want %q:\n%s", i, got[i], w, strings.Join(got, "\n"))
		}
	}
	summary := audit.rows(t, `SELECT message FROM audit_log WHERE workflow_id = $1 AND event_key = 'refused-unsigned-past-cap'`, run.GetID())
	if len(summary) != 1 || !strings.HasPrefix(summary[0], fmt.Sprintf("%d more payloads whose signature did not verify", junk-workflows.MaxUnsignedAudited)) {
		t.Fatalf("the summary of the unsigned payloads past the cap: %q", summary)
	}
	var transfers int
	_ = s.Owner.QueryRow(ctx, `SELECT count(*) FROM mangrove.transfers WHERE idempotency_key = $1`, run.GetID()).Scan(&transfers)
	if transfers != 1 {
		t.Fatalf("%d transfers", transfers)
	}
}

// TestDecisionsBoundToTheirMoment: a validly signed decision dated before
// the card went up, one copied from another card, and one copied from an
// earlier run of the same workflow ID are refused; nothing runs.
func TestDecisionsBoundToTheirMoment(t *testing.T) {
	s := testenv.NewStackTTL(t, 6*time.Second)
	ctx := context.Background()
	// An earlier run of the ID, ended by an operator, with an approval signed for it.
	firstA, runA, err := workflows.Call(ctx, s.Client, s.Policy, s.TaskQueue, transferIn("moment", "c1", fortyCases, ama("")))
	if err != nil || firstA.Status != workflows.StatusPendingApproval {
		t.Fatalf("%v %+v", err, firstA)
	}
	copied := signFor(signoff.Approval{Decision: signoff.Approve, ArgsHash: firstA.ArgsHash, Approver: amaID}, firstA, runA, time.Now())
	if err := s.Client.TerminateWorkflow(ctx, runA.GetID(), runA.GetRunID(), "operator ended it"); err != nil {
		t.Fatal(err)
	}
	// Another card, with its own signed approval.
	firstB, runB, err := workflows.Call(ctx, s.Client, s.Policy, s.TaskQueue, transferIn("moment", "c2", fortyCases, ama("")))
	if err != nil || firstB.Status != workflows.StatusPendingApproval {
		t.Fatalf("%v %+v", err, firstB)
	}
	otherCard := signFor(signoff.Approval{Decision: signoff.Approve, ArgsHash: firstB.ArgsHash, Approver: amaID}, firstB, runB, time.Now())
	// A second run of c1 started by a bare client with Temporal's default reuse policy.
	runC, err := s.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: runA.GetID(), TaskQueue: s.TaskQueue},
		workflows.WorkflowType, transferIn("moment", "c1", fortyCases, ama("")))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // let it reach its card, if it puts one up
	// Signed for the second run's own card, if it shows one, but dated 2001.
	var st workflows.Status
	if v, err := s.Client.QueryWorkflow(ctx, runC.GetID(), runC.GetRunID(), workflows.StatusQuery); err == nil {
		_ = v.Get(&st)
	}
	dated := testenv.SignAt(signoff.Approval{Decision: signoff.Approve, ArgsHash: firstA.ArgsHash, Approver: amaID},
		st.CardRef(runC.GetID()), time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC))
	for _, a := range []signoff.Approval{copied, otherCard, dated} {
		_ = s.Client.SignalWorkflow(ctx, runC.GetID(), runC.GetRunID(), workflows.ApprovalSignal, a)
	}
	res := awaitResult(t, runC, 45*time.Second, "the second run did not end")
	var transfers int
	_ = s.Owner.QueryRow(ctx, `SELECT count(*) FROM mangrove.transfers WHERE idempotency_key = $1`, runA.GetID()).Scan(&transfers)
	if res.Status == workflows.StatusExecuted || transfers != 0 {
		t.Fatalf("a copied or back-dated decision ran the transfer: %+v, %d transfers", res, transfers)
	}
	t.Logf("second run of %s ended %s/%s; copied and back-dated decisions ran nothing", runC.GetID(), res.Status, res.Code)
}

// signFor signs a decision for the card a run shows, at a given time.
func signFor(a signoff.Approval, first workflows.Outcome, run client.WorkflowRun, at time.Time) signoff.Approval {
	card := first.CardRef()
	card.WorkflowID, card.RunID = run.GetID(), run.GetRunID()
	return testenv.SignAt(a, card, at)
}

// TestPerUserLimitCountsTheStoredUser: search_procedures allows 60 calls per
// user per hour. A session whose user ID the audit log cannot store as sent
// (too long, or with control characters) must not get a 61st: the limit and
// the audit row must name the same user.
func TestPerUserLimitCountsTheStoredUser(t *testing.T) {
	s := testenv.NewStack(t)
	for _, user := range []string{strings.Repeat("a", 300), "ama\x00shadow"} {
		sess := ama("peruser")
		sess.UserID = user
		for i := range 61 {
			in := workflows.ToolCallInput{Tool: "search_procedures", ToolCallID: fmt.Sprintf("u%d_%d", len(user), i),
				Args: []byte(`{"query":"cold chain"}`), Session: sess}
			s.Run(t, in)
		}
	}
	rows := (&stackAudit{s}).rows(t, `SELECT user_id, count(*) FROM audit_log WHERE event = 'allowed' GROUP BY user_id`)
	for _, r := range rows {
		var n int
		_, _ = fmt.Sscanf(r[strings.LastIndex(r, " ")+1:], "%d", &n)
		if n > 60 {
			t.Errorf("%d calls admitted for one stored user (%.20q…), over the limit of 60", n, r)
		}
	}
	t.Logf("allowed rows per stored user: %v", rows)
}

// TestAPlantedDevKeysFileSignsNothing: the real worker binary, started
// outside dev mode in a folder holding a planted .dev/keys.env (a key pair
// whoever planted it holds) and with no TOOLGATE_APPROVAL_KEYS of its own,
// refuses every decision that key signs. The same binary in the same
// folder in dev mode reads the file and takes the same key's decision on a
// card it puts up, so the refusal is the mode's, not a file the worker
// never saw.
func TestAPlantedDevKeysFileSignsNothing(t *testing.T) {
	bin := filepath.Join(testenv.Build(t, "./worker"), "worker")
	s := testenv.NewStack(t)
	s.StopWorker() // the worker is the binary, started below
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	planted := fmt.Sprintf("TOOLGATE_APPROVAL_KEYS=planted:%s\nTOOLGATE_APPROVAL_SIGNING_KEY=planted:%s\n",
		base64.StdEncoding.EncodeToString(pub), base64.StdEncoding.EncodeToString(priv))
	if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(config.DevKeysFile)), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, config.DevKeysFile), []byte(planted), 0o600); err != nil {
		t.Fatal(err)
	}
	signer := signoff.Signer{KeyID: "planted", Key: priv}
	logs, err := os.Create(filepath.Join(t.TempDir(), "worker.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if b, _ := os.ReadFile(logs.Name()); t.Failed() {
			t.Logf("the workers' logs:\n%s", b)
		}
	})
	start := func(extra ...string) *exec.Cmd {
		var env []string
		for _, kv := range os.Environ() {
			if k, _, _ := strings.Cut(kv, "="); !strings.HasPrefix(k, "TOOLGATE_") {
				env = append(env, kv)
			}
		}
		cmd := exec.Command(bin)
		cmd.Dir = dir
		cmd.Env = append(env, "TEMPORAL_ADDRESS="+testenv.TemporalAddress(t), "TEMPORAL_NAMESPACE="+testenv.Namespace(),
			"DATABASE_URL="+s.DatabaseURL, "UPSTREAM_URL="+s.Upstream.URL, "TOOLGATE_PACKS=mangrove", "TOOLGATE_TASK_QUEUES=mangrove="+s.TaskQueue,
			"TOOLGATE_APPROVER_ISSUERS="+testenv.Issuer, "TOOLGATE_CODEC_KEYS="+testenv.CodecKeys,
			"METRICS_ADDR=127.0.0.1:0", "CODEC_ADDR=127.0.0.1:0", "CODEC_AUTH_TOKEN=a-codec-token-of-at-least-32-characters", "LOG_LEVEL=warn")
		cmd.Env = append(cmd.Env, extra...)
		cmd.Stdout, cmd.Stderr = logs, logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	deployed := start()
	// Outside dev mode a credential is one issued to a sign-in.
	if _, err := s.Owner.Exec(ctx, `INSERT INTO vault.credentials (ref, user_id, client_secret, issuer, subject, role, store_ids, acr, auth_time)
		SELECT 'cred-ama-signed-in', user_id, client_secret, $1, 'ama-1', role, store_ids, 'mfa', now() FROM vault.credentials WHERE ref = 'cred-ama'`, testenv.Issuer); err != nil {
		t.Fatal(err)
	}
	sess := ama("")
	sess.CredentialRef = "cred-ama-signed-in"
	first, run, err := workflows.Call(ctx, s.Client, s.Policy, s.TaskQueue, transferIn("planted", "c1", fortyCases, sess))
	if err != nil || first.Status != workflows.StatusPendingApproval {
		t.Fatalf("%v %+v", err, first)
	}
	send := func(reason string) {
		t.Helper()
		a := signoff.Approval{Decision: signoff.Approve, ArgsHash: first.ArgsHash, Approver: amaID, Reason: reason, Evidence: testenv.Evidence(amaID.UserID, time.Now())}
		if err := s.Client.SignalWorkflow(ctx, run.GetID(), first.RunID, workflows.ApprovalSignal, signer.Sign(a, first.CardRef(), time.Now().UTC().Format(time.RFC3339))); err != nil {
			t.Fatal(err)
		}
	}
	send("signed with the planted key")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var n int
		_ = s.Owner.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE workflow_id = $1 AND event = 'approval_refused' AND reason = 'credential_unavailable'
			AND message LIKE '%unknown key%'`, run.GetID()).Scan(&n)
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("outside dev mode, a decision signed with the planted key was not refused as signed with an unknown key")
		}
	}
	v, err := s.Client.QueryWorkflow(ctx, run.GetID(), "", workflows.StatusQuery)
	var st workflows.Status
	if err != nil || v.Get(&st) != nil || st.Status != workflows.StatusPendingApproval {
		t.Fatalf("after the planted key's decision: %v %+v", err, st)
	}
	_ = deployed.Process.Kill()
	_ = deployed.Wait()
	// A card keeps the keys in force when it went up; a new one, under a
	// worker in dev mode, is held to the file's.
	start("TOOLGATE_DEV=1")
	second, run2, err := workflows.Call(ctx, s.Client, s.Policy, s.TaskQueue, transferIn("planted", "c2", `{"articleId":40211,"quantity":41,"reason":"stockout_risk"}`, sess))
	if err != nil || second.Status != workflows.StatusPendingApproval {
		t.Fatalf("%v %+v", err, second)
	}
	a := signoff.Approval{Decision: signoff.Approve, ArgsHash: second.ArgsHash, Approver: amaID, Evidence: testenv.Evidence(amaID.UserID, time.Now())}
	if err := s.Client.SignalWorkflow(ctx, run2.GetID(), second.RunID, workflows.ApprovalSignal, signer.Sign(a, second.CardRef(), time.Now().UTC().Format(time.RFC3339))); err != nil {
		t.Fatal(err)
	}
	if res := awaitResult(t, run2, time.Minute, "the card approved in dev mode"); res.Status != workflows.StatusExecuted {
		t.Fatalf("in dev mode the worker should read %s and take its key's decision: %s/%s %s", config.DevKeysFile, res.Status, res.Code, res.Message)
	}
}
