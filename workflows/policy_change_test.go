package workflows_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/packs/mangrove"

	"github.com/toolgate/toolgate/policy"
)

// TestLoweringTheTransferLimitKeepsCallsInFlight: with the transfer hard
// limit cut below $384.00, every recorded call still replays to the same
// outcome (the verdict is in its history), while a new call is refused.
func TestLoweringTheTransferLimitKeepsCallsInFlight(t *testing.T) {
	lowered := testenv.Mangrove(t, func(d *policy.Pack) {
		for i := range d.Rows {
			if d.Rows[i].Tool == mangrove.ToolRequestStockTransfer {
				d.Rows[i].HardLimitCents = 20000
			}
		}
	})
	files, _ := filepath.Glob(filepath.Join(goldenDir, "transfer_*.json"))
	if len(files) < 5 {
		t.Fatalf("only %d transfer histories", len(files))
	}
	for _, f := range files {
		if err := replayFileWith(f, lowered); err != nil {
			t.Errorf("%s does not replay under the lowered limit: %v", f, err)
		}
	}
	f := newFixture(t)
	f.policy = lowered
	res := f.run(t, "lowered", "c1", "request_stock_transfer", fortyCases, ama(""), nil)
	if res.Code != policy.CodeOverLimit || !strings.Contains(res.Message, "$200.00") {
		t.Fatalf("a new 40-case call under a $200.00 limit: %s/%s %s", res.Status, res.Code, res.Message)
	}
}
