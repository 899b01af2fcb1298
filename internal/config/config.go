// Package config reads the environment variables of docs/contract.md, with the
// defaults of `make dev`.
package config

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/toolgate/toolgate/codec"
	"github.com/toolgate/toolgate/exchange"
	"github.com/toolgate/toolgate/internal/logging"
	"github.com/toolgate/toolgate/internal/packs"
	"github.com/toolgate/toolgate/internal/pg"
	"github.com/toolgate/toolgate/mcpupstream"
	"github.com/toolgate/toolgate/pack"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signoff"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	"go.uber.org/zap"
)

// Defaults of docs/contract.md.
const (
	DefaultTemporalAddress = "127.0.0.1:7233"
	DefaultDatabaseURL     = "postgres://postgres@127.0.0.1:5432/toolgate?sslmode=disable"
	DefaultUpstreamURL     = "http://127.0.0.1:8081"
	DefaultTaskQueue       = "toolgate"
	DefaultNamespace       = "default"
	// MinSecretLength is the shortest secret a process accepts.
	MinSecretLength = 32
)

// Vars lists every environment variable toolgate's processes read: the
// TEMPORAL_* ones through Temporal's client configuration library alone.
var Vars = []string{
	"TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE", "TEMPORAL_API_KEY", "TEMPORAL_TLS", "TEMPORAL_TLS_CLIENT_CERT_PATH", "TEMPORAL_TLS_CLIENT_KEY_PATH",
	"TEMPORAL_TLS_SERVER_CA_CERT_PATH", "TEMPORAL_TLS_SERVER_NAME", "TEMPORAL_PROFILE", "TEMPORAL_CONFIG_FILE", "TOOLGATE_TASK_QUEUE", "TOOLGATE_TASK_QUEUES", "DATABASE_URL", "UPSTREAM_URL", "UPSTREAM_ADDR",
	"UPSTREAM_TOKEN_KEY", "WORKER_DATABASE_URL", "APPROVALS_DATABASE_URL", "UPSTREAM_DATABASE_URL", "AUDITOR_DATABASE_URL", "METRICS_ADDR", "APPROVALS_ADDR", "APPROVALS_SESSION_KEY", "APPROVALS_SECURE_COOKIES",
	"TOOL_MAX_RESULT_CHARS", "TOOLGATE_APPROVAL_TTL", "TOOLGATE_APPROVAL_KEYS", "TOOLGATE_APPROVAL_SIGNING_KEY", "TOOLGATE_WITHDRAW_KEYS", "TOOLGATE_WITHDRAW_SIGNING_KEY",
	"TOOLGATE_CODEC_KEYS", "TOOLGATE_CODEC_KEY_ID", "CODEC_ADDR", "CODEC_CORS_ORIGINS", "LOG_LEVEL", "TOOLGATE_WORKFLOW_CACHE_SIZE", "TOOLGATE_DEV",
	"TOOLGATE_APPROVER_ISSUERS", "APPROVALS_OIDC_ISSUER", "APPROVALS_OIDC_CLIENT_ID", "APPROVALS_OIDC_CLIENT_SECRET", "APPROVALS_OIDC_REDIRECT_URL",
	"APPROVALS_OIDC_SCOPES", "APPROVALS_OIDC_USER_CLAIM", "APPROVALS_OIDC_NAME_CLAIM", "APPROVALS_OIDC_ROLE_CLAIM", "TOOLGATE_RESOURCE_CLAIMS",
	"APPROVALS_OIDC_ACR_VALUES", "IDP_ADDR", "IDP_ISSUER", "IDP_USERS_FILE", "IDP_CLIENT_ID", "IDP_CLIENT_SECRET", "IDP_REDIRECT_URIS",
	"IDP_BACKCHANNEL_LOGOUT_URI", "TOOLGATE_ESCALATE_AFTER", "TOOLGATE_SIGN_IN_TTL",
	"TOOLGATE_WEBHOOK_URL", "TOOLGATE_WEBHOOK_SECRET", "TOOLGATE_CARDS_URL",
	"MCP_ADDR", "MCP_RESOURCE", "MCP_AUDIENCE", "MCP_OIDC_ISSUER", "MCP_OIDC_CLIENT_ID", "MCP_OIDC_ACR_VALUES", "MCP_OIDC_USER_CLAIM", "MCP_OIDC_ROLE_CLAIM", "MCP_MAX_WAIT", "MCP_DATABASE_URL", "IDP_MCP_CLIENT_ID", "IDP_MCP_AUDIENCE",
	"IDP_MCP_BACKCHANNEL_LOGOUT_URI",
	"CODEC_AUTH_TOKEN", "TOOLGATE_TEMPORAL_WEB_URL", "TOOLGATE_PACKS", "TOOLGATE_UPSTREAMS",
	"TOOLGATE_EXCHANGE_ISSUER", "TOOLGATE_EXCHANGE_CLIENT_ID", "TOOLGATE_EXCHANGE_CLIENT_SECRET", "TOOLGATE_EXCHANGE_PACKS",
	"IDP_EXCHANGE_CLIENT_ID", "IDP_EXCHANGE_CLIENT_SECRET", "IDP_EXCHANGE_AUDIENCES",
}

