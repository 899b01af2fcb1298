package workflows

import (
	"errors"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/activities"
	"github.com/toolgate/toolgate/policy"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
)

// TestUpstreamFailureCodes: a timeout or an outage is retryable if and only
// if the tool is idempotent; every code is in the closed set.
func TestUpstreamFailureCodes(t *testing.T) {
	cases := []struct {
		err  error
		code policy.Code
		auth bool
	}{
		{temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_START_TO_CLOSE, nil), policy.CodeTimeout, false},
		{temporal.NewApplicationError("down", activities.ErrUnavailable), policy.CodeUpstreamUnavailable, false},
		{temporal.NewNonRetryableApplicationError("no", activities.ErrUpstream, nil), policy.CodeUpstreamError, false},
		{temporal.NewNonRetryableApplicationError("revoked", activities.ErrCredential, nil), policy.CodeCredentialUnavailable, true},
		{errors.New("surprise"), policy.CodeUpstreamError, false},
	}
	for _, idempotent := range []bool{true, false} {
		for _, c := range cases {
			code, msg, retryable, auth := upstreamFailure(c.err, idempotent, "the library system")
			if code != c.code || auth != c.auth || msg == "" || !code.Valid() || strings.Contains(msg, "store") {
				t.Errorf("%v (idempotent=%v): got %s auth=%v %q", c.err, idempotent, code, auth, msg)
			}
			if named := strings.Contains(msg, "The library system"); named != (code != policy.CodeCredentialUnavailable && c.err.Error() != "surprise") {
				t.Errorf("%v: the message %q names the pack's system %v", c.err, msg, named)
			}
			transient := code == policy.CodeTimeout || code == policy.CodeUpstreamUnavailable
			if retryable != (transient && idempotent) {
				t.Errorf("%v (idempotent=%v): retryable=%v", c.err, idempotent, retryable)
			}
		}
	}
}

// TestACardKeepsTheCodesItWentUpWith: a card put up before resource_scope
// audits its refusals store_scope to its end; a card of today says
// resource_scope; no other code changes.
func TestACardKeepsTheCodesItWentUpWith(t *testing.T) {
	for j := judging(0); j <= judgingNow; j++ {
		want := policy.CodeResourceScope
		if j < judgeResourceScope {
			want = policy.CodeStoreScope
		}
		if got := refusalCode(j, policy.CodeResourceScope); got != want || got.Canonical() != policy.CodeResourceScope {
			t.Errorf("judging %d: a resource refusal is audited %s, want %s", j, got, want)
		}
		for _, c := range policy.Codes {
			if c != policy.CodeResourceScope && refusalCode(j, c) != c {
				t.Errorf("judging %d: %s is audited %s", j, c, refusalCode(j, c))
			}
		}
	}
}
