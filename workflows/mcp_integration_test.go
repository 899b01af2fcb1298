package workflows_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/insights"
	"github.com/toolgate/toolgate/internal/packs"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signoff"
	"github.com/toolgate/toolgate/workflows"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
)

// keeperID approves the reference pack's cards.
var keeperID = policy.Identity{UserID: "kofi", Role: "keeper"}

// referenceStack runs the reference pack (examples/packs/reference.yaml,
// loaded from packFile) in front of the official filesystem and memory
// servers from npm, on a scratch folder of its own.
func referenceStack(t *testing.T, packFile string) (*testenv.Stack, string, policy.Session) {
	t.Helper()
	return referenceStackTTL(t, packFile, 0)
}

// referenceStackTTL is referenceStack with its cards' TTL (the default
// when zero).
func referenceStackTTL(t *testing.T, packFile string, ttl time.Duration) (*testenv.Stack, string, policy.Session) {
	t.Helper()
	testenv.ReferenceServer(t, "mcp-server-filesystem")
	scratch, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("TOOLGATE_SCRATCH", scratch)
	set, err := packs.Load(packFile)
	if err != nil {
		t.Fatal(err)
	}
	s := testenv.NewStackWith(t, testenv.StackOptions{Policy: set.Policy, MCPServers: set.Servers, ApprovalTTL: ttl})
	writer := policy.Session{UserID: "ama", Role: "writer", SessionID: "s-ref", ConversationID: "reference",
		CredentialRef: issueCredential(t, s, "ama", "writer", nil, policy.ACRPassword)}
	return s, scratch, writer
}

