// Package packs builds the policy a deployment gates from the packs
// TOOLGATE_PACKS names. It is the one place that knows which Go packs are
// built in: a process names its packs, never a package-level registry.
package packs

import (
	"fmt"
	"slices"
	"strings"

	"github.com/toolgate/toolgate/domains/mangrove"
	"github.com/toolgate/toolgate/policy"
)

// Default is the packs a deployment gates when TOOLGATE_PACKS is unset.
const Default = mangrove.Name

// builtIn are the Go packs compiled into toolgate's processes, by name.
var builtIn = map[string]func() policy.Domain{
	mangrove.Name: mangrove.Domain,
}

// Names lists the built-in Go packs.
func Names() []string {
	var out []string
	for n := range builtIn {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Load builds the policy of the packs named, comma-separated, in order.
// An unknown name, or packs that do not hold together (policy.New), stop
// the process at start with what to fix.
func Load(names string) (*policy.Policy, error) {
	var domains []policy.Domain
	for _, n := range strings.Split(names, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		d, ok := builtIn[n]
		if !ok {
			return nil, fmt.Errorf("TOOLGATE_PACKS: %q is not a pack; the built-in packs are %s", n, strings.Join(Names(), ", "))
		}
		domains = append(domains, d())
	}
	if len(domains) == 0 {
		return nil, fmt.Errorf("TOOLGATE_PACKS names no pack; set it to one or more of %s, comma-separated", strings.Join(Names(), ", "))
	}
	p, err := policy.New(domains...)
	if err != nil {
		return nil, fmt.Errorf("TOOLGATE_PACKS=%s: %w", names, err)
	}
	return p, nil
}

// MustLoad is Load for tests and tools that gate the default packs.
func MustLoad(names string) *policy.Policy {
	p, err := Load(names)
	if err != nil {
		panic(err)
	}
	return p
}
