// Command starter is the command-line client of toolgate: it starts or
// attaches to a tool call and prints its outcome as JSON, prints the tool
// definitions a role may be offered, queries a call's status, and applies
// the database migrations. Its commands are grouped by what they are for:
// calls (calls.go), decisions (decisions.go), audit and insights
// (audit.go), operating (operate.go) and dev helpers (dev.go); this file
// dispatches them.
package main

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/toolgate/toolgate/codec"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/devenv"
	"github.com/toolgate/toolgate/migrations"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signoff"
	"github.com/toolgate/toolgate/workflows"
)

const usage = `usage:
  starter call    --tool NAME --call-id ID --args JSON --user U --role R --resources KIND=ID[,KIND=ID] --conversation C [--session S] [--credential REF] [--wait]
  starter call    --input '{"tool": ..., "toolCallId": ..., "args": {...}, "session": {...}}' [--wait]
  starter status  --conversation C --call-id ID | --workflow-id ID
  starter wait    --conversation C --call-id ID | --workflow-id ID
  starter pending --role R [--resources KIND=ID[,…]] [--format text|json]   (the cards an approver of role R over those resources may decide)
  starter approve --conversation C --call-id ID | --workflow-id ID --user U --role R --resources KIND=ID[,…] [--reason TEXT] [--hash H] [--acr pwd|mfa]
  starter reject  --conversation C --call-id ID | --workflow-id ID --user U --role R --resources KIND=ID[,…] [--reason TEXT] [--hash H] [--acr pwd|mfa]
  starter withdraw --conversation C --call-id ID | --workflow-id ID --user U [--reason TEXT]   (takes a pending card back for U, who asked for it: nothing runs)
  starter resume  --conversation C --call-id ID | --workflow-id ID --credential REF   (a call awaiting_sign_in carries on with the new sign-in's credential)
  starter tools   --role R [--format openai|anthropic|mcp]
  starter explain --workflow-id ID [--format text|json]   (one call's whole story, from the audit log and its history)
  starter explain --store 112 | --resource KIND=ID --day YYYY-MM-DD [--tool NAME]   (every call that ran upstream for a resource that day, and their stories)
  starter explain --workflow-id ID --archive DIR   (a call of a month dropped from the log, read from its archive)
  starter retention plan | archive --month YYYY-MM --dir DIR | drop --month YYYY-MM --dir DIR   (as toolgate_retention: months of the audit log kept, archived, dropped)
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
  starter credential --user U --role R --resources KIND=ID[,…] [--acr pwd|mfa]   (dev mode: prints an unguessable credential handle)

--resources names what a session or an approver holds, as kind=id pairs (e.g. --resources queue=Q-1,queue=Q-2);
--stores 112[,118] is Mangrove's alias for --resources store=112,store=118.

call prints the first outcome (the result, or the pending card) in one round trip; --wait then waits for the final one.

Environment: Temporal's client configuration (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS_*,
TEMPORAL_PROFILE, TEMPORAL_CONFIG_FILE), TOOLGATE_TASK_QUEUE, DATABASE_URL, AUDITOR_DATABASE_URL (explain and export-evals read the audit log
as toolgate_auditor, which can read nothing else; see docs/operating.md), RETENTION_DATABASE_URL (retention, as toolgate_retention)`

var errUsage = errors.New(strings.TrimSpace(usage))

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
	case "withdraw":
		return withdrawCmd(cfg, args[1:], out)
	case "pending":
		return pendingCmd(cfg, args[1:], out)
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
	case "retention":
		return retentionCmd(cfg, args[1:], out)
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
		withdrawOnly := fs.Bool("withdraw", false, "only the MCP server's withdrawal key pair (for a keys file written before it)")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		pub, priv, err := ed25519.GenerateKey(nil)
		if err != nil {
			return err
		}
		if !*withdrawOnly {
			fmt.Fprintf(out, "# worker: the public keys it trusts (comma-separate several while rotating)\nTOOLGATE_APPROVAL_KEYS=%s:%s\n", *id, base64.StdEncoding.EncodeToString(pub))
			fmt.Fprintf(out, "# approvals server (and starter approve/reject): the private key it signs with\nTOOLGATE_APPROVAL_SIGNING_KEY=%s:%s\n", *id, base64.StdEncoding.EncodeToString(priv))
		}
		wpub, wpriv, err := ed25519.GenerateKey(nil)
		if err != nil {
			return err
		}
		withdraw := *id + "-withdraw"
		fmt.Fprintf(out, "# worker: the public keys that sign a requester's withdrawal alone, never an approval (the MCP server's)\nTOOLGATE_WITHDRAW_KEYS=%s:%s\n", withdraw, base64.StdEncoding.EncodeToString(wpub))
		fmt.Fprintf(out, "# MCP server: the private key it signs withdrawals with\nTOOLGATE_WITHDRAW_SIGNING_KEY=%s:%s\n", withdraw, base64.StdEncoding.EncodeToString(wpriv))
		if *withdrawOnly {
			return nil
		}
		fmt.Fprintf(out, "# every Temporal client and worker: the payload encryption keys (comma-separate while rotating) and the one to write with\nTOOLGATE_CODEC_KEYS=%s\nTOOLGATE_CODEC_KEY_ID=%s\n", codec.NewKey(*id), *id)
		return nil
	case "token":
		return tokenCmd(cfg, args[1:], out)
	case "credential":
		return credentialCmd(cfg, args[1:], out)
	case "hand-back":
		return handBackCmd(cfg, args[1:], out)
	case "migrate":
		// It creates cluster-wide roles: never on a server nobody named.
		if os.Getenv("DATABASE_URL") == "" {
			return errors.New("migrate: DATABASE_URL is unset: name the database to migrate (make dev migrates its own private cluster; beside it, this command reads .dev/env)")
		}
		// As long as it takes: migration 028 rewrites the audit log (about
		// 17 s a million rows on two cores). Ctrl-C rolls back.
		ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer cancel()
		if err := migrations.Apply(ctx, cfg.DatabaseURL); err != nil {
			return err
		}
		fmt.Fprintln(out, "migrations applied")
		return nil
	}
	return fmt.Errorf("unknown command %q\n%s", args[0], usage)
}

// OperatorIssuer names the starter's operator as the issuer of the sign-in
// evidence its decisions carry.
const OperatorIssuer = signoff.OperatorIssuer

func printJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
