// Package activities holds everything toolgate does outside the workflow:
// admission against limits counted from the audit log, audit inserts, and
// the upstream call made as the signed-in person.
package activities

import (
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/toolgate/toolgate/exchange"
	"github.com/toolgate/toolgate/pack"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/sanitize"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"
)

// StepUp says what a tool needs of the requester's sign-in and what the
// credential holds.
type StepUp struct {
	RequiredTier string `json:"requiredTier"`
	HeldTier     string `json:"heldTier"`
	// MaxAgeSeconds, when set, is how old the sign-in may be to count as
	// the tier: the one held is older.
	MaxAgeSeconds int64 `json:"maxAgeSeconds,omitempty"`
}

// Activities holds the dependencies of toolgate's activities.
type Activities struct {
	// Policy is the deployment's packs: each tool's route and spec.
	Policy *policy.Policy
	// Previewers are the packs' dry runs, by tool.
	Previewers map[string]pack.Previewer
	// Shapers reshape the packs' answers for the model, by tool, before
	// the sanitizer.
	Shapers map[string]pack.Shaper
	// DevMode lets demo credentials (readable refs such as cred-ama) through.
	DevMode bool
	// Pool acts as the app role: INSERT and SELECT on audit_log, SELECT on the vault.
	Pool *pgxpool.Pool
	HTTP *http.Client
	// UpstreamURL is the HTTP executor's base URL for every pack that
	// Upstreams does not name; Upstreams gives a pack its own, by pack name
	// (TOOLGATE_UPSTREAMS).
	UpstreamURL string
	Upstreams   map[string]string
	// Exchange, for the packs Audiences names, trades the sign-in's grant
	// at the identity provider for a token to that pack's upstream alone
	// (RFC 8693); every other pack's upstream takes the person's seeded
	// secret for that pack at its own token endpoint.
	Exchange  *exchange.Client
	Audiences map[string]string
	Sanitizer sanitize.Sanitizer
	Logger    *zap.Logger
	// Temporal reads an earlier run's result when a later run of the same
	// call ID is refused; nil leaves that result out.
	Temporal client.Client
	// Webhook, when set, hears about cards (Notify).
	Webhook *Webhook
	// MCP runs the packs' MCP tools on their servers; nil when no pack
	// names one.
	MCP *MCPServers
}

// New returns the activities with their dependencies: the packs' policy, the worker's pool,
// the upstream's URL (an HTTP client with a 30 s bound), the sanitizer in
// force, the logger and a Temporal client (nil leaves an earlier run's
// result out when a later run of a call ID is refused).
func New(p *policy.Policy, pool *pgxpool.Pool, upstreamURL string, s sanitize.Sanitizer, log *zap.Logger, c client.Client) *Activities {
	return &Activities{Policy: p, Pool: pool, HTTP: &http.Client{Timeout: 30 * time.Second}, UpstreamURL: upstreamURL, Sanitizer: s, Logger: log, Temporal: c}
}

// Register registers every activity on the worker.
func Register(w worker.Registry, a *Activities) {
	w.RegisterActivityWithOptions(a.Admit, activity.RegisterOptions{Name: "Admit"})
	w.RegisterActivityWithOptions(a.Audit, activity.RegisterOptions{Name: "Audit"})
	w.RegisterActivityWithOptions(a.AuditAll, activity.RegisterOptions{Name: "AuditAll"})
	w.RegisterActivityWithOptions(a.CallTool, activity.RegisterOptions{Name: "CallTool"})
	w.RegisterActivityWithOptions(a.Preview, activity.RegisterOptions{Name: "Preview"})
	w.RegisterActivityWithOptions(a.Accepted, activity.RegisterOptions{Name: "Accepted"})
	w.RegisterActivityWithOptions(a.Project, activity.RegisterOptions{Name: "Project"})
	w.RegisterActivityWithOptions(a.Record, activity.RegisterOptions{Name: "Record"})
	w.RegisterActivityWithOptions(a.Revise, activity.RegisterOptions{Name: "Revise"})
	w.RegisterActivityWithOptions(a.Notify, activity.RegisterOptions{Name: "Notify"})
}

// sameUpstream says a loaded pack's calls go where the tool's do: packs
// without an upstream of their own share UpstreamURL, and so a secret.
func (a *Activities) sameUpstream(pack, tool string) bool {
	for _, d := range a.Policy.Packs() {
		if d.Name == pack {
			own, ok := a.Upstreams[pack]
			if !ok {
				own = a.UpstreamURL
			}
			return own == a.upstream(tool)
		}
	}
	return false
}

// upstream is the base URL the tool's pack's calls go to.
func (a *Activities) upstream(tool string) string {
	if d, ok := a.Policy.PackOf(tool); ok {
		if u, ok := a.Upstreams[d.Name]; ok {
			return u
		}
	}
	return a.UpstreamURL
}