// Config is the environment a process runs with.
type Config struct {
	// DevMode (TOOLGATE_DEV=1, set by make dev) allows the card UI's demo
	// sign-in (the upstream reads it itself for its demo key). Nothing else sets it.
	DevMode bool
	// Temporal are the client options Temporal's own client configuration
	// gives (go.temporal.io/sdk/contrib/envconfig): a TOML profile
	// (TEMPORAL_CONFIG_FILE, TEMPORAL_PROFILE) with TEMPORAL_ADDRESS,
	// TEMPORAL_NAMESPACE, TEMPORAL_API_KEY and TEMPORAL_TLS_* over it.
	// ClientOptions adds toolgate's own.
	Temporal client.Options
	// TemporalAddress and Namespace are Temporal's, for logs and links.
	TemporalAddress string
	Namespace       string
	// TaskQueue (TOOLGATE_TASK_QUEUE) is where calls run; TaskQueues
	// (TOOLGATE_TASK_QUEUES, pack=queue pairs) give packs task queues of
	// their own (QueueFor, Queues).
	TaskQueue   string
	TaskQueues  map[string]string
	DatabaseURL string
	UpstreamURL string
	// Upstreams (TOOLGATE_UPSTREAMS, pack=url pairs) give a pack its own
	// upstream; the others use UpstreamURL.
	Upstreams      map[string]string
	MaxResultChars int
	ApprovalTTL    time.Duration
	// Webhook (TOOLGATE_WEBHOOK_URL, TOOLGATE_WEBHOOK_SECRET, TOOLGATE_CARDS_URL)
	// hears about cards; nil when no URL is set.
	Webhook *Webhook
	// SignInTTL (TOOLGATE_SIGN_IN_TTL) is how long a call waits for the
	// person to sign in.
	SignInTTL     time.Duration
	MetricsAddr   string
	ApprovalsAddr string
	// ApprovalKeys (TOOLGATE_APPROVAL_KEYS) verify signed decisions in the worker.
	ApprovalKeys signoff.ApprovalKeys
	// WithdrawKeys (TOOLGATE_WITHDRAW_KEYS) verify a requester's withdrawal
	// alone, never another decision: the MCP server's key, so a server that
	// is taken over can take calls back but never approve one, but for the
	// requester's own card on a row that allows a confirmation in the
	// client (signoff.ConfirmedInClient).
	WithdrawKeys signoff.ApprovalKeys
	// WithdrawSigningKey (TOOLGATE_WITHDRAW_SIGNING_KEY) signs withdrawals in
	// the MCP server.
	WithdrawSigningKey *signoff.Signer
	// EscalateAfter (TOOLGATE_ESCALATE_AFTER) is the fraction of the TTL
	// after which an unanswered card is also offered one role up.
	EscalateAfter float64
	// ApproverIssuers (TOOLGATE_APPROVER_ISSUERS, else APPROVALS_OIDC_ISSUER)
	// are the identity providers whose sign-ins a decision may carry.
	ApproverIssuers []string
	// SigningKey (TOOLGATE_APPROVAL_SIGNING_KEY) signs decisions in the approvals server and starter.
	SigningKey *signoff.Signer
	// Codec (TOOLGATE_CODEC_KEYS, TOOLGATE_CODEC_KEY_ID) encrypts payloads; nil means plaintext.
	Codec *codec.Codec
	// CodecAddr serves the codec endpoint for Temporal Web and the CLI.
	CodecAddr string
	// CodecOrigins may call the codec endpoint from a browser (Temporal Web).
	CodecOrigins []string
	// CodecAuthToken (CODEC_AUTH_TOKEN) is the bearer token every encode and
	// decode must carry; required outside dev mode.
	CodecAuthToken string
	// TemporalWebURL (TOOLGATE_TEMPORAL_WEB_URL; make dev: its Web UI) is
	// Temporal Web's base URL, for the card UI's links to a call's history.
	TemporalWebURL string
	// WorkflowCacheSize caps the calls a worker keeps in memory between
	// tasks; an evicted call is replayed from its history when it wakes.
	WorkflowCacheSize int
	// Policy is the tools and tables of the packs TOOLGATE_PACKS names
	// (internal/packs; mangrove when unset), checked whole at start;
	// Previewers are their dry runs and Shapers reshape their answers, by
	// tool.
	Policy     *policy.Policy
	Previewers map[string]pack.Previewer
	Shapers    map[string]pack.Shaper
	// MCPServers are the packs' own MCP servers, by name (packs.Set).
	MCPServers map[string]mcpupstream.Server
	// Claims (TOOLGATE_RESOURCE_CLAIMS, kind=claim pairs over the packs'
	// own) are the sign-in claims the card UI and the MCP server read each
	// kind of resource from.
	Claims policy.ClaimMap
	// Exchange (TOOLGATE_EXCHANGE_ISSUER, TOOLGATE_EXCHANGE_CLIENT_ID,
	// TOOLGATE_EXCHANGE_CLIENT_SECRET) is toolgate's client at the identity
	// provider for token exchange (RFC 8693): the MCP server trades a
	// sign-in's access token for a grant, the worker a grant for a token to
	// one pack's upstream; nil when no secret is set.
	Exchange *exchange.Client
	// Audiences (TOOLGATE_EXCHANGE_PACKS) are the packs whose upstreams take
	// the provider's tokens, each with its audience, its upstream's URL.
	Audiences map[string]string
}

