package workflows

import (
	"encoding/json"
	"time"

	"github.com/toolgate/toolgate/activities"
	"github.com/toolgate/toolgate/policy"
	"go.temporal.io/sdk/workflow"
)

// upstream is who a call acts as upstream, and its reads there before a
// card: the dry run and the check of a pinned tool's definition.
type upstream struct {
	ctx   workflow.Context
	in    ToolCallInput
	shape shape
	// signedIn is the credential a sign-in sent since the call started.
	signedIn string
}

// credential is the credential the call acts with: the session's, or the
// one a sign-in sent since.
func (u *upstream) credential() string {
	if u.signedIn != "" {
		return u.signedIn
	}
	return u.in.Session.CredentialRef
}

// acting is who the call acts as upstream, on args, under verdict v: the
// same for a dry run, a check before a card and the call itself.
func (u *upstream) acting(v policy.Verdict, args json.RawMessage) activities.Acting {
	s := u.in.Session
	return activities.Acting{Tool: u.in.Tool, Args: args, Resource: v.Resource, UserID: s.UserID, CredentialRef: u.credential(),
		Role: s.Role, Resources: s.Resources, RequiredTier: v.RequesterTier, RequiredMaxAgeSeconds: v.RequesterMaxAgeSeconds,
		AskedAt: u.askedAt(), Verified: v.Verified, ConversationID: s.ConversationID}
}

// askedAt is when the call was asked (its run started), RFC 3339: a
// requester tier's maximum age is measured back from it.
func (u *upstream) askedAt() string {
	return workflow.GetInfo(u.ctx).WorkflowStartTime.UTC().Format(time.RFC3339)
}

// dryRun runs the tool's dry run as the requester, under verdict v, and
// returns its error instead of ending the call.
func (u *upstream) dryRun(v policy.Verdict, summary string) (activities.PreviewResult, error) {
	var pv activities.PreviewResult
	err := u.shape.read(u.ctx, readOptions(summary), acts.Preview, activities.PreviewInput{Acting: u.acting(v, v.Args)}).Get(u.ctx, &pv)
	return pv, err
}

// accepted checks that the tool's MCP server still defines it as a person
// accepted it, in the workflow task.
func (u *upstream) accepted(v policy.Verdict) error {
	opts := readOptions("check that " + u.in.Tool + " is still defined as accepted")
	in := activities.PreviewInput{Acting: u.acting(v, v.Args)}
	return workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(u.ctx, localRead(opts)), acts.Accepted, in).Get(u.ctx, nil)
}
