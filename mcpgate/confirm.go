package mcpgate

import (
	"context"
	"errors"
	"net/url"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/sentences"
	"github.com/toolgate/toolgate/signoff"
	"github.com/toolgate/toolgate/workflows"
	"go.uber.org/zap"
)

// confirmRequest is the ID of the one input request a card the requester
// may decide asks for: its URL elicitation.
const confirmRequest = "confirm"

// confirmWait is how long a retry that says the person confirmed waits for
// the call to end before it asks again.
const confirmWait = 10 * time.Second

// signInRequest is the ID of the one input request a call that waits for
// its requester to sign in asks for: its URL elicitation.
const signInRequest = "sign_in"

// asksByURL says the answer to a call may ask its requester for something
// by URL (an input-required result, SEP-2322): this server can seal and
// spend a requestState and knows the card UI's address, and the client
// speaks 2026-07-28 and declares URL elicitation.
func (s *Server) asksByURL(req *mcp.CallToolRequest) bool {
	if s.Codec == nil || s.CardsURL == "" || s.SpendState == nil || req.Extra == nil || req.Extra.Header.Get("Mcp-Protocol-Version") < FirstSessionlessRevision {
		return false
	}
	caps := req.ClientCapabilities()
	return caps != nil && caps.Elicitation != nil && caps.Elicitation.URL != nil
}

// confirmInClientRequest is the ID of the one input request a card whose
// row allows a decision in the requester's own client asks for: a form of
// the card's text and approve or reject.
const confirmInClientRequest = "confirm_in_client"

// asksInForm says the answer to a call may ask its requester to decide in
// a form: this server can seal and spend a requestState and sign a
// decision, and the client speaks 2026-07-28 and declares form elicitation
// (an elicitation capability that names no mode means form).
func (s *Server) asksInForm(req *mcp.CallToolRequest) bool {
	if s.Codec == nil || s.SpendState == nil || s.Signer == nil || req.Extra == nil || req.Extra.Header.Get("Mcp-Protocol-Version") < FirstSessionlessRevision {
		return false
	}
	caps := req.ClientCapabilities()
	return caps != nil && caps.Elicitation != nil && (caps.Elicitation.Form != nil || caps.Elicitation.URL == nil)
}

// pendingCard is what the answer to a call whose card is up needs to ask
// its requester to decide it: who may decide it, and what it shows.
type pendingCard struct {
	wf, runID, argsHash, card string
	role                      policy.Role
	approvals                 int
	resource                  *policy.ResourceRef
	// inClient is the sign-in a decision in the client needs; nil where
	// the card's row allows none.
	inClient *policy.Requirement
}

// outcomeCard is the card of a first outcome.
func outcomeCard(out workflows.Outcome) pendingCard {
	return pendingCard{wf: out.IdempotencyKey, runID: out.RunID, argsHash: out.ArgsHash, card: out.Card, role: out.ApproverRole,
		approvals: out.ApprovalsNeeded, resource: out.Resource, inClient: out.ConfirmInClient}
}

// statusCard is the card a status query shows for run runID of wf.
func statusCard(wf, runID string, st workflows.Status) pendingCard {
	return pendingCard{wf: wf, runID: runID, argsHash: st.ArgsHash, card: st.Card, role: st.ApproverRole,
		approvals: st.ApprovalsNeeded, resource: st.CardResource, inClient: st.ConfirmInClient}
}

// confirmMode is how the answer may ask the requester to decide their own
// card c: by URL at the card UI (confirmRequest, the stronger evidence,
// whenever the client takes one), in a form in the client
// (confirmInClientRequest) where the row allows it and the sign-in behind
// the token meets the card's evidence now, or not at all (""). Either way
// the server can sign (a declined confirmation withdraws), and the person
// holds the role and the resource the card is routed to, on a card one
// person decides (the requester never counts among several).
func (s *Server) confirmMode(req *mcp.CallToolRequest, id Identity, c pendingCard) string {
	if s.Signer == nil || c.approvals > 1 || c.role != id.Role || c.resource != nil && !id.Resources.Holds(c.resource.Kind, c.resource.ID) {
		return ""
	}
	switch {
	case s.asksByURL(req):
		return confirmRequest
	case c.inClient != nil && s.asksInForm(req) && signedInFor(id, *c.inClient, time.Now()):
		return confirmInClientRequest
	}
	return ""
}

// signedInFor says the sign-in behind id's token meets requirement r at
// now: its level or stronger, and no older than r allows.
func signedInFor(id Identity, r policy.Requirement, now time.Time) bool {
	return policy.Satisfies(id.ACR, r.ACR) && !id.AuthTime.IsZero() && now.Sub(id.AuthTime) <= r.MaxAge()
}

