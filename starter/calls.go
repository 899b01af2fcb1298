// starter's commands for calls: start or attach to one, wait for it, read its status, resume it with a new sign-in.

package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/workflows"
	"go.temporal.io/sdk/client"
)

func callCmd(cfg config.Config, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("call", flag.ContinueOnError)
	input := fs.String("input", "", "the whole ToolCall input as JSON")
	tool := fs.String("tool", "", "tool name")
	callID := fs.String("call-id", "", "the model's tool-call ID")
	argsJSON := fs.String("args", "{}", "tool args as a JSON object")
	user := fs.String("user", "", "signed-in user ID")
	role := fs.String("role", "", "the session's role")
	stores := fs.String("stores", "", "Mangrove's alias: --stores 112,118 is --resources store=112,store=118")
	resources := fs.String("resources", "", "the resources the session holds, as kind=id pairs, comma-separated (e.g. queue=Q-1,queue=Q-2)")
	conv := fs.String("conversation", "", "conversation ID")
	session := fs.String("session", "", "session ID (defaults to the conversation ID)")
	cred := fs.String("credential", "", "credential reference; leave out for a signed-out session")
	wait := fs.Bool("wait", false, "after the first outcome, wait for the final one")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var in workflows.ToolCallInput
	if *input != "" {
		dec := json.NewDecoder(strings.NewReader(*input))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&in); err != nil {
			return fmt.Errorf("--input is not a ToolCall input (fields tool, toolCallId, args, session): %w", err)
		}
	} else {
		held, err := parseResources(*stores, *resources)
		if err != nil {
			return err
		}
		if *session == "" {
			*session = *conv
		}
		in = workflows.ToolCallInput{Tool: *tool, ToolCallID: *callID, Args: json.RawMessage(*argsJSON), Session: policy.Session{
			UserID: *user, Role: policy.Role(*role), Resources: held, SessionID: *session, ConversationID: *conv, CredentialRef: *cred}}
		if !json.Valid(in.Args) {
			return fmt.Errorf("--args is not valid JSON: %s", *argsJSON)
		}
	}
	// A tool of a pack this process does not load would go to the wrong
	// task queue, its free text unredacted: say what to set instead.
	if _, ok := cfg.Policy.Spec(in.Tool); !ok {
		var names []string
		for _, d := range cfg.Policy.Packs() {
			names = append(names, d.Name)
		}
		return fmt.Errorf("call: %q is not a tool of the packs this starter loads (%s): set TOOLGATE_PACKS, and TOOLGATE_TASK_QUEUES, as the worker has them", in.Tool, strings.Join(names, ", "))
	}
	c, err := dial(cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx := context.Background()
	first, run, err := workflows.Call(ctx, c, cfg.Policy, cfg.QueueFor(in.Tool), in)
	if err != nil {
		return err
	}
	if err := printJSON(out, first); err != nil || !*wait || first.Status != workflows.StatusPendingApproval {
		return err
	}
	var res workflows.ToolCallResult
	if err := run.Get(ctx, &res); err != nil {
		return fmt.Errorf("%s: %w", run.GetID(), err)
	}
	return printJSON(out, res)
}

func dial(cfg config.Config) (client.Client, error) {
	c, err := client.Dial(cfg.ClientOptions())
	if err != nil {
		return nil, cfg.DialError(err)
	}
	return c, nil
}

// callFlags are the flags naming one call.
func callFlags(fs *flag.FlagSet) callFlagSet {
	return callFlagSet{fs.String("conversation", "", "conversation ID"), fs.String("call-id", "", "tool-call ID"),
		fs.String("workflow-id", "", "the call's workflow ID, as starter pending and the card UI show it (instead of --conversation and --call-id)")}
}

// callFlagSet names a call: by its conversation and tool-call ID, or by
// its workflow ID (an MCP caller learns only its call ID until the end).
type callFlagSet struct{ conv, id, workflowID *string }

func (f callFlagSet) workflow() (string, error) {
	switch {
	case *f.workflowID != "" && (*f.conv != "" || *f.id != ""):
		return "", errors.New("name the call once: --workflow-id, or --conversation and --call-id")
	case *f.workflowID != "":
		return *f.workflowID, nil
	case *f.conv == "" || *f.id == "":
		return "", errors.New("--conversation and --call-id are required, or --workflow-id")
	}
	return workflows.WorkflowID(*f.conv, *f.id), nil
}

// openCall reads a command's call flags and dials Temporal.
func openCall(cfg config.Config, name string, args []string) (string, client.Client, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	call := callFlags(fs)
	if err := fs.Parse(args); err != nil {
		return "", nil, err
	}
	wf, err := call.workflow()
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", name, err)
	}
	c, err := dial(cfg)
	return wf, c, err
}

func waitCmd(cfg config.Config, args []string, out io.Writer) error {
	wf, c, err := openCall(cfg, "wait", args)
	if err != nil {
		return err
	}
	defer c.Close()
	var res workflows.ToolCallResult
	if err := c.GetWorkflow(context.Background(), wf, "").Get(context.Background(), &res); err != nil {
		return fmt.Errorf("%s: %w", wf, err)
	}
	return printJSON(out, res)
}

func resumeCmd(cfg config.Config, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("resume", flag.ContinueOnError)
	call := callFlags(fs)
	ref := fs.String("credential", "", "the credential handle of the person's new sign-in (starter credential mints one in dev mode)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	wf, err := call.workflow()
	if err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	if *ref == "" {
		return errors.New("resume: --credential is required: the handle of the person's new sign-in")
	}
	c, err := dial(cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := workflows.Resume(context.Background(), c, wf, *ref); err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	fmt.Fprintf(out, "credential sent to %s; `starter wait` shows the outcome\n", wf)
	return nil
}

func statusCmd(cfg config.Config, args []string, out io.Writer) error {
	wf, c, err := openCall(cfg, "status", args)
	if err != nil {
		return err
	}
	defer c.Close()
	v, err := c.QueryWorkflow(context.Background(), wf, "", workflows.StatusQuery)
	if err != nil {
		return fmt.Errorf("query %s: %w", wf, err)
	}
	var st workflows.Status
	if err := v.Get(&st); err != nil {
		return err
	}
	return printJSON(out, st)
}

// parseResources reads --resources (kind=id pairs, comma-separated) and
// --stores (the demo pack's store numbers, comma-separated) into one set.
func parseResources(stores, resources string) (policy.Resources, error) {
	out := policy.Resources{}
	for _, p := range strings.Split(stores, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		if _, err := strconv.ParseInt(p, 10, 64); err != nil {
			return nil, fmt.Errorf("--stores: %q is not a store number", p)
		}
		out["store"] = append(out["store"], p)
	}
	for _, p := range strings.Split(resources, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		kind, id, ok := strings.Cut(p, "=")
		if !ok || kind == "" || id == "" {
			return nil, fmt.Errorf("--resources: %q is not kind=id, e.g. portal=PRT-40122", p)
		}
		out[kind] = append(out[kind], id)
	}
	if why := out.Problem("--resources"); why != "" {
		return nil, errors.New(why)
	}
	return out, nil
}
