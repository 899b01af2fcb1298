package policy_test

import (
	"slices"

	"github.com/toolgate/toolgate/packs/mangrove"
	"github.com/toolgate/toolgate/policy"
)

// mangroveOnly is the policy of the Mangrove pack alone, built once.
var mangroveOnly = func() *policy.Policy {
	p, err := policy.New(mangrove.Policy())
	if err != nil {
		panic(err)
	}
	return p
}()

// mangrovePolicy is the policy the engine's tests judge Mangrove's calls with.
func mangrovePolicy() *policy.Policy { return mangroveOnly }

// withRows is the Mangrove pack with another policy table. A tool the
// shipped table denies has no route; a test that lets it run gives it one.
func withRows(rows []policy.Row) policy.Pack {
	d := mangrove.Policy()
	d.Rows = rows
	d.Tools = slices.Clone(d.Tools)
	for i := range d.Tools {
		if d.Tools[i].Route.Path == "" {
			d.Tools[i].Route = policy.Route{Method: "POST", Path: "/test/" + d.Tools[i].Name}
		}
	}
	return d
}