// ClientOptions are the Temporal client options every process uses:
// Temporal's client configuration (address, namespace, TLS, API key,
// headers), then toolgate's payload codec.
func (c Config) ClientOptions() client.Options {
	o := c.Temporal
	if c.Codec != nil {
		o.DataConverter = c.Codec.DataConverter()
	}
	return o
}

// DialError says which Temporal a process failed to reach and where that
// came from, so the fix is clear.
func (c Config) DialError(err error) error {
	tls := "without TLS"
	if c.Temporal.ConnectionOptions.TLS != nil {
		tls = "over TLS"
	}
	return fmt.Errorf("connect to Temporal at %s, namespace %s, %s (Temporal's client configuration: TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_TLS_*, TEMPORAL_API_KEY, or TEMPORAL_PROFILE in TEMPORAL_CONFIG_FILE): %w",
		c.TemporalAddress, c.Namespace, tls, err)
}

// TemporalClient loads Temporal's client configuration the way its CLI and
// SDKs do (go.temporal.io/sdk/contrib/envconfig): the profile TEMPORAL_PROFILE
// (else "default") of the TOML file TEMPORAL_CONFIG_FILE (else the user's
// temporal.toml, when there is one), then the TEMPORAL_* variables over
// it. With neither, the address is 127.0.0.1:7233 and the namespace default.
func TemporalClient() (client.Options, error) {
	o, err := envconfig.LoadClientOptions(envconfig.LoadClientOptionsRequest{})
	if err != nil {
		return o, fmt.Errorf("the Temporal client configuration (TEMPORAL_CONFIG_FILE, TEMPORAL_PROFILE, TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS_*): %w", err)
	}
	if o.HostPort == "" {
		o.HostPort = DefaultTemporalAddress
	}
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	return o, nil
}

