// Command starter is the command-line client of toolgate: it starts or
// attaches to a tool call and prints its outcome as JSON, prints the tool
// definitions a role may be offered, queries a call's status, and applies
// the database migrations.
package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/toolgate/toolgate/codec"
	"github.com/toolgate/toolgate/idp"
	"github.com/toolgate/toolgate/insights"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/devcerts"
	"github.com/toolgate/toolgate/internal/devenv"
	"github.com/toolgate/toolgate/internal/packs"
	"github.com/toolgate/toolgate/migrations"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/register"
	"github.com/toolgate/toolgate/workflows"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
)

const usage = `usage:
  starter call    --tool NAME --call-id ID --args JSON --user U --role R --stores 112[,118] | --resources KIND=ID[,KIND=ID] --conversation C [--session S] [--credential REF] [--wait]
  starter call    --input '{"tool": ..., "toolCallId": ..., "args": {...}, "session": {...}}' [--wait]
  starter status  --conversation C --call-id ID
  starter wait    --conversation C --call-id ID
  starter approve --conversation C --call-id ID --user U --role R --stores 112[,118] | --resources KIND=ID[,…] [--reason TEXT] [--hash H] [--acr pwd|mfa]
  starter reject  --conversation C --call-id ID --user U --role R --stores 112[,118] | --resources KIND=ID[,…] [--reason TEXT] [--hash H] [--acr pwd|mfa]
  starter resume  --conversation C --call-id ID --credential REF   (a call awaiting_sign_in carries on with the new sign-in's credential)
  starter tools   --role R [--format openai|anthropic|mcp]
  starter explain --workflow-id ID [--format text|json]   (one call's whole story, from the audit log and its history)
  starter explain --store 112 | --resource KIND=ID --day YYYY-MM-DD [--tool NAME]   (every call that ran upstream for a resource that day, and their stories)
  starter export-evals --since YYYY-MM-DD|RFC3339|24h [--format jsonl]   (one line per model-facing decision; docs/evals.schema.json)
  starter register [--format markdown|json]   (the action register: each tool's checks, where they are enforced, the tests that prove them)
  starter keygen  [--id KEY_ID]
  starter search-attributes
  starter temporal-config [--prop address|namespace|tls|api-key]   (the Temporal connection toolgate's processes make, from TEMPORAL_* and profiles)
  starter dev-certs --dir DIR [--toml FILE --profile NAME --address A --namespace N]   (make cluster's mTLS certificates, and a client profile for them)
  starter migrate
  starter accept-mcp --pack FILE [--write]   (lists the MCP tools a pack file names, as their servers define them now, against its pins file; --write accepts them)
  starter hand-back --pack P --user U --by PERSON [--note TEXT]   (ends U's verification lockout, or forgets their wrong answers, at pack P: a person's decision, recorded)
  starter token   --user U [--acr pwd|mfa]   (dev mode: signs U in at the demo provider and prints an access token for the MCP server)
  starter credential --user U --role R --stores 112[,118] | --resources KIND=ID[,…] [--acr pwd|mfa]   (dev mode: prints an unguessable credential handle)

call prints the first outcome (the result, or the pending card) in one round trip; --wait then waits for the final one.

Environment: Temporal's client configuration (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS_*,
TEMPORAL_PROFILE, TEMPORAL_CONFIG_FILE), TOOLGATE_TASK_QUEUE, DATABASE_URL, AUDITOR_DATABASE_URL (explain and export-evals read the audit log
as toolgate_auditor, which can read nothing else; see README)`

var errUsage = errors.New(strings.TrimSpace(usage))

// devFile and devErr are what devenv.Load found: make dev's settings file,
// and why it was not read.
var (
	devFile string
	devErr  error
)

// notDev is a dev-only command's error outside dev mode: what it needs, and
// how to get it.
func notDev(cmd, why string) error {
	return fmt.Errorf("%s: %s, so it runs only in dev mode (TOOLGATE_DEV=1, which make dev sets): %s", cmd, why, devenv.Missing(devFile, devErr))
}

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "starter:", err)
		os.Exit(1)
	}
}

