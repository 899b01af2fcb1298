package activities

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/policy"
)

// TestARoutesPathStaysItsOwn: a path arg fills one segment of the route,
// escaped; a value that would name another path ("..", ".", a slash) is
// refused before anything is sent.
func TestARoutesPathStaysItsOwn(t *testing.T) {
	r := policy.Route{Method: "POST", Path: "/v1/handbook/{page}/suggestions", Body: []string{"change"}}
	path, body, err := request(r, json.RawMessage(`{"page":"cold-chain","change":"x"}`), nil)
	if err != nil || path != "/v1/handbook/cold-chain/suggestions" || string(body) != `{"change":"x"}` {
		t.Fatalf("a page: %q %s %v", path, body, err)
	}
	if path, _, err := request(r, json.RawMessage(`{"page":"a/b","change":"x"}`), nil); err != nil || !strings.Contains(path, "a%2Fb") {
		t.Fatalf("a slash: %q %v", path, err)
	}
	if path, _, err := request(r, json.RawMessage(`{"page":"%2e%2e","change":"x"}`), nil); err != nil || !strings.Contains(path, "%252e%252e") {
		t.Fatalf("escaped dots stay escaped: %q %v", path, err)
	}
	for _, bad := range []string{"..", "."} {
		args, _ := json.Marshal(map[string]string{"page": bad, "change": "x"})
		if path, _, err := request(r, args, nil); err == nil {
			t.Errorf("%q became %q", bad, path)
		}
	}
}