// SessionKey is the card UI's cookie key: APPROVALS_SESSION_KEY when set (at
// least MinSecretLength long), else nil (a random key per start).
func SessionKey() ([]byte, error) {
	v := os.Getenv("APPROVALS_SESSION_KEY")
	if v == "" {
		return nil, nil
	}
	if len(v) < MinSecretLength {
		return nil, fmt.Errorf("APPROVALS_SESSION_KEY is %d characters: use a random secret of at least %d (openssl rand -base64 32)", len(v), MinSecretLength)
	}
	return []byte(v), nil
}

// ServiceDatabaseURL is the connection a service logs in with:
// <SERVICE>_DATABASE_URL (WORKER_, APPROVALS_, UPSTREAM_), or DATABASE_URL
// with its user replaced by the service's own role (migration 007).
func (c Config) ServiceDatabaseURL(service string) (string, error) {
	name := strings.ToUpper(service) + "_DATABASE_URL"
	if v := os.Getenv(name); v != "" {
		return v, nil
	}
	role := pg.RoleOf(service)
	if role == "" {
		return "", fmt.Errorf("no database role for service %q", service)
	}
	u, err := pg.ServiceURL(c.DatabaseURL, role)
	if err != nil {
		return "", fmt.Errorf("%s unset and %w", name, err)
	}
	return u, nil
}

