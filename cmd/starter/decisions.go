// starter's commands for decisions: approve or reject a card as a person, and hand a locked-out caller back.

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/workflows"
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
