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

// confirmable says the answer to a call whose card out is up may ask its
// requester to decide it themselves by URL (asksByURL): this server can
// sign a withdrawal (a declined confirmation withdraws), and the person
// holds the role and the resource the card is routed to, on a card one
// person decides (the requester never counts among several).
func (s *Server) confirmable(req *mcp.CallToolRequest, id Identity, out workflows.Outcome) bool {
	return s.mayConfirm(req, id, out.ApproverRole, out.ApprovalsNeeded, out.Resource)
}

// mayConfirm is confirmable of a card routed to role over resource (nil
// for none) that needs approvals people.
func (s *Server) mayConfirm(req *mcp.CallToolRequest, id Identity, role policy.Role, approvals int, resource *policy.ResourceRef) bool {
	if s.Signer == nil || approvals > 1 || !s.asksByURL(req) {
		return false
	}
	return role == id.Role && (resource == nil || id.Resources.Holds(resource.Kind, resource.ID))
}

// askToConfirm answers a call whose card its requester may decide with an
// input-required result: a URL elicitation to the card's page in the card
// UI, where the person signs in and decides it as any approver does, and
// a sealed requestState the client echoes when it calls again.
func (s *Server) askToConfirm(tool string, req *mcp.CallToolRequest, id Identity, wf, runID, argsHash, card string) (*mcp.CallToolResult, error) {
	return s.ask(tool, req, requestState{Ask: confirmRequest, Issuer: id.Issuer, Subject: id.Subject, WorkflowID: wf, RunID: runID, ArgsHash: argsHash},
		workflows.ConfirmSuffix, sentences.Say(sentences.MCPConfirm, card))
}

// askToSignIn answers a call that waits for its requester to sign in with
// an input-required result: a URL elicitation to the card UI's sign-in
// page for the call, which signs them in with what the call needs and
// records the sign-in for the call when they are the person who asked,
// and a sealed requestState the client echoes when it calls again, which
// carries the call on with it (carryOn).
func (s *Server) askToSignIn(tool string, req *mcp.CallToolRequest, id Identity, wf, runID string, code policy.Code, until string) (*mcp.CallToolResult, error) {
	return s.ask(tool, req, requestState{Ask: signInRequest, Issuer: id.Issuer, Subject: id.Subject, WorkflowID: wf, RunID: runID},
		workflows.SignInSuffix, sentences.Say(sentences.MCPSignIn, workflows.SignInWhy(code), until))
}

// ask is an input-required result with one URL elicitation, st.Ask, to
// the card UI's page of the call under suffix, and st sealed for the
// request it answers.
func (s *Server) ask(tool string, req *mcp.CallToolRequest, st requestState, suffix, message string) (*mcp.CallToolResult, error) {
	digest, err := requestDigest(tool, req.Params.Arguments)
	if err != nil {
		return failure(err.Error()), nil
	}
	st.Digest = digest
	state, err := sealState(s.Codec, st, time.Now())
	if err != nil {
		return nil, err
	}
	link := s.CardsURL + "/cards/" + url.PathEscape(st.WorkflowID) + suffix
	return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{st.Ask: &mcp.ElicitParams{Mode: "url", URL: link, ElicitationID: st.WorkflowID,
		Message: message}}, RequestState: state}, nil
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
	if st.Ask == confirmRequest && answer != nil && answer.Action == "decline" {
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
	if answer == nil || answer.Action == "cancel" || st.Ask == signInRequest && answer.Action == "decline" {
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
				switch {
				case now.Status == workflows.StatusPendingApproval && (st.Ask == confirmRequest ||
					s.mayConfirm(req, id, now.ApproverRole, now.ApprovalsNeeded, now.CardResource)):
					return s.askToConfirm(tool, req, id, st.WorkflowID, st.RunID, now.ArgsHash, now.Card)
				case now.Status == workflows.StatusAwaitingSignIn && now.SignIn != nil:
					return s.askToSignIn(tool, req, id, st.WorkflowID, st.RunID, now.SignIn.Code, now.ExpiresAt)
				}
			}
		}
	}
	return status, nil
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
