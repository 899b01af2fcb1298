package approvals

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signoff"
	"github.com/toolgate/toolgate/workflows"
	"go.uber.org/zap"
	"golang.org/x/oauth2"
)

// eventSignedInForCall is a sign-in recorded for a waiting call, which
// the MCP server carries the call on with when its client retries.
const eventSignedInForCall = "signed_in_for_call"

// errNotWaiting is a call that does not wait for a sign-in (now, or ever).
var errNotWaiting = errors.New("the call does not wait for a sign-in")

// waitingCall reads a call that waits for its requester to sign in: its
// status and the person who asked (the issuer and subject its memo names).
// A call that names no requester, or waits for nothing, is errNotWaiting.
func (s *Server) waitingCall(ctx context.Context, id string) (workflows.Status, signoff.Person, error) {
	var asker signoff.Person
	desc, err := s.Temporal.DescribeWorkflow(ctx, id, "")
	if err != nil {
		return workflows.Status{}, asker, fmt.Errorf("describe %s: %w", id, err)
	}
	if desc.GetMemoValue(workflows.RequesterMemo, &asker) != nil || !asker.Known() {
		return workflows.Status{}, asker, errNotWaiting
	}
	if desc.RawResponse.GetWorkflowExecutionInfo().GetCloseTime() != nil {
		return workflows.Status{}, asker, errNotWaiting // ended: no worker replays it to say so
	}
	v, err := s.Temporal.QueryWorkflow(ctx, id, "", workflows.StatusQuery)
	if err != nil {
		return workflows.Status{}, asker, errNotWaiting
	}
	var st workflows.Status
	if err := v.Get(&st); err != nil || st.Status != workflows.StatusAwaitingSignIn || st.SignIn == nil {
		return st, asker, errNotWaiting
	}
	return st, asker, nil
}

// signInForCall is the page an MCP client sends a call's requester to
// when the call waits for them to sign in: it sends them to the provider
// for what the call needs (its requester tier and how recent), and the
// callback records the sign-in for the call (carryOn). Someone else signed
// in here is told the link is not theirs; a call that no longer waits
// says so.
func (s *Server) signInForCall(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	sess, signed := s.sessionOf(r)
	page := pageData{Title: "Sign in for your call"}
	if signed {
		page.User, page.CSRF = &sess.User, s.csrf(sess)
	}
	if !policy.ValidWorkflowID(id) {
		s.render(w, http.StatusNotFound, "notfound.html", page)
		return
	}
	st, asker, err := s.waitingCall(r.Context(), id)
	if signed && asker.Known() && asker != (signoff.Person{Issuer: sess.Evidence.Issuer, Subject: sess.Evidence.Subject}) {
		s.render(w, http.StatusForbidden, "notyours.html", page)
		return
	}
	if err != nil {
		page.Flash = "This call does not wait for a sign-in now: it has carried on, ended, or was never one that could. Go back to your agent."
		s.render(w, http.StatusOK, "callsignin.html", page)
		return
	}
	f := s.newFlow("/cards/" + id + workflows.SignInSuffix)
	f.Call = id
	var opts []oauth2.AuthCodeOption
	if st.SignIn.Tier != "" {
		need := &policy.Requirement{ACR: st.SignIn.Tier, MaxAgeSeconds: st.SignIn.MaxAgeSeconds}
		if need.MaxAgeSeconds <= 0 {
			need.MaxAgeSeconds = int64(policy.RequesterTierMaxAge.Seconds())
		}
		f.Need = need
		opts = append(opts, oauth2.SetAuthURLParam("acr_values", s.Auth.cfg.providerACR(need.ACR)),
			oauth2.SetAuthURLParam("max_age", strconv.FormatInt(int64(freshFor(need).Seconds()), 10)))
	}
	if signed {
		opts = append(opts, oauth2.SetAuthURLParam("login_hint", sess.User.UserID))
	}
	s.startFlow(w, r, f, opts...)
}

// carryOn finishes a sign-in started for a waiting call: the person must
// be the one who asked for it (the same issuer and subject, as MCP's URL
// elicitation requires; the callback has held the sign-in to what the
// call waits for). It records the sign-in for the call
// (record_call_sign_in, migration 036) and changes nothing else: the MCP
// server issues the credential and carries the call on when the client
// that started it retries with its sealed requestState, under the same
// person's token. The memo checked here is any Temporal client's to
// write, so it is the page's courtesy, never what binds the sign-in.
func (s *Server) carryOn(ctx context.Context, id string, c signInClaims) error {
	_, asker, err := s.waitingCall(ctx, id)
	if err != nil {
		return errors.New("the call no longer waits for a sign-in; nothing was changed")
	}
	if asker != (signoff.Person{Issuer: c.Evidence.Issuer, Subject: c.Evidence.Subject}) {
		return errors.New("you signed in as someone other than the person who asked for this call; only they can carry it on, and nothing was changed")
	}
	if _, err := s.Pool.Exec(ctx, `SELECT record_call_sign_in($1, $2, $3, $4, $5)`, id, c.Evidence.Issuer, c.Evidence.Subject, c.Evidence.ACR, c.AuthTime); err != nil {
		s.Logger.Warn("a sign-in by URL was not recorded", zap.String("workflowId", id), zap.Error(err))
		return errors.New("the sign-in could not be recorded for the call; try again in a moment")
	}
	return nil
}
