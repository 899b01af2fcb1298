// starter's commands for decisions: approve or reject a card as a person, and hand a locked-out caller back.

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/toolgate/toolgate/activities"
	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signoff"
	"github.com/toolgate/toolgate/workflows"
	"go.temporal.io/sdk/client"
)

// handBackCmd ends a caller's verification lockout at one pack: the
// person's wrong answers are forgotten and the hand-back recorded, by whom
// (hand_back_caller, migration 026). It is found by the user ID of any of
// their credentials, so every sign-in of theirs is handed back.
func handBackCmd(cfg config.Config, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("hand-back", flag.ContinueOnError)
	pack := fs.String("pack", "", "the pack whose verification locked the caller out, e.g. northgate")
	user := fs.String("user", "", "the caller's user ID, e.g. dana")
	by := fs.String("by", "", "who hands them back (recorded), e.g. imogen")
	note := fs.String("note", "", "why, e.g. verified in branch with photo ID")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *pack == "" || *user == "" || *by == "" {
		return errors.New("hand-back: --pack, --user and --by are required, e.g. --pack northgate --user dana --by imogen")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := pgx.Connect(ctx, cfg.DatabaseURL)
	if err != nil {
		return fmt.Errorf("hand-back: %w", err)
	}
	defer db.Close(ctx)
	var handed int
	err = db.QueryRow(ctx, `SELECT count(*) FILTER (WHERE hand_back_caller($1, v.issuer, v.subject, $3, $4)) FROM caller_verification v
		WHERE v.pack = $1 AND (v.issuer, v.subject) IN (SELECT issuer, subject FROM vault.credentials WHERE user_id = $2)`, *pack, *user, *by, *note).Scan(&handed)
	if err != nil {
		return fmt.Errorf("hand-back: %w", err)
	}
	if handed == 0 {
		return fmt.Errorf("hand-back: %s has no lockout or wrong answers at %s to hand back", *user, *pack)
	}
	fmt.Fprintf(out, "%s is handed back at %s by %s: they may verify again\n", *user, *pack, *by)
	return nil
}

// decideCmd sends an approval decision as the approver the flags name. It
// stands in for the card UI; the approver's identity is theirs, not the requester's.
func decideCmd(cfg config.Config, decision string, args []string, out io.Writer) error {
	fs := flag.NewFlagSet(decision, flag.ContinueOnError)
	call := callFlags(fs)
	user := fs.String("user", "", "approver's user ID")
	role := fs.String("role", "", "approver's role")
	stores := fs.String("stores", "", "Mangrove's alias: --stores 112,118 is --resources store=112,store=118")
	resources := fs.String("resources", "", "the resources the approver holds, as kind=id pairs, comma-separated (e.g. queue=Q-1)")
	reason := fs.String("reason", "", "optional note")
	hash := fs.String("hash", "", "the args hash shown on the card (read from the call when left out)")
	acr := fs.String("acr", policy.ACRPassword, "the sign-in strength the operator vouches for (pwd or mfa)")
	wait := fs.Duration("wait", DecisionWait, "how long to wait for the worker to count or refuse the decision (0: send it and do not wait)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	wf, err := call.workflow()
	if err != nil {
		return fmt.Errorf("%s: %w", decision, err)
	}
	if !slices.Contains(policy.ACRLevels, *acr) {
		return fmt.Errorf("%s: --acr must be one of %v", decision, policy.ACRLevels)
	}
	held, err := parseResources(*stores, *resources)
	if err != nil {
		return err
	}
	if *user == "" || *role == "" {
		return fmt.Errorf("%s: --user and --role are required", decision)
	}
	c, err := dial(cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	if cfg.SigningKey == nil {
		return fmt.Errorf("%s: decisions must be signed; set TOOLGATE_APPROVAL_SIGNING_KEY (make dev writes one to %s)", decision, config.DevKeysFile)
	}
	// The operator holding the signing key vouches for the approver: the
	// evidence names the operator as its issuer, and counts only where the
	// worker trusts it (make dev does; a deployment should not).
	a := signoff.Approval{Decision: decision, ArgsHash: *hash, Reason: *reason,
		Approver: policy.Identity{UserID: *user, Role: policy.Role(*role), Resources: held},
		Evidence: &signoff.AuthEvidence{Issuer: OperatorIssuer, Subject: *user, ACR: *acr, AMR: []string{"operator"}, AuthTime: time.Now().UTC().Format(time.RFC3339)}}
	return sendDecision(cfg, c, decision, wf, a, *wait, out)
}

// withdrawCmd withdraws a pending card on behalf of the person who asked
// for it. The operator holding the signing key vouches for that person by
// user ID, as the issuer of the evidence (OperatorIssuer), so the audit log
// says who stood behind it; it counts only where the worker trusts its
// operators' word (make dev does; a deployment should not).
func withdrawCmd(cfg config.Config, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("withdraw", flag.ContinueOnError)
	call := callFlags(fs)
	user := fs.String("user", "", "the user ID of the person who asked for the call, as the card names them")
	reason := fs.String("reason", "", "optional: why they took it back")
	wait := fs.Duration("wait", DecisionWait, "how long to wait for the worker to count or refuse the withdrawal (0: send it and do not wait)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	wf, err := call.workflow()
	if err != nil {
		return fmt.Errorf("withdraw: %w", err)
	}
	if *user == "" {
		return errors.New("withdraw: --user is required: the user ID of the person who asked for the call")
	}
	if cfg.SigningKey == nil {
		return fmt.Errorf("withdraw: withdrawals must be signed; set TOOLGATE_APPROVAL_SIGNING_KEY (make dev writes one to %s)", config.DevKeysFile)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := cfg.OpenPool(ctx, "approvals")
	if err != nil {
		return fmt.Errorf("withdraw: %w", err)
	}
	defer pool.Close()
	var by, role string
	err = pool.QueryRow(ctx, `SELECT requested_by, requester_role FROM pending_action WHERE workflow_id = $1`, wf).Scan(&by, &role)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("withdraw: %s has put up no card: only a call that waits for a person can be withdrawn", wf)
	}
	if err != nil {
		return fmt.Errorf("withdraw: read the card of %s: %w", wf, err)
	}
	if by != *user {
		return fmt.Errorf("withdraw: %s was asked for by %s, not %s: only the person who asked may withdraw it", wf, by, *user)
	}
	ev := signoff.AuthEvidence{Issuer: OperatorIssuer, Subject: by, ACR: policy.ACRPassword, AMR: []string{"operator"}, AuthTime: time.Now().UTC().Format(time.RFC3339)}
	c, err := dial(cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	a := signoff.Approval{Decision: signoff.Withdraw, Reason: *reason, Approver: policy.Identity{UserID: by, Role: policy.Role(role)}, Evidence: &ev}
	return sendDecision(cfg, c, signoff.Withdraw, wf, a, *wait, out)
}

// sendDecision signs and sends decision a on the card of call wf, and,
// unless wait is 0, waits that long for what the worker recorded of it.
func sendDecision(cfg config.Config, c client.Client, decision, wf string, a signoff.Approval, wait time.Duration, out io.Writer) error {
	user := &a.Approver.UserID
	if wait <= 0 {
		if err := workflows.SendDecision(context.Background(), c, wf, a, *cfg.SigningKey); err != nil {
			return fmt.Errorf("%s: %w", decision, err)
		}
		fmt.Fprintf(out, "%s sent to %s; `starter wait` shows the outcome\n", decision, wf)
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	reader, closeReader, err := auditor(ctx, cfg)
	if err != nil {
		return fmt.Errorf("%s: its outcome could not be read, so nothing was sent (--wait 0 sends without reading it): %w", decision, err)
	}
	defer closeReader()
	// The log's own clock: a row the worker writes for this decision is
	// stamped after it, whatever this machine's clock says.
	var sent time.Time
	if err := reader.Pool.QueryRow(ctx, `SELECT now()`).Scan(&sent); err != nil {
		return fmt.Errorf("%s: %w", decision, err)
	}
	if err := workflows.SendDecision(ctx, c, wf, a, *cfg.SigningKey); err != nil {
		return fmt.Errorf("%s: %w", decision, err)
	}
	waitCtx, stop := context.WithTimeout(context.Background(), wait)
	defer stop()
	o, err := awaitDecision(waitCtx, reader.Pool, wf, *user, sent)
	if err != nil {
		return fmt.Errorf("%s sent to %s, but %w; `starter explain --workflow-id %s` shows what happened", decision, wf, err, wf)
	}
	if o.Event == string(activities.EventApprovalRefused) {
		return fmt.Errorf("%s refused by %s: %s (%s)", decision, wf, o.Code, o.Message)
	}
	fmt.Fprintf(out, "%s of %s: %s\n", decision, wf, o.Event)
	return nil
}

// DecisionWait is how long approve and reject wait, by default, for the
// worker to count or refuse what they sent.
const DecisionWait = 15 * time.Second

// decisionOutcome is what the worker recorded of one approver's decision.
type decisionOutcome struct{ Event, Code, Message string }

// awaitDecision waits for the audit row the worker writes for a decision
// user sent after sent (the log's clock): counted, applied, or refused
// with its code. A signal has no answer of its own, so the audit log is
// where a refusal is read.
func awaitDecision(ctx context.Context, db *pgxpool.Pool, workflowID, user string, sent time.Time) (decisionOutcome, error) {
	for {
		var o decisionOutcome
		err := db.QueryRow(ctx, `SELECT event, coalesce(reason, ''), coalesce(message, '') FROM audit_log
			WHERE workflow_id = $1 AND at >= $3 AND (approver_id = $2 OR claimed_approver_id = $2)
			  AND event IN ('approval_refused', 'approval_counted', 'edited', 'approved', 'rejected', 'withdrawn')
			ORDER BY id DESC LIMIT 1`, workflowID, user, sent).Scan(&o.Event, &o.Code, &o.Message)
		if err == nil {
			o.Message = strings.TrimPrefix(o.Message, "Refused: ")
			return o, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return o, fmt.Errorf("its outcome cannot be read: %w", err)
		}
		select {
		case <-ctx.Done():
			return o, errors.New("the worker recorded no outcome in time (is it running?)")
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// pendingCmd lists the cards an approver of a role over some resources
// may decide, as the card UI's inbox shows them: newest first, at most
// approvals.InboxSize. It reads pending_action as the card UI does (its
// login, toolgate_approvals).
func pendingCmd(cfg config.Config, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("pending", flag.ContinueOnError)
	role := fs.String("role", "", "the approver's role, e.g. store_manager")
	stores := fs.String("stores", "", "Mangrove's alias: --stores 112,118 is --resources store=112,store=118")
	resources := fs.String("resources", "", "the approver's resources, as kind=id pairs, comma-separated")
	format := fs.String("format", "text", "text or json")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *role == "" {
		return errors.New("pending: --role is required, e.g. --role store_manager --stores 112")
	}
	if *format != "text" && *format != "json" {
		return fmt.Errorf("pending: --format %q: want text or json", *format)
	}
	held, err := parseResources(*stores, *resources)
	if err != nil {
		return fmt.Errorf("pending: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := cfg.OpenPool(ctx, "approvals")
	if err != nil {
		return fmt.Errorf("pending: the card UI's database login (APPROVALS_DATABASE_URL, default DATABASE_URL as toolgate_approvals): %w", err)
	}
	defer pool.Close()
	cards, err := (&approvals.Server{Policy: cfg.Policy, Pool: pool}).Inbox(ctx, policy.Role(*role), held)
	if err != nil {
		return fmt.Errorf("pending: %w", err)
	}
	list := make([]PendingCard, 0, len(cards))
	for _, c := range cards {
		list = append(list, PendingCard{WorkflowID: c.WorkflowID, Tool: c.Tool, Card: c.Text, Value: c.Value, ValueCents: c.ValueCents,
			ApproverRole: c.ApproverRole, EscalatedTo: c.EscalatedTo, Resource: resourcePair(c.Resource), RequestedBy: c.RequestedBy,
			ExpiresAt: c.ExpiresAt.UTC().Format(time.RFC3339), ArgsHash: c.ArgsHash, Version: max(1, c.Version),
			ApprovalsNeeded: max(1, c.ApprovalsNeeded), ApprovalsCounted: len(c.Approvals)})
	}
	if *format == "json" {
		return printJSON(out, list)
	}
	if len(list) == 0 {
		fmt.Fprintf(out, "no card waits for a %s over %s\n", *role, heldText(held))
		return nil
	}
	for _, c := range list {
		fmt.Fprintf(out, "%s\n  %s: %s\n  value %s · routed to %s", c.WorkflowID, c.Tool, c.Card, c.Value, c.ApproverRole)
		if c.EscalatedTo != "" {
			fmt.Fprintf(out, " (escalated to %s)", c.EscalatedTo)
		}
		if c.ApprovalsNeeded > 1 {
			fmt.Fprintf(out, " · %d of %d approvals", c.ApprovalsCounted, c.ApprovalsNeeded)
		}
		fmt.Fprintf(out, " · requested by %s · expires %s\n", c.RequestedBy, c.ExpiresAt)
	}
	fmt.Fprintf(out, "%d card(s); decide one with: starter approve|reject --workflow-id ID --user YOU --role %s ...\n", len(list), *role)
	return nil
}

// PendingCard is one card starter pending lists (its JSON is --format json's).
type PendingCard struct {
	WorkflowID string `json:"workflowId"`
	Tool       string `json:"tool"`
	// Card is the card's text, as the card UI shows it.
	Card string `json:"card"`
	// Value is ValueCents in the tool's pack's unit ("none" for a tool whose calls have no value).
	Value        string `json:"value"`
	ValueCents   int64  `json:"valueCents"`
	ApproverRole string `json:"approverRole"`
	EscalatedTo  string `json:"escalatedTo,omitempty"`
	// Resource is the one the call acts on, kind=id ("" for none).
	Resource    string `json:"resource,omitempty"`
	RequestedBy string `json:"requestedBy"`
	ExpiresAt   string `json:"expiresAt"`
	ArgsHash    string `json:"argsHash"`
	Version     int    `json:"version"`
	// ApprovalsNeeded is how many distinct approvers the card needs;
	// ApprovalsCounted those counted so far.
	ApprovalsNeeded  int `json:"approvalsNeeded"`
	ApprovalsCounted int `json:"approvalsCounted"`
}

func heldText(held policy.Resources) string {
	var parts []string
	for kind, ids := range held {
		for _, id := range ids {
			parts = append(parts, kind+"="+id)
		}
	}
	if len(parts) == 0 {
		return "no resources"
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

// resourcePair writes a resource as --resources takes it, kind=id.
func resourcePair(r policy.ResourceRef) string {
	if r.Kind == "" {
		return ""
	}
	return r.Kind + "=" + r.ID
}