// askToConfirm answers a call whose card c its requester may decide in
// mode (confirmMode) with an input-required result, and a sealed
// requestState the client echoes when it calls again. By URL: the card's
// page in the card UI, where the person signs in and decides it as any
// approver does. In a form: the card's text and a decision, approve or
// reject, which this server signs as theirs (confirmInClient).
func (s *Server) askToConfirm(tool string, req *mcp.CallToolRequest, id Identity, mode string, c pendingCard) (*mcp.CallToolResult, error) {
	st := requestState{Ask: mode, Issuer: id.Issuer, Subject: id.Subject, WorkflowID: c.wf, RunID: c.runID, ArgsHash: c.argsHash}
	if mode == confirmInClientRequest {
		return s.ask(tool, req, st, &mcp.ElicitParams{Mode: "form", Message: sentences.Say(sentences.MCPConfirmInClient, c.card), RequestedSchema: decisionForm})
	}
	return s.ask(tool, req, st, s.byURL(c.wf, workflows.ConfirmSuffix, sentences.Say(sentences.MCPConfirm, c.card)))
}

// decisionForm is the form a decision in the client fills in: one field,
// approve or reject.
var decisionForm = map[string]any{
	"type": "object",
	"properties": map[string]any{
		decisionField: map[string]any{"type": "string", "title": "Decision", "enum": []string{signoff.Approve, signoff.Reject}},
	},
	"required": []string{decisionField},
}

// decisionField is the form's one field.
const decisionField = "decision"

// askToSignIn answers a call that waits for its requester to sign in with
// an input-required result: a URL elicitation to the card UI's sign-in
// page for the call, which signs them in with what the call needs and
// records the sign-in for the call when they are the person who asked,
// and a sealed requestState the client echoes when it calls again, which
// carries the call on with it (carryOn).
func (s *Server) askToSignIn(tool string, req *mcp.CallToolRequest, id Identity, wf, runID string, code policy.Code, until string) (*mcp.CallToolResult, error) {
	return s.ask(tool, req, requestState{Ask: signInRequest, Issuer: id.Issuer, Subject: id.Subject, WorkflowID: wf, RunID: runID},
		s.byURL(wf, workflows.SignInSuffix, sentences.Say(sentences.MCPSignIn, workflows.SignInWhy(code), until)))
}

// byURL is a URL elicitation of the card UI's page of call wf under
// suffix.
func (s *Server) byURL(wf, suffix, message string) *mcp.ElicitParams {
	return &mcp.ElicitParams{Mode: "url", URL: s.CardsURL + "/cards/" + url.PathEscape(wf) + suffix, ElicitationID: wf, Message: message}
}

// ask is an input-required result with one elicitation, st.Ask, and st
// sealed for the request it answers.
func (s *Server) ask(tool string, req *mcp.CallToolRequest, st requestState, params *mcp.ElicitParams) (*mcp.CallToolResult, error) {
	digest, err := requestDigest(tool, req.Params.Arguments)
	if err != nil {
		return failure(err.Error()), nil
	}
	st.Digest = digest
	state, err := sealState(s.Codec, st, time.Now())
	if err != nil {
		return nil, err
	}
	return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{st.Ask: params}, RequestState: state}, nil
}

// spend spends st's single use, across every MCP server: ErrStateReplayed
// when it was spent before.
func (s *Server) spend(ctx context.Context, st requestState) error {
	spent, err := s.SpendState(ctx, st.ID, time.Unix(st.Expires, 0))
	if err != nil {
		return err
	}
	if !spent {
		return ErrStateReplayed
	}
	return nil
}

// resume carries a call on from an echoed requestState: it is held to its
// seal, its person, the request and its time, and spent once; a refused
// one is a JSON-RPC error naming why, before anything is read of the call.
// Then the person's answer: declined, the card is withdrawn in their name;
// otherwise the call's outcome once it has ended, or, still waiting, the
// same question again with a new requestState.
func (s *Server) resume(ctx context.Context, tool string, req *mcp.CallToolRequest, id Identity) (*mcp.CallToolResult, error) {
	if s.Codec == nil || s.SpendState == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: ErrStateAltered.Error()}
	}
	digest, err := requestDigest(tool, req.Params.Arguments)
	if err != nil {
		return failure(err.Error()), nil
	}
	st, err := openState(s.Codec, req.Params.RequestState, id, digest, time.Now())
	if err == nil {
		err = s.spend(ctx, st)
	}
	var refused *StateRefusal
	if err != nil && !errors.As(err, &refused) {
		return nil, err
	}
	if err != nil {
		s.Logger.Warn("requestState refused", zap.String("tool", tool), zap.String("user", id.UserID), zap.String("workflowId", st.WorkflowID), zap.Error(err))
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
	}
	if st.Ask == "" {
		st.Ask = confirmRequest // sealed before sign-in by URL
	}
	answer, _ := req.Params.InputResponses[st.Ask].(*mcp.ElicitResult)
	unsent := false
	if st.Ask == confirmInClientRequest && answer != nil && answer.Action == "accept" {
		unsent = !s.confirmInClient(ctx, id, st, answer)
	}
	if st.Ask != signInRequest && answer != nil && answer.Action == "decline" {
		// The card the person was shown: one an edit has replaced since is
		// not withdrawn unseen, and they are asked about it instead.
		if err := s.sendWithdrawal(ctx, id, st.WorkflowID, "", st.ArgsHash); err != nil {
			s.Logger.Info("withdrawal on decline not sent", zap.String("workflowId", st.WorkflowID), zap.Error(err))
		}
	}
	if st.Ask == signInRequest && answer != nil && answer.Action == "accept" {
		s.carryOn(ctx, id, st)
	}
	wait := confirmWait
	if answer == nil || answer.Action == "cancel" || st.Ask == signInRequest && answer.Action == "decline" || unsent {
		wait = 0 // dismissed: where the call stands now
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var res workflows.ToolCallResult
	if err := s.Temporal.GetWorkflow(wctx, st.WorkflowID, st.RunID).Get(wctx, &res); err == nil {
		return result(res), nil
	}
	status := s.outcome(ctx, id, st.WorkflowID)
	if wait > 0 {
		if v, err := s.Temporal.QueryWorkflow(ctx, st.WorkflowID, st.RunID, workflows.StatusQuery); err == nil {
			var now workflows.Status
			if v.Get(&now) == nil {
				c := statusCard(st.WorkflowID, st.RunID, now)
				switch mode := s.confirmMode(req, id, c); {
				case now.Status == workflows.StatusPendingApproval && mode != "":
					return s.askToConfirm(tool, req, id, mode, c)
				case now.Status == workflows.StatusAwaitingSignIn && now.SignIn != nil:
					return s.askToSignIn(tool, req, id, st.WorkflowID, st.RunID, now.SignIn.Code, now.ExpiresAt)
				}
			}
		}
	}
	return status, nil
}

