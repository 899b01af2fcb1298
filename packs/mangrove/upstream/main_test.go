package upstream_test

import (
	"testing"

	"github.com/toolgate/toolgate/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }
