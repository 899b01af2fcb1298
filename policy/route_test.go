package policy_test

import (
	"strings"
	"testing"

	"github.com/toolgate/toolgate/packs/mangrove"
	"github.com/toolgate/toolgate/policy"
)

// TestAnIdempotentWriteNeedsAnUpstreamThatDedupes: a pack in Go is held to
// what a pack file is: a POST is retried only on the pack's word that its
// upstream runs one Idempotency-Key once, which needs the key sent.
func TestAnIdempotentWriteNeedsAnUpstreamThatDedupes(t *testing.T) {
	build := func(edit func(*policy.Route)) error {
		d := mangrove.Policy()
		for i := range d.Tools {
			if d.Tools[i].Route.Method == "POST" {
				d.Tools[i].Idempotent = true
				edit(&d.Tools[i].Route)
			}
		}
		_, err := policy.New(d)
		return err
	}
	if err := build(func(*policy.Route) {}); err == nil || !strings.Contains(err.Error(), "is idempotent, but a POST is sent again after a timeout or a 5xx") {
		t.Errorf("an idempotent POST, its upstream's deduplication unsaid: %v", err)
	}
	if err := build(func(r *policy.Route) { r.Dedupes = true }); err != nil {
		t.Errorf("an idempotent POST to an upstream that dedupes: %v", err)
	}
	if err := build(func(r *policy.Route) { r.Dedupes, r.Keyed = true, false }); err == nil || !strings.Contains(err.Error(), "but sends none (Route.Keyed)") {
		t.Errorf("dedupes without a key: %v", err)
	}
}