// FromEnv reads the environment. A malformed value is an error naming the variable.
func FromEnv() (Config, error) {
	c := Config{
		TaskQueue:         env("TOOLGATE_TASK_QUEUE", DefaultTaskQueue),
		DatabaseURL:       env("DATABASE_URL", DefaultDatabaseURL),
		UpstreamURL:       env("UPSTREAM_URL", DefaultUpstreamURL),
		MetricsAddr:       env("METRICS_ADDR", "127.0.0.1:9090"),
		CodecAddr:         env("CODEC_ADDR", "127.0.0.1:8089"),
		CodecOrigins:      strings.Split(env("CODEC_CORS_ORIGINS", "http://127.0.0.1:8233,http://localhost:8233"), ","),
		CodecAuthToken:    os.Getenv("CODEC_AUTH_TOKEN"),
		ApprovalsAddr:     env("APPROVALS_ADDR", "127.0.0.1:8080"),
		TemporalWebURL:    os.Getenv("TOOLGATE_TEMPORAL_WEB_URL"),
		DevMode:           os.Getenv("TOOLGATE_DEV") == "1",
		MaxResultChars:    4000,
		WorkflowCacheSize: 1000,
		ApprovalTTL:       30 * time.Minute,
		SignInTTL:         10 * time.Minute,
	}
	set, err := packs.Load(env("TOOLGATE_PACKS", packs.Default))
	if err != nil {
		return c, err
	}
	c.Policy, c.Previewers, c.Shapers, c.MCPServers = set.Policy, set.Previewers, set.Shapers, set.Servers
	if c.Claims, err = c.Policy.ClaimMap(os.Getenv("TOOLGATE_RESOURCE_CLAIMS")); err != nil {
		return c, fmt.Errorf("TOOLGATE_RESOURCE_CLAIMS: %w", err)
	}
	if c.Upstreams, err = ParseUpstreams(os.Getenv("TOOLGATE_UPSTREAMS"), c.Policy); err != nil {
		return c, err
	}
	if c.TaskQueues, err = ParseTaskQueues(os.Getenv("TOOLGATE_TASK_QUEUES"), c.Policy); err != nil {
		return c, err
	}
	if c.Exchange, c.Audiences, err = ParseExchange(os.Getenv, c.Upstreams, c.Policy); err != nil {
		return c, err
	}
	t, err := TemporalClient()
	if err != nil {
		return c, err
	}
	c.Temporal, c.TemporalAddress, c.Namespace = t, t.HostPort, t.Namespace
	if v := os.Getenv("TOOL_MAX_RESULT_CHARS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 200 {
			return c, fmt.Errorf("TOOL_MAX_RESULT_CHARS=%q: want a whole number of characters, at least 200", v)
		}
		c.MaxResultChars = n
	}
	keys, err := signoff.ParseApprovalKeys(env("TOOLGATE_APPROVAL_KEYS", devEnv("TOOLGATE_APPROVAL_KEYS")))
	if err != nil {
		return c, fmt.Errorf("TOOLGATE_APPROVAL_KEYS: %w", err)
	}
	c.ApprovalKeys = keys
	if c.WithdrawKeys, err = signoff.ParseApprovalKeys(env("TOOLGATE_WITHDRAW_KEYS", devEnv("TOOLGATE_WITHDRAW_KEYS"))); err != nil {
		return c, fmt.Errorf("TOOLGATE_WITHDRAW_KEYS: %w", err)
	}
	for id := range c.WithdrawKeys {
		if _, both := c.ApprovalKeys[id]; both {
			return c, fmt.Errorf("TOOLGATE_WITHDRAW_KEYS: key ID %q is also one of TOOLGATE_APPROVAL_KEYS; a withdrawal key must have an ID of its own (starter keygen writes one)", id)
		}
	}
	for _, iss := range strings.Split(env("TOOLGATE_APPROVER_ISSUERS", os.Getenv("APPROVALS_OIDC_ISSUER")), ",") {
		if iss = strings.TrimSpace(iss); iss != "" {
			c.ApproverIssuers = append(c.ApproverIssuers, iss)
		}
	}
	if v := env("TOOLGATE_APPROVAL_SIGNING_KEY", devEnv("TOOLGATE_APPROVAL_SIGNING_KEY")); v != "" {
		id, key, err := signoff.ParseSigningKey(v)
		if err != nil {
			return c, fmt.Errorf("TOOLGATE_APPROVAL_SIGNING_KEY: %w", err)
		}
		c.SigningKey = &signoff.Signer{KeyID: id, Key: key}
	}
	if v := env("TOOLGATE_WITHDRAW_SIGNING_KEY", devEnv("TOOLGATE_WITHDRAW_SIGNING_KEY")); v != "" {
		id, key, err := signoff.ParseSigningKey(v)
		if err != nil {
			return c, fmt.Errorf("TOOLGATE_WITHDRAW_SIGNING_KEY: %w", err)
		}
		c.WithdrawSigningKey = &signoff.Signer{KeyID: id, Key: key}
	}
	if v := env("TOOLGATE_CODEC_KEYS", devEnv("TOOLGATE_CODEC_KEYS")); v != "" {
		cd, err := codec.Parse(v, env("TOOLGATE_CODEC_KEY_ID", devEnv("TOOLGATE_CODEC_KEY_ID")))
		if err != nil {
			return c, fmt.Errorf("TOOLGATE_CODEC_KEYS: %w", err)
		}
		c.Codec = cd
	}
	if v := os.Getenv("TOOLGATE_WORKFLOW_CACHE_SIZE"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return c, fmt.Errorf("TOOLGATE_WORKFLOW_CACHE_SIZE=%q: want a whole number of calls (0 keeps none)", v)
		}
		c.WorkflowCacheSize = n
	}
	if v := os.Getenv("TOOLGATE_ESCALATE_AFTER"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 {
			return c, fmt.Errorf("TOOLGATE_ESCALATE_AFTER=%q: want the fraction of the approval TTL after which a card escalates, such as 0.5 (1 never escalates)", v)
		}
		c.EscalateAfter = f
	}
	if v := os.Getenv("TOOLGATE_APPROVAL_TTL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return c, fmt.Errorf("TOOLGATE_APPROVAL_TTL=%q: want a positive Go duration such as 30m or 5s", v)
		}
		c.ApprovalTTL = d
	}
	if v := os.Getenv("TOOLGATE_WEBHOOK_URL"); v != "" {
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return c, fmt.Errorf("TOOLGATE_WEBHOOK_URL=%q: want an http or https URL", v)
		}
		secret := os.Getenv("TOOLGATE_WEBHOOK_SECRET")
		if len(secret) < MinSecretLength {
			return c, fmt.Errorf("TOOLGATE_WEBHOOK_SECRET is %d characters: a webhook needs a random secret of at least %d (openssl rand -base64 32), shared with its receiver", len(secret), MinSecretLength)
		}
		c.Webhook = &Webhook{URL: v, Secret: []byte(secret), CardsURL: os.Getenv("TOOLGATE_CARDS_URL")}
	}
	if v := os.Getenv("TOOLGATE_SIGN_IN_TTL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return c, fmt.Errorf("TOOLGATE_SIGN_IN_TTL=%q: want a positive Go duration such as 10m or 5s", v)
		}
		c.SignInTTL = d
	}
	return c, nil
}