func run(args []string, out io.Writer) error {
	if len(args) == 0 {
		return errUsage
	}
	// Beside make dev, its settings: the same packs, database and provider.
	devFile, devErr = devenv.Load()
	if args[0] == "accept-mcp" {
		// Before the packs load: a pack whose MCP tools are not accepted
		// yet does not load.
		return acceptMCPCmd(args[1:], out)
	}
	cfg, err := config.FromEnv()
	if err != nil {
		return err
	}
	switch args[0] {
	case "call":
		return callCmd(cfg, args[1:], out)
	case "status":
		return statusCmd(cfg, args[1:], out)
	case "wait":
		return waitCmd(cfg, args[1:], out)
	case "approve", "reject":
		return decideCmd(cfg, args[0], args[1:], out)
	case "resume":
		return resumeCmd(cfg, args[1:], out)
	case "tools":
		fs := flag.NewFlagSet("tools", flag.ContinueOnError)
		role := fs.String("role", "", "role to list the offered tools for (store_manager, area_manager)")
		format := fs.String("format", "", "openai, anthropic or mcp (default: toolgate's own, with tier and idempotency)")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if *role == "" {
			return errors.New("tools: --role is required, e.g. --role store_manager")
		}
		defs, err := cfg.Policy.DefinitionsAs(policy.Role(*role), *format)
		if err != nil {
			return fmt.Errorf("tools: %w", err)
		}
		return printJSON(out, defs)
	case "register":
		return registerCmd(cfg, args[1:], out)
	case "temporal-config":
		return temporalConfigCmd(cfg, args[1:], out)
	case "dev-certs":
		return devCertsCmd(args[1:], out)
	case "explain":
		return explainCmd(cfg, args[1:], out)
	case "export-evals":
		return exportEvalsCmd(cfg, args[1:], out)
	case "search-attributes":
		// One per line as NAME=TYPE, for --search-attribute and operator search-attribute create.
		for _, sa := range workflows.SearchAttributes() {
			fmt.Fprintf(out, "%s=%s\n", sa.Name, sa.Type)
		}
		return nil
	case "keygen":
		fs := flag.NewFlagSet("keygen", flag.ContinueOnError)
		id := fs.String("id", "k1", "key ID, so keys can be rotated")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		pub, priv, err := ed25519.GenerateKey(nil)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "# worker: the public keys it trusts (comma-separate several while rotating)\nTOOLGATE_APPROVAL_KEYS=%s:%s\n", *id, base64.StdEncoding.EncodeToString(pub))
		fmt.Fprintf(out, "# approvals server (and starter approve/reject): the private key it signs with\nTOOLGATE_APPROVAL_SIGNING_KEY=%s:%s\n", *id, base64.StdEncoding.EncodeToString(priv))
		fmt.Fprintf(out, "# every Temporal client and worker: the payload encryption keys (comma-separate while rotating) and the one to write with\nTOOLGATE_CODEC_KEYS=%s\nTOOLGATE_CODEC_KEY_ID=%s\n", codec.NewKey(*id), *id)
		return nil
	case "token":
		return tokenCmd(cfg, args[1:], out)
	case "credential":
		return credentialCmd(cfg, args[1:], out)
	case "hand-back":
		return handBackCmd(cfg, args[1:], out)
	case "migrate":
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := migrations.Apply(ctx, cfg.DatabaseURL); err != nil {
			return err
		}
		fmt.Fprintln(out, "migrations applied")
		return nil
	}
	return fmt.Errorf("unknown command %q\n%s", args[0], usage)
}

