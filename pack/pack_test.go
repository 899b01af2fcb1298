package pack_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/pack"
	"github.com/toolgate/toolgate/packs/mangrove"
)

// TestCheckRefusesDryRunsThatDoNotMatch: a DryRun tool without its
// previewer, and a previewer for a tool that has no dry run, stop the
// start with the pack and the tool named.
func TestCheckRefusesDryRunsThatDoNotMatch(t *testing.T) {
	if err := mangrove.Pack().Check(); err != nil {
		t.Fatalf("the shipped pack: %v", err)
	}
	missing := mangrove.Pack()
	missing.Previewers = nil
	if err := missing.Check(); err == nil || !strings.Contains(err.Error(), `pack mangrove: tool "request_stock_transfer" has DryRun set but no previewer`) {
		t.Errorf("a dry-run tool without a previewer: %v", err)
	}
	stray := mangrove.Pack()
	stray.Previewers[mangrove.ToolGetStock] = func(context.Context, pack.PreviewRequest, pack.System) (pack.Preview, error) {
		return pack.Preview{}, nil
	}
	if err := stray.Check(); err == nil || !strings.Contains(err.Error(), `a previewer is given for "get_stock", which is not one of its DryRun tools`) {
		t.Errorf("a previewer for a tool without a dry run: %v", err)
	}
}

// TestCheckRefusesAShaperForNoTool: a shaper is for one of the pack's own
// tools; one for a tool it does not have, or a nil one, stops the start.
func TestCheckRefusesAShaperForNoTool(t *testing.T) {
	keep := func(_ json.RawMessage, answer []byte) ([]byte, error) { return answer, nil }
	ok := mangrove.Pack()
	ok.Shapers = map[string]pack.Shaper{mangrove.ToolGetDeliveries: keep}
	if err := ok.Check(); err != nil {
		t.Fatalf("a shaper for one of its tools: %v", err)
	}
	for name, s := range map[string]pack.Shaper{"get_card": keep, mangrove.ToolGetStock: nil} {
		p := mangrove.Pack()
		p.Shapers = map[string]pack.Shaper{name: s}
		if err := p.Check(); err == nil || !strings.Contains(err.Error(), `a shaper is given for "`+name+`", which is not one of its tools`) {
			t.Errorf("a shaper for %s: %v", name, err)
		}
	}
}