// Webhook is where the worker tells about cards, and the secret it signs with.
type Webhook struct {
	URL      string
	Secret   []byte
	CardsURL string
}

// CodecEndpointProblem says why the worker must not serve its codec endpoint
// as configured, or "": the endpoint decrypts every payload, so outside dev
// mode it needs a bearer token of at least MinSecretLength.
func (c Config) CodecEndpointProblem() string {
	switch {
	case c.Codec == nil:
		return ""
	case c.CodecAuthToken == "" && !c.DevMode:
		return fmt.Sprintf("CODEC_AUTH_TOKEN is not set: the codec endpoint (%s) decrypts every payload, so outside dev mode it needs a random bearer token of at least %d characters (openssl rand -base64 32); clients send it as Authorization: Bearer <token> (temporal --codec-auth)", c.CodecAddr, MinSecretLength)
	case c.CodecAuthToken != "" && len(c.CodecAuthToken) < MinSecretLength:
		return fmt.Sprintf("CODEC_AUTH_TOKEN is %d characters: use a random token of at least %d (openssl rand -base64 32)", len(c.CodecAuthToken), MinSecretLength)
	}
	return ""
}

// DevKeysFile is where `make dev` keeps its approval key pair. Processes
// in dev mode started from the repo read it when the variables are unset.
const DevKeysFile = ".dev/keys.env"

// devEnv reads NAME=value from DevKeysFile, or "". Outside dev mode it is
// always "": a file in the working directory is no deployment's keys, and
// whoever wrote it would hold the key that signs approvals.
func devEnv(name string) string {
	if os.Getenv("TOOLGATE_DEV") != "1" {
		return ""
	}
	b, err := os.ReadFile(DevKeysFile)
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+"="); ok {
			return v
		}
	}
	return ""
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// Main runs a toolgate process: its logger, its environment read and
// checked, then its body; a failure is logged and exits 1.
func Main(process string, run func(*zap.Logger, Config) error) {
	logging.Main(process, func(log *zap.Logger) error {
		cfg, err := FromEnv()
		if err != nil {
			return err
		}
		return run(log, cfg)
	})
}

// OpenPool opens a service's pool with its own role (ServiceDatabaseURL),
// refusing a superuser or the audit log's owner.
func (c Config) OpenPool(ctx context.Context, service string) (*pgxpool.Pool, error) {
	url, err := c.ServiceDatabaseURL(service)
	if err != nil {
		return nil, err
	}
	return pg.OpenService(ctx, url, service)
}

// ParseExchange reads toolgate's token exchange client and the packs that
// use it (TOOLGATE_EXCHANGE_*): a pack named there is loaded and has its own
// upstream (TOOLGATE_UPSTREAMS), whose URL is the audience of its tokens.
func ParseExchange(getenv func(string) string, upstreams map[string]string, p *policy.Policy) (*exchange.Client, map[string]string, error) {
	issuer, secret := strings.TrimSpace(getenv("TOOLGATE_EXCHANGE_ISSUER")), getenv("TOOLGATE_EXCHANGE_CLIENT_SECRET")
	id := strings.TrimSpace(getenv("TOOLGATE_EXCHANGE_CLIENT_ID"))
	if id == "" {
		id = "toolgate"
	}
	audiences := map[string]string{}
	for _, name := range strings.Split(getenv("TOOLGATE_EXCHANGE_PACKS"), ",") {
		if name = strings.TrimSpace(name); name == "" {
			continue
		}
		known := false
		for _, d := range p.Packs() {
			known = known || d.Name == name
		}
		u, own := upstreams[name]
		switch {
		case !known:
			return nil, nil, fmt.Errorf("TOOLGATE_EXCHANGE_PACKS: %q is not a loaded pack", name)
		case !own:
			return nil, nil, fmt.Errorf("TOOLGATE_EXCHANGE_PACKS: %s has no upstream of its own: name it in TOOLGATE_UPSTREAMS (%s=https://...), the audience of its tokens", name, name)
		}
		audiences[name] = u
	}
	switch {
	case secret == "" && len(audiences) > 0:
		return nil, nil, errors.New("TOOLGATE_EXCHANGE_PACKS needs TOOLGATE_EXCHANGE_ISSUER and TOOLGATE_EXCHANGE_CLIENT_SECRET: toolgate's client at the identity provider")
	case secret == "":
		return nil, nil, nil
	case len(secret) < MinSecretLength:
		return nil, nil, fmt.Errorf("TOOLGATE_EXCHANGE_CLIENT_SECRET must be at least %d characters", MinSecretLength)
	}
	if u, err := url.Parse(issuer); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, nil, fmt.Errorf("TOOLGATE_EXCHANGE_ISSUER %q must be the identity provider's URL, its issuer", issuer)
	} else if u.Scheme != "https" && getenv("TOOLGATE_DEV") != "1" {
		return nil, nil, fmt.Errorf("TOOLGATE_EXCHANGE_ISSUER %q must be https: people's tokens and toolgate's client secret go to it (plain http only in dev mode)", issuer)
	}
	return &exchange.Client{Issuer: issuer, ClientID: id, ClientSecret: secret}, audiences, nil
}