// credentialCmd issues a credential for a demo user under an unguessable
// handle, bound to the role, stores and sign-in strength given (dev mode
// only: it reuses the demo upstream secret of the user's seeded row). In a
// deployment the agent backend's sign-in issues credentials.
func tokenCmd(cfg config.Config, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	user := fs.String("user", "", "the demo user to sign in (ama, efua, kofi, yaw, adwoa; cara and sam for the card desk)")
	acr := fs.String("acr", policy.ACRPassword, "how strongly to sign in (pwd, or mfa with the user's TOTP code)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if !cfg.DevMode {
		return notDev("token", "it signs in with a demo user's password from the users file (a real MCP client signs in through the browser)")
	}
	if !slices.Contains(policy.ACRLevels, *acr) {
		return fmt.Errorf("token: --acr must be one of %v", policy.ACRLevels)
	}
	file := firstSet(os.Getenv("IDP_USERS_FILE"), ".dev/idp-users.json")
	b, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("token: the demo users (%s): %w; make dev writes it", file, err)
	}
	var users []idp.User
	if err := json.Unmarshal(b, &users); err != nil {
		return fmt.Errorf("token: %s: %w", file, err)
	}
	i := slices.IndexFunc(users, func(u idp.User) bool { return u.ID == *user })
	if i < 0 {
		return fmt.Errorf("token: %q is not a user in %s", *user, file)
	}
	issuer := firstSet(os.Getenv("MCP_OIDC_ISSUER"), os.Getenv("APPROVALS_OIDC_ISSUER"), os.Getenv("IDP_ISSUER"), "http://127.0.0.1:8082")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tok, err := idp.SignIn(ctx, issuer, firstSet(os.Getenv("IDP_MCP_CLIENT_ID"), "toolgate-mcp"), users[i], *acr)
	if err != nil {
		return fmt.Errorf("token: %w", err)
	}
	fmt.Fprintln(out, tok.AccessToken)
	return nil
}

func firstSet(v ...string) string {
	for _, s := range v {
		if strings.TrimSpace(s) != "" {
			return s
		}
	}
	return ""
}

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