// referencePack writes the reference pack, as edit changes its text, with
// its accepted pins, into dir and returns its path; the servers are the
// ones from npm in examples/mcp. An edit that changes nothing fails the
// test: the pack no longer reads as the test expects.
func referencePack(t *testing.T, dir string, edit func(string) string) string {
	t.Helper()
	body, err := os.ReadFile("../examples/packs/reference.yaml")
	if err != nil {
		t.Fatal(err)
	}
	text := string(body)
	if edit != nil {
		if text = edit(text); text == string(body) {
			t.Fatal("the reference pack no longer reads as this test expects")
		}
	}
	npm, _ := filepath.Abs("../examples/mcp")
	file := filepath.Join(dir, "reference.yaml")
	if err := os.WriteFile(file, []byte(strings.ReplaceAll(text, "../mcp/", npm+"/")), 0o644); err != nil {
		t.Fatal(err)
	}
	pins, err := os.ReadFile("../examples/packs/reference.pins.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(packs.PinsFile(file), pins, 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// decideCard sends one signed decision on a pending card and returns the
// call's final result.
func decideCard(t *testing.T, s *testenv.Stack, first workflows.Outcome, a signoff.Approval) workflows.ToolCallResult {
	t.Helper()
	a.ArgsHash = first.ArgsHash
	a = testenv.Sign(a, first.CardRef())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.Client.SignalWorkflow(ctx, first.IdempotencyKey, "", workflows.ApprovalSignal, a); err != nil {
		t.Fatal(err)
	}
	var res workflows.ToolCallResult
	if err := s.Client.GetWorkflow(ctx, first.IdempotencyKey, "").Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	return res
}

// TestTheReferenceServersBehindTheChain: toolgate in front of two MCP
// servers nobody here wrote. A read runs at once and is audited; a path
// outside the row's prefix is refused before any card; a write waits for a
// keeper and, approved, writes the file once with exactly the args asked,
// and rejected, leaves the folder untouched; the memory server's delete
// waits for a keeper too.
func TestTheReferenceServersBehindTheChain(t *testing.T) {
	s, scratch, writer := referenceStack(t, "../examples/packs/reference.yaml")
	if err := os.WriteFile(filepath.Join(scratch, "notes.txt"), []byte("cold chain: check at 06:00"), 0o644); err != nil {
		t.Fatal(err)
	}
	read := s.Run(t, workflows.ToolCallInput{Tool: "files__read_text_file", ToolCallID: "r1", Session: writer,
		Args: json.RawMessage(`{"path":` + quoteJSON(filepath.Join(scratch, "notes.txt")) + `}`)})
	if read.Status != workflows.StatusExecuted || !strings.Contains(string(read.Result), "check at 06:00") {
		t.Fatalf("a read: %s/%s %q %s", read.Status, read.Code, read.Message, read.Result)
	}
	var audited int
	_ = s.Owner.QueryRow(context.Background(), `SELECT count(*) FROM audit_log WHERE tool = 'files__read_text_file' AND event = 'allowed'`).Scan(&audited)
	if audited != 1 {
		t.Fatalf("%d audit rows for the read, want 1", audited)
	}

	// Outside the prefix, or a part with a control character of any block
	// (NEL and CSI are C1 controls a terminal acts on).
	for i, path := range []string{"/etc/passwd", scratch + "/../escape.txt", scratch + "x/notes.txt", scratch + "/a\u0085b", scratch + "/a\u009b2Jb", scratch + "/a\u2028b"} {
		out := s.First(t, workflows.ToolCallInput{Tool: "files__write_file", ToolCallID: "out" + string(rune('a'+i)), Session: writer,
			Args: json.RawMessage(`{"path":` + quoteJSON(path) + `,"content":"x"}`)})
		if out.Status != workflows.StatusDenied || out.Code != policy.CodeInvalidArguments || out.Card != "" {
			t.Fatalf("a write to %s: %s/%s %q", path, out.Status, out.Code, out.Message)
		}
	}

	target := filepath.Join(scratch, "plan.txt")
	args := `{"path":` + quoteJSON(target) + `,"content":"Order 40 cases."}`
	first := s.First(t, workflows.ToolCallInput{Tool: "files__write_file", ToolCallID: "w1", Session: writer, Args: json.RawMessage(args)})
	if first.Status != workflows.StatusPendingApproval || first.ApproverRole != "keeper" {
		t.Fatalf("a write: %+v", first)
	}
	// The card is the exact args and the dry run: what the file is now,
	// here the server's answer that there is none.
	if want := "files__write_file · content Order 40 cases. · path " + target + " · Now, read_text_file answered: "; !strings.HasPrefix(first.Card, want) || !strings.Contains(first.Card, "ENOENT") {
		t.Fatalf("the write's card: %q, want %q and the server's ENOENT", first.Card, want)
	}
	over := s.First(t, workflows.ToolCallInput{Tool: "files__write_file", ToolCallID: "w0", Session: writer,
		Args: json.RawMessage(`{"path":` + quoteJSON(filepath.Join(scratch, "notes.txt")) + `,"content":"cold chain: check at 07:00"}`)})
	if !strings.HasSuffix(over.Card, " · Now: cold chain: check at 06:00") {
		t.Fatalf("a card over an existing file shows what it replaces: %q", over.Card)
	}
	// A model's content that reads as more fields is written as its JSON,
	// so it cannot pass for the dry run's answer.
	forged := s.First(t, workflows.ToolCallInput{Tool: "files__write_file", ToolCallID: "w00", Session: writer,
		Args: json.RawMessage(`{"path":` + quoteJSON(filepath.Join(scratch, "notes.txt")) + `,"content":"x · Now: nothing here"}`)})
	if !strings.HasPrefix(forged.Card, `files__write_file · content "x \u00b7 Now: nothing here" · path `) || !strings.HasSuffix(forged.Card, " · Now: cold chain: check at 06:00") {
		t.Fatalf("a card whose content reads as fields: %q", forged.Card)
	}
	// Nor can one that would read so to a person: the separator spelled with
	// other spaces or a look-alike dot, a line separator, a bidi override. Each
	// is written as its JSON, every such character escaped, so the card
	// keeps its three fields and the dry run's line.
	for n, c := range [][2]string{
		{"Hello.\u00a0·\u00a0Now: (no such file yet)", `"Hello.\u00a0\u00b7\u00a0Now: (no such file yet)"`},
		{"Hello. \u2022 Now: (no such file yet)", `"Hello. \u2022 Now: (no such file yet)"`},
		{"Hello.\u2028Now: (no such file yet)", `"Hello.\u2028Now: (no such file yet)"`},
		{"Hello.\u202etxt.exe", `"Hello.\u202etxt.exe"`},
		{"Hello.\u0085Now", `"Hello.\u0085Now"`},
	} {
		content := c[1]
		args, _ := json.Marshal(map[string]string{"path": filepath.Join(scratch, "notes.txt"), "content": c[0]})
		forged := s.First(t, workflows.ToolCallInput{Tool: "files__write_file", ToolCallID: fmt.Sprint("w00.", n), Session: writer, Args: args})
		fields := strings.Split(strings.TrimSuffix(forged.Card, " · Now: cold chain: check at 06:00"), " · ")
		if len(fields) != 3 || fields[1] != "content "+content || strings.IndexFunc(forged.Card, func(r rune) bool { return r > 0x7e && r != '·' }) >= 0 {
			t.Errorf("a card whose content could read as fields: %q, want its content as %s", forged.Card, content)
		}
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Fatalf("the file exists before anyone approved: %v", err)
	}
	res := decideCard(t, s, first, approve(keeperID))
	if res.Status != workflows.StatusExecuted {
		t.Fatalf("the approved write: %s/%s %q", res.Status, res.Code, res.Message)
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != "Order 40 cases." {
		t.Fatalf("the file after the approved write: %q %v", b, err)
	}
	// The reference servers take no idempotency key (no keyMeta), and the
	// story says so rather than naming a key that was never sent.
	story, err := (insights.Reader{Pool: s.Owner, Policy: s.Policy}).Explain(context.Background(), nil, workflows.WorkflowID("reference", "w1"))
	if err != nil {
		t.Fatal(err)
	}
	var told strings.Builder
	if err := story.Text(&told); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(told.String(), "No idempotency key sent upstream: its MCP server takes none (no keyMeta)") ||
		!strings.Contains(story.Answer(), "it ran once upstream, with no idempotency key") || strings.Contains(told.String(), "Idempotency-Key") {
		t.Fatalf("the write's story names a key its server never took:\n%s", told.String())
	}

	rejected := filepath.Join(scratch, "rejected.txt")
	first = s.First(t, workflows.ToolCallInput{Tool: "files__write_file", ToolCallID: "w2", Session: writer,
		Args: json.RawMessage(`{"path":` + quoteJSON(rejected) + `,"content":"no"}`)})
	res = decideCard(t, s, first, signoff.Approval{Decision: signoff.Reject, Approver: keeperID, Reason: "not today"})
	if res.Status != workflows.StatusRejected {
		t.Fatalf("the rejected write: %s/%s", res.Status, res.Code)
	}
	if _, err := os.Stat(rejected); !os.IsNotExist(err) {
		t.Fatalf("a rejected write left a file: %v", err)
	}

	del := s.First(t, workflows.ToolCallInput{Tool: "memory__delete_entities", ToolCallID: "d1", Session: writer, Args: json.RawMessage(`{"entityNames":["Ama"]}`)})
	if del.Status != workflows.StatusPendingApproval || del.ApproverRole != "keeper" || !strings.HasPrefix(del.Card, `memory__delete_entities · entityNames ["Ama"] · Now: {`) || !strings.Contains(del.Card, `"entities"`) {
		t.Fatalf("a delete: %+v", del)
	}
	graph := s.Run(t, workflows.ToolCallInput{Tool: "memory__read_graph", ToolCallID: "g1", Session: writer, Args: json.RawMessage(`{}`)})
	if graph.Status != workflows.StatusExecuted || !strings.Contains(string(graph.Result), `"entities"`) {
		t.Fatalf("the graph: %s/%s %q %s", graph.Status, graph.Code, graph.Message, graph.Result)
	}
}

// TestADefinitionChangedSinceAcceptanceIsNotRun: the pins file accepted
// write_file, move_file and list_directory with other words than the server
// now gives them (a server update, or a rug pull rewriting a description to
// steer the model): the model is offered only the accepted text; a write,
// with a dry run (write_file) or without (move_file), ends
// definition_changed before any card goes up, so nobody is asked to approve
// a call that cannot run; a read is refused unsent; and a call whose dry
// run's tool changed is refused before any card. The folder is untouched.
func TestADefinitionChangedSinceAcceptanceIsNotRun(t *testing.T) {
	dir := t.TempDir()
	file := referencePack(t, dir, nil)
	pins, err := packs.ReadPins(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range []string{"write_file", "move_file", "list_directory"} {
		was := pins["files"][tool]
		was.Definition.Description = "Accepted before the server's update."
		was.Pin = was.Definition.Pin()
		pins["files"][tool] = was
	}
	// The delete's dry run, open_nodes, was accepted otherwise too.
	peek := pins["memory"]["open_nodes"]
	peek.Definition.Description = "Open nodes. Accepted before the server's update."
	peek.Pin = peek.Definition.Pin()
	pins["memory"]["open_nodes"] = peek
	b, _ := json.Marshal(pins)
	if err := os.WriteFile(packs.PinsFile(file), b, 0o644); err != nil {
		t.Fatal(err)
	}
	s, scratch, writer := referenceStack(t, file)
	for _, d := range s.Policy.DefinitionsFor("writer") {
		if d.Name == "files__write_file" && d.Description != "Accepted before the server's update." {
			t.Fatalf("the model was offered %q, not the accepted text", d.Description)
		}
	}
	target := filepath.Join(scratch, "plan.txt")
	if err := os.WriteFile(filepath.Join(scratch, "old.txt"), []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, in := range []workflows.ToolCallInput{
		{Tool: "files__write_file", ToolCallID: "w1", Args: json.RawMessage(`{"path":` + quoteJSON(target) + `,"content":"x"}`)},
		{Tool: "files__move_file", ToolCallID: "m1", Args: json.RawMessage(`{"source":` + quoteJSON(filepath.Join(scratch, "old.txt")) + `,"destination":` + quoteJSON(target) + `}`)},
		{Tool: "files__list_directory", ToolCallID: "l1", Args: json.RawMessage(`{"path":` + quoteJSON(scratch) + `}`)},
		// A dry run whose tool changed runs nothing, and puts up no card.
		{Tool: "memory__delete_entities", ToolCallID: "d2", Args: json.RawMessage(`{"entityNames":["Ama"]}`)},
	} {
		in.Session = writer
		res := s.First(t, in)
		if res.Status != workflows.StatusFailed || res.Code != policy.CodeDefinitionChanged || res.Card != "" || !strings.Contains(res.Message, "otherwise than a person accepted") {
			t.Fatalf("%s, whose definition changed: %s/%s %q card %q", in.Tool, res.Status, res.Code, res.Message, res.Card)
		}
	}
	var cards int
	_ = s.Owner.QueryRow(context.Background(), `SELECT count(*) FROM pending_action`).Scan(&cards)
	if cards != 0 {
		t.Fatalf("%d cards went up for calls that could not run", cards)
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Fatalf("a write whose definition changed left a file: %v", err)
	}
	// The auditor's insights page flags the tool until it is accepted again.
	r := insights.Reader{Pool: testenv.ServicePool(t, s.DatabaseURL, "auditor"), Policy: s.Policy}
	p, err := r.Page(context.Background(), insights.Filter{From: time.Now().Add(-time.Hour), To: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if c := p.Chart("changed"); c == nil || c.Empty || !strings.Contains(string(c.SVG), ">files__write_file<") {
		t.Fatalf("the insights page's changed definitions: %+v", c)
	}
}

func quoteJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// holdAfterCall stands between the worker and an MCP server over stdio: it
// writes each tools/call request it passes on to a log (what reached the
// server, and how often, across every server it starts), and once a
// write_file has reached this server, holds its answers until the release
// file appears (a minute at most, so a test its timeout kills leaves no
// shim waiting), so the worker can be killed while the server has done the
// work and its answer is not yet read.
const holdAfterCall = `#!/bin/sh
log="$1"; release="$2"; shift 2
while IFS= read -r line; do
  case "$line" in *'"tools/call"'*) printf '%s\n' "$line" >> "$log";; esac
  case "$line" in *'"tools/call"'*'"write_file"'*) : > "$log.$$";; esac
  printf '%s\n' "$line"
done | "$@" | while IFS= read -r line; do
  n=0; while [ -e "$log.$$" ] && [ ! -e "$release" ] && [ $n -lt 600 ]; do sleep 0.1; n=$((n+1)); done
  printf '%s\n' "$line"
done
`

// TestAnApprovedWriteRunsOnceThroughAKilledWorker: an approved write_file
// reaches the filesystem server, which writes the file; the worker process
// is killed before it reads the answer. A new worker does not send it
// again (write_file is not idempotent): the call ends failed/timeout,
// telling the model not to call again, and a client's retry with the same
// key, while the call runs and after it ended, answers that outcome and
// sends nothing. The server saw one tools/call, and the file holds the
// args asked.
func TestAnApprovedWriteRunsOnceThroughAKilledWorker(t *testing.T) {
	bin := testenv.Build(t, "./worker")
	server := testenv.ReferenceServer(t, "mcp-server-filesystem")
	dir := t.TempDir()
	wrapper, sends, release := filepath.Join(dir, "hold.sh"), filepath.Join(dir, "sends.log"), filepath.Join(dir, "release")
	if err := os.WriteFile(wrapper, []byte(holdAfterCall), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.WriteFile(release, nil, 0o644) })
	held := fmt.Sprintf(`command: [%s, %s, %s, %s, "${TOOLGATE_SCRATCH}"]`, quoteJSON(wrapper), quoteJSON(sends), quoteJSON(release), quoteJSON(server[0]))
	file := referencePack(t, dir, func(text string) string {
		text = strings.Replace(text, `command: [../mcp/node_modules/.bin/mcp-server-filesystem, "${TOOLGATE_SCRATCH}"]`, held, 1)
		if !strings.Contains(text, held) {
			return ""
		}
		return strings.Replace(text, "    tool: write_file\n", "    tool: write_file\n    timeout: 3s\n", 1)
	})
	if b, _ := os.ReadFile(file); !strings.Contains(string(b), "timeout: 3s") {
		t.Fatal("the reference pack no longer reads as this test expects")
	}
	s, scratch, writer := referenceStack(t, file)
	s.StopWorker() // the worker is a process of its own, killed below
	logs, err := os.Create(filepath.Join(dir, "worker.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if b, _ := os.ReadFile(logs.Name()); t.Failed() {
			t.Logf("the workers' logs:\n%s", b)
		}
	})
	worker := func() *exec.Cmd {
		cmd := exec.Command(filepath.Join(bin, "worker"))
		cmd.Env = append(os.Environ(), "TEMPORAL_ADDRESS="+testenv.TemporalAddress(t), "TEMPORAL_NAMESPACE="+testenv.Namespace(),
			"DATABASE_URL="+s.DatabaseURL, "UPSTREAM_URL="+s.Upstream.URL, "TOOLGATE_PACKS="+file, "TOOLGATE_TASK_QUEUES=reference="+s.TaskQueue,
			"TOOLGATE_APPROVAL_KEYS="+testenv.ApprovalKeysEnv(), "TOOLGATE_APPROVER_ISSUERS="+testenv.Issuer, "TOOLGATE_CODEC_KEYS="+testenv.CodecKeys,
			"METRICS_ADDR=127.0.0.1:0", "CODEC_ADDR=127.0.0.1:0", "CODEC_AUTH_TOKEN=a-codec-token-of-at-least-32-characters", "LOG_LEVEL=warn")
		cmd.Stdout, cmd.Stderr = logs, logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	first := worker()

	target := filepath.Join(scratch, "plan.txt")
	in := workflows.ToolCallInput{Tool: "files__write_file", ToolCallID: "kw1", Session: writer,
		Args: json.RawMessage(`{"path":` + quoteJSON(target) + `,"content":"Order 40 cases."}`)}
	card := s.First(t, in)
	if card.Status != workflows.StatusPendingApproval {
		t.Fatalf("a write: %+v", card)
	}
	a := approve(keeperID)
	a.ArgsHash = card.ArgsHash
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := s.Client.SignalWorkflow(ctx, card.IdempotencyKey, "", workflows.ApprovalSignal, testenv.Sign(a, card.CardRef())); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if b, err := os.ReadFile(target); err == nil && string(b) == "Order 40 cases." {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the approved write never reached the server")
		}
	}
	if err := first.Process.Kill(); err != nil { // SIGKILL: the answer is never read
		t.Fatal(err)
	}
	_ = first.Wait()
	worker()

	retried := s.First(t, in) // the same key while the call runs: it attaches
	res := s.Run(t, in)
	if res.Status != workflows.StatusFailed || res.Code != policy.CodeTimeout || res.Retryable || !strings.Contains(res.Message, "Do not call again") {
		t.Fatalf("the write whose worker was killed: %s/%s retryable %v %q", res.Status, res.Code, res.Retryable, res.Message)
	}
	if retried.Status != workflows.StatusFailed && retried.Status != workflows.StatusPendingApproval {
		t.Fatalf("a retry with the same key while the call ran: %+v", retried)
	}
	after := s.Run(t, in) // and after it ended: a new run finds the call claimed
	if after.Status != res.Status || after.Code != res.Code {
		t.Fatalf("a retry with the same key after the call ended: %s/%s, want %s/%s", after.Status, after.Code, res.Status, res.Code)
	}
	log, err := os.ReadFile(sends)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(log), `"name":"write_file"`); n != 1 {
		t.Fatalf("the server was sent %d write_file calls, want one:\n%s", n, log)
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != "Order 40 cases." {
		t.Fatalf("the file: %q %v", b, err)
	}
}

// TestADryRunShowsTheCallerOnlyWhatTheyMayRead: what a write's dry run
// reads goes on the card its caller is answered with, so it is read only
// when the preview tool's own row lets the caller read it: a writer whose
// role may not read files gets a card that shows the exact args and not
// the file.
func TestADryRunShowsTheCallerOnlyWhatTheyMayRead(t *testing.T) {
	dir := t.TempDir()
	file := referencePack(t, dir, func(text string) string {
		return strings.Replace(text, "    tool: read_text_file\n    tier: read\n    idempotent: true\n    example: {path: /srv/scratch/notes.txt}\n    narrow:\n      path: {pathPrefix: \"${TOOLGATE_SCRATCH}\"}\n    policy: {roles: [writer, keeper], decision: allow}",
			"    tool: read_text_file\n    tier: read\n    idempotent: true\n    example: {path: /srv/scratch/notes.txt}\n    narrow:\n      path: {pathPrefix: \"${TOOLGATE_SCRATCH}\"}\n    policy: {roles: [keeper], decision: allow}", 1)
	})
	s, scratch, writer := referenceStack(t, file)
	secret := filepath.Join(scratch, "salaries.txt")
	if err := os.WriteFile(secret, []byte("kofi 41000"), 0o644); err != nil {
		t.Fatal(err)
	}
	first := s.First(t, workflows.ToolCallInput{Tool: "files__write_file", ToolCallID: "w1", Session: writer,
		Args: json.RawMessage(`{"path":` + quoteJSON(secret) + `,"content":"x"}`)})
	if first.Status != workflows.StatusPendingApproval || strings.Contains(first.Card, "41000") || !strings.HasSuffix(first.Card, "· Now: not shown (files__read_text_file is not the caller's to read with: role)") {
		t.Fatalf("a writer who may not read the file: %s %q", first.Status, first.Card)
	}
}

// TestAWriteNobodyDecidedLeavesTheFolderUntouched: a write_file card that
// expires runs nothing, and the server is never sent it.
func TestAWriteNobodyDecidedLeavesTheFolderUntouched(t *testing.T) {
	s, scratch, writer := referenceStackTTL(t, "../examples/packs/reference.yaml", 2*time.Second)
	target := filepath.Join(scratch, "late.txt")
	res := s.Run(t, workflows.ToolCallInput{Tool: "files__write_file", ToolCallID: "late1", Session: writer,
		Args: json.RawMessage(`{"path":` + quoteJSON(target) + `,"content":"too late"}`)})
	if res.Status != workflows.StatusExpired || res.Code != policy.CodeExpired {
		t.Fatalf("a write nobody decided: %s/%s %q", res.Status, res.Code, res.Message)
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Fatalf("an expired write left a file: %v", err)
	}
}

// TestOneMCPServerCannotStallAnother: a server that never finishes its
// handshake (here a process that never answers) holds up its own calls
// alone: a read from the other server runs while the stalled server's
// first dial is still under way (its attempt is bounded at 10 s; the read
// ends well before), and the stalled server's failed dial backs it off on
// its own.
func TestOneMCPServerCannotStallAnother(t *testing.T) {
	const stall = 10 * time.Second
	pack := referencePack(t, t.TempDir(), func(text string) string {
		text = strings.Replace(text, "command: [../mcp/node_modules/.bin/mcp-server-memory]", `command: [/bin/sh, -c, "exec sleep 300"]`, 1)
		return strings.Replace(text, "    tool: read_graph\n", fmt.Sprintf("    tool: read_graph\n    timeout: %s\n", stall), 1)
	})
	s, scratch, writer := referenceStack(t, pack)
	if err := os.WriteFile(filepath.Join(scratch, "notes.txt"), []byte("cold chain"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	began := time.Now()
	stalled, err := workflows.Start(ctx, s.Client, s.Policy, s.TaskQueue, workflows.ToolCallInput{Tool: "memory__read_graph", ToolCallID: "g1", Session: writer, Args: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Client.TerminateWorkflow(ctx, stalled.GetID(), "", "the test is over") }()
	time.Sleep(time.Second) // the stalled server's dial is under way
	read := s.Run(t, workflows.ToolCallInput{Tool: "files__read_text_file", ToolCallID: "r1", Session: writer,
		Args: json.RawMessage(`{"path":` + quoteJSON(filepath.Join(scratch, "notes.txt")) + `}`)})
	if took := time.Since(began); took >= stall {
		t.Fatalf("the healthy server's read ended %s after the stalled server's call began: it waited for that call's first attempt to end", took.Round(time.Millisecond))
	}
	if read.Status != workflows.StatusExecuted || !strings.Contains(string(read.Result), "cold chain") {
		t.Fatalf("a read from the healthy server: %s/%s %q", read.Status, read.Code, read.Message)
	}
	for deadline := time.Now().Add(3 * stall); ; time.Sleep(200 * time.Millisecond) {
		backoffs := s.Logs.FilterMessage("an MCP server's dial failed; it is backed off")
		if backoffs.FilterField(zap.String("server", "files")).Len() != 0 {
			t.Fatal("the healthy server was backed off")
		}
		if backoffs.FilterField(zap.String("server", "memory")).Len() > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the stalled server was never backed off")
		}
	}
}

// TestAnEditFindsAChangedDefinitionAndEndsTheCard: cards for write_file
// (with a dry run) and move_file (without) are up; the pins file is then
// changed to accept other words than the server gives, and the worker
// restarts with it. A keeper's edit of either runs the chain again, finds
// the tool no longer as accepted, and ends the card failed,
// definition_changed: no new version goes up for a call that cannot run.
func TestAnEditFindsAChangedDefinitionAndEndsTheCard(t *testing.T) {
	dir := t.TempDir()
	file := referencePack(t, dir, func(text string) string {
		text = strings.Replace(text, "      evidence: [{acr: pwd, maxAge: 8h}]\n  - server: files\n    tool: move_file",
			"      evidence: [{acr: pwd, maxAge: 8h}]\n      editable: [content]\n  - server: files\n    tool: move_file", 1)
		return strings.Replace(text, "      evidence: [{acr: pwd, maxAge: 8h}]\n  - server: memory\n    tool: read_graph",
			"      evidence: [{acr: pwd, maxAge: 8h}]\n      editable: [destination]\n  - server: memory\n    tool: read_graph", 1)
	})
	if b, _ := os.ReadFile(file); strings.Count(string(b), "editable:") != 2 {
		t.Fatal("the reference pack no longer reads as this test expects")
	}
	s, scratch, writer := referenceStack(t, file)
	if err := os.WriteFile(filepath.Join(scratch, "old.txt"), []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	type pending struct {
		first workflows.Outcome
		run   client.WorkflowRun
		edit  string
	}
	var cards []pending
	for _, c := range []struct{ tool, id, args, edit string }{
		{"files__write_file", "we1", `{"path":` + quoteJSON(filepath.Join(scratch, "plan.txt")) + `,"content":"x"}`, `{"content":"y"}`},
		{"files__move_file", "me1", `{"source":` + quoteJSON(filepath.Join(scratch, "old.txt")) + `,"destination":` + quoteJSON(filepath.Join(scratch, "new.txt")) + `}`,
			`{"destination":` + quoteJSON(filepath.Join(scratch, "newer.txt")) + `}`},
	} {
		first, run, err := workflows.Call(ctx, s.Client, s.Policy, s.TaskQueue, workflows.ToolCallInput{Tool: c.tool, ToolCallID: c.id, Session: writer, Args: json.RawMessage(c.args)})
		if err != nil || first.Status != workflows.StatusPendingApproval {
			t.Fatalf("%s: %v %+v", c.tool, err, first.ToolCallResult)
		}
		cards = append(cards, pending{first, run, c.edit})
	}
	pins, err := packs.ReadPins(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range []string{"write_file", "move_file"} {
		was := pins["files"][tool]
		was.Definition.Description = "Accepted before the server's update."
		was.Pin = was.Definition.Pin()
		pins["files"][tool] = was
	}
	b, _ := json.Marshal(pins)
	if err := os.WriteFile(packs.PinsFile(file), b, 0o644); err != nil {
		t.Fatal(err)
	}
	changed, err := packs.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	s.UsePolicy(t, changed.Policy)
	for _, c := range cards {
		a := signoff.Approval{Decision: signoff.Edit, ArgsHash: c.first.ArgsHash, Approver: keeperID, Edit: json.RawMessage(c.edit)}
		if err := s.Client.SignalWorkflow(ctx, c.run.GetID(), c.first.RunID, workflows.ApprovalSignal, testenv.Sign(a, c.first.CardRef())); err != nil {
			t.Fatal(err)
		}
		res := awaitResult(t, c.run, 30*time.Second, "the edited "+c.first.IdempotencyKey)
		if res.Status != workflows.StatusFailed || res.Code != policy.CodeDefinitionChanged || !strings.Contains(res.Message, "otherwise than a person accepted") {
			t.Fatalf("%s after the edit: %s/%s %q", c.run.GetID(), res.Status, res.Code, res.Message)
		}
	}
	var versions, failed int
	_ = s.Owner.QueryRow(ctx, `SELECT count(*) FILTER (WHERE card_version > 1), count(*) FILTER (WHERE status = 'failed') FROM pending_action`).Scan(&versions, &failed)
	if versions != 0 || failed != 2 {
		t.Fatalf("%d cards went up again as a new version, %d ended failed; want 0 and 2", versions, failed)
	}
	for _, name := range []string{"plan.txt", "new.txt", "newer.txt"} {
		if _, err := os.Stat(filepath.Join(scratch, name)); !os.IsNotExist(err) {
			t.Fatalf("%s exists: %v", name, err)
		}
	}
}