// ParseUpstreams reads TOOLGATE_UPSTREAMS: pack=url pairs separated by
// commas, each pack one the policy loads and each URL http or https with a
// host and no query, e.g. "carddesk=http://127.0.0.1:8095".
func ParseUpstreams(s string, p *policy.Policy) (map[string]string, error) {
	return packPairs("TOOLGATE_UPSTREAMS", "url", s, p, func(name, raw string) (string, error) {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			return "", fmt.Errorf("%s's upstream %q is not an http(s) URL with a host and no query", name, raw)
		}
		return strings.TrimRight(raw, "/"), nil
	})
}

// taskQueueName is a task queue name toolgate takes: what Temporal takes,
// without the spaces and slashes an operator would have to quote.
var taskQueueName = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,200}$`)

// ParseTaskQueues reads TOOLGATE_TASK_QUEUES: pack=queue pairs,
// comma-separated, each a loaded pack named once. A pack's calls then run
// on its own task queue, so a worker serving it alone (TOOLGATE_PACKS)
// can be deployed, scaled and stopped apart from the others.
func ParseTaskQueues(s string, p *policy.Policy) (map[string]string, error) {
	return packPairs("TOOLGATE_TASK_QUEUES", "queue", s, p, func(name, queue string) (string, error) {
		if !taskQueueName.MatchString(queue) {
			return "", fmt.Errorf("%s's task queue %q must be 1 to 200 letters, digits or . _ : -", name, queue)
		}
		return queue, nil
	})
}

// packPairs reads variable's pack=<what> pairs, comma-separated: each pack
// one the policy loads, named once, its value as value accepts it.
func packPairs(variable, what, s string, p *policy.Policy, value func(pack, v string) (string, error)) (map[string]string, error) {
	out := map[string]string{}
	for _, pair := range strings.Split(s, ",") {
		if pair = strings.TrimSpace(pair); pair == "" {
			continue
		}
		name, raw, ok := strings.Cut(pair, "=")
		if !ok {
			return nil, fmt.Errorf("%s: %q is not pack=%s", variable, pair, what)
		}
		names := packNames(p)
		if known := slices.Contains(names, name); !known {
			return nil, fmt.Errorf("%s: %q is not a loaded pack (%s)", variable, name, strings.Join(names, ", "))
		}
		v, err := value(name, raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", variable, err)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%s: %s is named twice", variable, name)
		}
		out[name] = v
	}
	return out, nil
}

func packNames(p *policy.Policy) []string {
	var names []string
	for _, d := range p.Packs() {
		names = append(names, d.Name)
	}
	return names
}

// QueueFor is the task queue a tool's calls run on: its pack's own
// (TaskQueues), else TaskQueue.
func (c Config) QueueFor(tool string) string {
	if d, ok := c.Policy.PackOf(tool); ok {
		if q, ok := c.TaskQueues[d.Name]; ok {
			return q
		}
	}
	return c.TaskQueue
}

// Queues are the task queues the loaded packs' calls run on, each once:
// a worker polls every one of them.
func (c Config) Queues() []string {
	var out []string
	for _, d := range c.Policy.Packs() {
		q, ok := c.TaskQueues[d.Name]
		if !ok {
			q = c.TaskQueue
		}
		if !slices.Contains(out, q) {
			out = append(out, q)
		}
	}
	return out
}