func credentialCmd(cfg config.Config, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("credential", flag.ContinueOnError)
	user := fs.String("user", "", "the demo user (ama, efua, kofi, yaw)")
	role := fs.String("role", "", "the role the credential holds")
	stores := fs.String("stores", "", "the stores it holds, comma-separated")
	resources := fs.String("resources", "", "other resources it holds, as kind=id pairs, comma-separated")
	acr := fs.String("acr", policy.ACRPassword, "the strength of the sign-in it stands for (pwd or mfa)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if !cfg.DevMode {
		return notDev("credential", "it issues demo credentials (a deployment's sign-in issues its own)")
	}
	held, err := parseResources(*stores, *resources)
	if err != nil {
		return err
	}
	if *user == "" || *role == "" || !slices.Contains(policy.ACRLevels, *acr) {
		return fmt.Errorf("credential: --user and --role are required, and --acr is one of %v", policy.ACRLevels)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := pgx.Connect(ctx, cfg.DatabaseURL)
	if err != nil {
		return fmt.Errorf("credential: %w", err)
	}
	defer db.Close(ctx)
	ref := "cr_" + strings.ToLower(rand.Text())
	tag, err := db.Exec(ctx, `INSERT INTO vault.credentials (ref, user_id, client_secret, secret_pack, issuer, subject, role, resources, acr, auth_time)
		SELECT $1, user_id, client_secret, secret_pack, $2, user_id, $3, $4::jsonb, $5, now() FROM vault.credentials WHERE user_id = $6 AND demo AND NOT revoked LIMIT 1`,
		ref, OperatorIssuer, *role, held, *acr, *user)
	if err != nil {
		return fmt.Errorf("credential: %w", err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("credential: %q is not a demo user with a seeded credential", *user)
	}
	fmt.Fprintln(out, ref)
	return nil
}

func callCmd(cfg config.Config, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("call", flag.ContinueOnError)
	input := fs.String("input", "", "the whole ToolCall input as JSON")
	tool := fs.String("tool", "", "tool name")
	callID := fs.String("call-id", "", "the model's tool-call ID")
	argsJSON := fs.String("args", "{}", "tool args as a JSON object")
	user := fs.String("user", "", "signed-in user ID")
	role := fs.String("role", "", "the session's role")
	stores := fs.String("stores", "", "the session's stores, comma-separated")
	resources := fs.String("resources", "", "the session's other resources, as kind=id pairs, comma-separated")
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
		for _, d := range cfg.Policy.Domains() {
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
func callFlags(fs *flag.FlagSet) (conv, callID *string) {
	return fs.String("conversation", "", "conversation ID"), fs.String("call-id", "", "tool-call ID")
}

func callID(conv, id string) (string, error) {
	if conv == "" || id == "" {
		return "", errors.New("--conversation and --call-id are required")
	}
	return workflows.WorkflowID(conv, id), nil
}

// openCall reads a command's call flags and dials Temporal.
func openCall(cfg config.Config, name string, args []string) (string, client.Client, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	conv, id := callFlags(fs)
	if err := fs.Parse(args); err != nil {
		return "", nil, err
	}
	wf, err := callID(*conv, *id)
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

// OperatorIssuer names the starter's operator as the issuer of the sign-in
// evidence its decisions carry.
const OperatorIssuer = "urn:toolgate:operator"

// decideCmd sends an approval decision as the approver the flags name. It
// stands in for the card UI; the approver's identity is theirs, not the requester's.
func decideCmd(cfg config.Config, decision string, args []string, out io.Writer) error {
	fs := flag.NewFlagSet(decision, flag.ContinueOnError)
	conv, id := callFlags(fs)
	user := fs.String("user", "", "approver's user ID")
	role := fs.String("role", "", "approver's role")
	stores := fs.String("stores", "", "approver's stores, comma-separated")
	resources := fs.String("resources", "", "approver's other resources, as kind=id pairs, comma-separated")
	reason := fs.String("reason", "", "optional note")
	hash := fs.String("hash", "", "the args hash shown on the card (read from the call when left out)")
	acr := fs.String("acr", policy.ACRPassword, "the sign-in strength the operator vouches for (pwd or mfa)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	wf, err := callID(*conv, *id)
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
	a := policy.Approval{Decision: decision, ArgsHash: *hash, Reason: *reason,
		Approver: policy.Identity{UserID: *user, Role: policy.Role(*role), Resources: held},
		Evidence: &policy.AuthEvidence{Issuer: OperatorIssuer, Subject: *user, ACR: *acr, AMR: []string{"operator"}, AuthTime: time.Now().UTC().Format(time.RFC3339)}}
	if err := workflows.Decide(context.Background(), c, wf, a, *cfg.SigningKey); err != nil {
		return err
	}
	fmt.Fprintf(out, "%s sent to %s; `starter wait` shows the outcome\n", decision, wf)
	return nil
}

func resumeCmd(cfg config.Config, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("resume", flag.ContinueOnError)
	conv, id := callFlags(fs)
	ref := fs.String("credential", "", "the credential handle of the person's new sign-in (starter credential mints one in dev mode)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	wf, err := callID(*conv, *id)
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

func printJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// registerCmd prints the action register, generated from the policy table,
// the tool registry and the guard-proof list.
func registerCmd(cfg config.Config, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("register", flag.ContinueOnError)
	format := fs.String("format", "markdown", "markdown or json")
	if err := fs.Parse(args); err != nil {
		return err
	}
	r, err := register.Default(cfg.Policy)
	if err != nil {
		return fmt.Errorf("register: %w", err)
	}
	switch *format {
	case "markdown":
		return register.Markdown(out, r)
	case "json":
		return printJSON(out, r)
	}
	return fmt.Errorf("register: --format %q: want markdown or json", *format)
}

// auditor opens the audit log as the auditor's login, which may read it and
// nothing else.
func auditor(ctx context.Context, cfg config.Config) (insights.Reader, func(), error) {
	pool, err := cfg.OpenPool(ctx, "auditor")
	if err != nil {
		return insights.Reader{}, nil, fmt.Errorf("the auditor's database login (AUDITOR_DATABASE_URL, default DATABASE_URL as toolgate_auditor): %w", err)
	}
	return insights.Reader{Pool: pool, Policy: cfg.Policy}, pool.Close, nil
}

// explainCmd prints one call's story, or every call that ran upstream for
// a store on a day with a verdict on what they mean.
func explainCmd(cfg config.Config, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("explain", flag.ContinueOnError)
	id := fs.String("workflow-id", "", "the call, toolcall-<conversationId>-<toolCallId>")
	store := fs.Int64("store", 0, "with --day: every call that ran upstream for this store (the demo pack's; --resource store=N)")
	resource := fs.String("resource", "", "with --day: every call that ran upstream for this resource, kind=id")
	day := fs.String("day", "", "with --store or --resource: the day, YYYY-MM-DD (UTC)")
	tool := fs.String("tool", "", "with --store or --resource: only this tool")
	format := fs.String("format", "text", "text or json")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *format != "text" && *format != "json" {
		return fmt.Errorf("explain: --format %q: want text or json", *format)
	}
	var res policy.ResourceRef
	if *store != 0 {
		res = policy.ResourceRef{Kind: "store", ID: strconv.FormatInt(*store, 10)}
	}
	if *resource != "" {
		kind, rid, ok := strings.Cut(*resource, "=")
		if !ok || *store != 0 {
			return fmt.Errorf("explain: --resource %q: want kind=id, e.g. portal=PRT-40122, and no --store beside it", *resource)
		}
		res = policy.ResourceRef{Kind: kind, ID: rid}
	}
	if (*id == "") == (res.Kind == "") {
		return errors.New("explain: give --workflow-id ID, or --store N --day YYYY-MM-DD [--tool NAME]")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, done, err := auditor(ctx, cfg)
	if err != nil {
		return err
	}
	defer done()
	c, err := dial(cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	ids := []string{*id}
	var verdict string
	if res.Kind != "" {
		d, err := time.Parse(time.DateOnly, *day)
		if err != nil {
			return fmt.Errorf("explain: --day %q: want YYYY-MM-DD", *day)
		}
		if *tool != "" {
			if _, ok := cfg.Policy.Spec(*tool); !ok {
				return fmt.Errorf("explain: --tool %q is not a tool; use one of %s", *tool, strings.Join(cfg.Policy.Names(), ", "))
			}
		}
		if ids, err = r.Executed(ctx, res, d, *tool); err != nil {
			return err
		}
		verdict = insights.Verdict(ids, *tool, res, d)
	}
	var stories []insights.Story
	for _, id := range ids {
		s, err := r.Explain(ctx, c, id)
		if err != nil {
			return fmt.Errorf("explain: %w", err)
		}
		stories = append(stories, s)
	}
	if *format == "json" {
		if *store != 0 {
			return printJSON(out, map[string]any{"verdict": verdict, "calls": stories})
		}
		return printJSON(out, stories[0])
	}
	if verdict != "" {
		fmt.Fprintf(out, "%s\n", verdict)
	}
	for _, s := range stories {
		if verdict != "" {
			fmt.Fprintln(out)
		}
		if err := s.Text(out); err != nil {
			return err
		}
	}
	return nil
}

// exportEvalsCmd writes the evals export: one JSON line per model-facing
// decision since a date, a time or a duration ago.
func exportEvalsCmd(cfg config.Config, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("export-evals", flag.ContinueOnError)
	since := fs.String("since", "", "YYYY-MM-DD, an RFC 3339 time, or a duration ago such as 24h")
	format := fs.String("format", "jsonl", "jsonl (one toolgate.evals/v1 object per line; docs/evals.schema.json)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *format != "jsonl" {
		return fmt.Errorf("export-evals: --format %q: only jsonl", *format)
	}
	from, err := parseSince(*since, time.Now())
	if err != nil {
		return fmt.Errorf("export-evals: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	r, done, err := auditor(ctx, cfg)
	if err != nil {
		return err
	}
	defer done()
	n, err := r.ExportEvals(ctx, from, out)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "export-evals: %d decisions since %s\n", n, from.UTC().Format(time.RFC3339))
	return nil
}

// parseSince reads --since: a date, an RFC 3339 time, or a duration ago.
func parseSince(v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, errors.New("--since is required: a date (2026-12-01), an RFC 3339 time, or a duration ago (24h)")
	}
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("--since %q: want a date (2026-12-01), an RFC 3339 time, or a positive duration ago (24h)", v)
}

// temporalConfigCmd prints the Temporal connection every toolgate process
// makes, as Temporal's client configuration resolves it (no secret: only
// whether TLS is on and an API key is set).
func temporalConfigCmd(cfg config.Config, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("temporal-config", flag.ContinueOnError)
	prop := fs.String("prop", "", "print one property: address, namespace, tls or api-key")
	if err := fs.Parse(args); err != nil {
		return err
	}
	onOff := func(b bool, on, off string) string {
		if b {
			return on
		}
		return off
	}
	props := []struct{ name, value string }{
		{"address", cfg.Temporal.HostPort}, {"namespace", cfg.Temporal.Namespace},
		{"tls", onOff(cfg.Temporal.ConnectionOptions.TLS != nil, "on", "off")},
		{"api-key", onOff(cfg.Temporal.Credentials != nil, "set", "unset")},
	}
	for _, p := range props {
		switch {
		case *prop == p.name:
			fmt.Fprintln(out, p.value)
			return nil
		case *prop == "":
			fmt.Fprintf(out, "%s=%s\n", p.name, p.value)
		}
	}
	if *prop != "" {
		return fmt.Errorf("temporal-config: --prop %q: want address, namespace, tls or api-key", *prop)
	}
	return nil
}

// devCertsCmd makes make cluster's mTLS certificates with Go's standard
// library, prints the TEMPORAL_TLS_* settings of a client that uses them,
// and with --toml writes them as a Temporal client profile.
func devCertsCmd(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("dev-certs", flag.ContinueOnError)
	dir := fs.String("dir", "", "where the certificates go (kept if still valid)")
	file := fs.String("toml", "", "also write a Temporal client configuration file here")
	profile := fs.String("profile", "default", "with --toml: the profile's name")
	address := fs.String("address", config.DefaultTemporalAddress, "with --toml: the frontend's address")
	namespace := fs.String("namespace", config.DefaultNamespace, "with --toml: the namespace")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" {
		return errors.New("dev-certs: --dir is required, e.g. --dir .dev/tls")
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		return fmt.Errorf("dev-certs: %w", err)
	}
	made, err := devcerts.Write(abs, time.Now())
	if err != nil {
		return fmt.Errorf("dev-certs: %w", err)
	}
	tls := &envconfig.ClientConfigTLS{ClientCertPath: filepath.Join(abs, devcerts.ClientCertFile), ClientKeyPath: filepath.Join(abs, devcerts.ClientKeyFile),
		ServerCACertPath: filepath.Join(abs, devcerts.CAFile), ServerName: devcerts.ServerName}
	if *file != "" {
		c := envconfig.ClientConfig{Profiles: map[string]*envconfig.ClientConfigProfile{*profile: {Address: *address, Namespace: *namespace, TLS: tls}}}
		b, err := c.ToTOML(envconfig.ClientConfigToTOMLOptions{})
		if err != nil {
			return fmt.Errorf("dev-certs: the profile: %w", err)
		}
		if err := os.WriteFile(*file, b, 0o600); err != nil {
			return fmt.Errorf("dev-certs: %w", err)
		}
	}
	fmt.Fprintf(out, "# %s in %s: a client configured by Temporal's own variables\n", map[bool]string{true: "new certificates", false: "certificates kept"}[made], abs)
	fmt.Fprintf(out, "TEMPORAL_TLS_CLIENT_CERT_PATH=%s\nTEMPORAL_TLS_CLIENT_KEY_PATH=%s\nTEMPORAL_TLS_SERVER_CA_CERT_PATH=%s\nTEMPORAL_TLS_SERVER_NAME=%s\n",
		tls.ClientCertPath, tls.ClientKeyPath, tls.ServerCACertPath, tls.ServerName)
	return nil
}

// acceptMCPCmd shows a pack file's MCP tools as their servers define them
// now, against what was accepted, and with --write accepts them: the pins
// file the pack's processes load. It exits non-zero when anything differs
// and nothing was written, so a check in CI fails on an unaccepted change.
func acceptMCPCmd(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("accept-mcp", flag.ContinueOnError)
	file := fs.String("pack", "", "the pack file whose MCP servers to read")
	write := fs.Bool("write", false, "accept what the servers offer now: write the pins file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *file == "" {
		return errors.New("accept-mcp: --pack is required, e.g. --pack examples/packs/reference.yaml")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	reviews, err := packs.Accept(ctx, *file, *write)
	if err != nil {
		return fmt.Errorf("accept-mcp: %w", err)
	}
	packs.Report(out, reviews)
	pending := 0
	for _, r := range reviews {
		if r.Status != packs.ReviewSame && r.Status != packs.ReviewLeftOut {
			pending++
		}
	}
	switch {
	case *write:
		fmt.Fprintf(out, "accepted: %s written\n", packs.PinsFile(*file))
	case pending > 0:
		return fmt.Errorf("accept-mcp: %d tools are not as accepted; read the above, then run again with --write to accept them", pending)
	}
	return nil
}
