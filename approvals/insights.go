package approvals

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/toolgate/toolgate/insights"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/register"
	"go.uber.org/zap"
)

// RoleAuditor reads the insights page and call stories; it decides no card
// and sees no inbox. Its reads go through the auditor's database login,
// which may SELECT the audit log and nothing else.
const RoleAuditor policy.Role = "auditor"

// insightsData is what the insights, story and register pages show.
type insightsData struct {
	pageData
	Page     insights.Page
	Tools    []string
	Kinds    []policy.ResourceKind
	Story    *insights.Story
	Text     string
	Register *register.Register
	Fast     string
	// History links the call to Temporal Web, in its namespace ("" without a Web URL).
	History string
}

// auditorOnly answers 403 to anyone but an auditor, and reports whether
// the request may go on.
func (s *Server) auditorOnly(w http.ResponseWriter, sess session) bool {
	if sess.User.Role != RoleAuditor {
		s.render(w, http.StatusForbidden, "forbidden.html", pageData{Title: "Not for your role", User: &sess.User, CSRF: s.csrf(sess)})
		return false
	}
	if s.Auditor.Pool == nil {
		http.Error(w, "Insights are not set up here: the card UI has no auditor database login (AUDITOR_DATABASE_URL).", http.StatusServiceUnavailable)
		return false
	}
	return true
}

// insightsPage shows the charts, filtered by the query string.
func (s *Server) insightsPage(w http.ResponseWriter, r *http.Request, sess session) {
	if !s.auditorOnly(w, sess) {
		return
	}
	d := insightsData{pageData: pageData{Title: "Insights", User: &sess.User, CSRF: s.csrf(sess)}, Tools: s.Auditor.Policy.Names(), Kinds: s.Auditor.Policy.ResourceKinds(), Fast: insights.FastDecision.String()}
	f, err := s.Auditor.ParseFilter(r.URL.Query(), s.now(), sess.User.Resources)
	d.Page.Filter = f
	if err != nil {
		d.Error = err.Error()
		s.render(w, http.StatusBadRequest, "insights.html", d)
		return
	}
	if d.Page, err = s.Auditor.Page(r.Context(), f); err != nil {
		s.fail(w, err)
		return
	}
	s.render(w, http.StatusOK, "insights.html", d)
}

// storyPage tells one call's whole story, as starter explain does.
func (s *Server) storyPage(w http.ResponseWriter, r *http.Request, sess session) {
	if !s.auditorOnly(w, sess) {
		return
	}
	st, err := s.Auditor.Explain(r.Context(), s.Temporal, r.PathValue("id"))
	if errors.Is(err, insights.ErrNoSuchCall) {
		s.render(w, http.StatusNotFound, "notfound.html", pageData{Title: "Not found", User: &sess.User, CSRF: s.csrf(sess)})
		return
	}
	if err != nil {
		s.fail(w, err)
		return
	}
	if res := st.Events[0].Resource; res != nil && !sess.User.Resources.Holds(res.Kind, res.ID) {
		s.render(w, http.StatusNotFound, "notfound.html", pageData{Title: "Not found", User: &sess.User, CSRF: s.csrf(sess)})
		return
	}
	var text strings.Builder
	if err := st.Text(&text); err != nil {
		s.Logger.Warn("story", zap.Error(err))
	}
	d := insightsData{pageData: pageData{Title: "Story of " + st.WorkflowID, User: &sess.User, CSRF: s.csrf(sess)}, Story: &st, Text: text.String()}
	if s.TemporalWeb != "" {
		d.History = strings.TrimRight(s.TemporalWeb, "/") + "/namespaces/" + url.PathEscape(s.Namespace) + "/workflows/" + url.PathEscape(st.WorkflowID)
	}
	s.render(w, http.StatusOK, "story.html", d)
}

// registerPage shows the action register to anyone signed in: the rules
// every card and call is held to.
func (s *Server) registerPage(w http.ResponseWriter, _ *http.Request, sess session) {
	reg, err := register.Default(s.Auditor.Policy)
	if err != nil {
		s.fail(w, err)
		return
	}
	s.render(w, http.StatusOK, "register.html", insightsData{pageData: pageData{Title: "Action register", User: &sess.User, CSRF: s.csrf(sess)}, Register: &reg})
}