// confirmInClient sends the decision the requester made in the form
// (answer), approve or reject, as theirs: signed by this server, with the
// sign-in behind their bearer token as its evidence, marked
// ConfirmedInClient, for the card st was sealed for (a card an edit has
// replaced since is not decided unseen). The workflow judges it as any
// decision, and counts it only where the card's row allows it. Nothing
// is sent for a card that is no longer up in the run st names, or whose
// row takes no confirmation in the client, or whose evidence the token's
// sign-in no longer meets: the retry then asks as it can now, never the
// same form again, so a refusal never counts towards the card's lock. It
// reports whether the decision was sent.
func (s *Server) confirmInClient(ctx context.Context, id Identity, st requestState, answer *mcp.ElicitResult) bool {
	decision, _ := answer.Content[decisionField].(string)
	if decision != signoff.Approve && decision != signoff.Reject {
		s.Logger.Info("a confirmation in the client named no decision", zap.String("workflowId", st.WorkflowID), zap.String("user", id.UserID))
		return false
	}
	var now workflows.Status
	if v, err := s.Temporal.QueryWorkflow(ctx, st.WorkflowID, st.RunID, workflows.StatusQuery); err != nil || v.Get(&now) != nil ||
		now.Status != workflows.StatusPendingApproval || now.RunID != st.RunID || now.ConfirmInClient == nil || !signedInFor(id, *now.ConfirmInClient, time.Now()) {
		s.Logger.Info("a confirmation in the client not sent: the card, or the sign-in, no longer allows one", zap.String("workflowId", st.WorkflowID),
			zap.String("user", id.UserID), zap.Error(err))
		return false
	}
	a := signoff.Approval{Decision: decision, ArgsHash: st.ArgsHash, Approver: policy.Identity{UserID: id.UserID, Role: id.Role, Resources: id.Resources},
		Evidence: &signoff.AuthEvidence{Issuer: id.Issuer, Subject: id.Subject, ACR: id.ACR, AuthTime: id.AuthTime.UTC().Format(time.RFC3339),
			Via: signoff.ConfirmedInClient}}
	if err := workflows.SendDecision(ctx, s.Temporal, st.WorkflowID, a, *s.Signer); err != nil {
		s.Logger.Info("a confirmation in the client not sent", zap.String("workflowId", st.WorkflowID), zap.Error(err))
		return false
	}
	return true
}

// carryOn carries a call that waits for its requester's sign-in on with
// the sign-in the card UI recorded for it: by this person (the bearer
// token's issuer and subject, which the requestState st was sealed to),
// for this call (st's workflow), taken once. Its credential is this
// token's, at the recorded sign-in's acr and time (the vault refuses a
// revoked one), and the call's credential signal carries it. Nothing
// recorded, or anything refused, leaves the call waiting, and the retry
// asks again.
func (s *Server) carryOn(ctx context.Context, id Identity, st requestState) {
	if s.TakeSignIn == nil {
		return
	}
	acr, at, ok, err := s.TakeSignIn(ctx, st.WorkflowID, id.Issuer, id.Subject)
	if err != nil || !ok {
		s.Logger.Info("no sign-in recorded for the call", zap.String("workflowId", st.WorkflowID), zap.String("user", id.UserID), zap.Error(err))
		return
	}
	signed := id
	signed.ACR, signed.AuthTime = acr, at
	ref, err := s.credential(ctx, signed)
	if err != nil {
		return // credential logged why
	}
	if err := workflows.Resume(ctx, s.Temporal, st.WorkflowID, ref); err != nil {
		s.Logger.Info("a sign-in by URL did not resume its call", zap.String("workflowId", st.WorkflowID), zap.Error(err))
	}
}
