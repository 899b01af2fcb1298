package mangrove_test

import (
	"testing"

	"github.com/toolgate/toolgate/domains/mangrove"
	"github.com/toolgate/toolgate/pack/packtest"
)

// TestEveryRowAtEveryStep: the pack test kit over Mangrove's table.
func TestEveryRowAtEveryStep(t *testing.T) { packtest.Chain(t, mangrove.Domain()) }
