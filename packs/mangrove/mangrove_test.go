package mangrove_test

import (
	"testing"

	"github.com/toolgate/toolgate/pack/packtest"
	"github.com/toolgate/toolgate/packs/mangrove"
)

// TestEveryRowAtEveryStep: the pack test kit over Mangrove's table.
func TestEveryRowAtEveryStep(t *testing.T) { packtest.Chain(t, mangrove.Policy()) }
