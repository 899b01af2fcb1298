// Package packs builds the policy a deployment gates from the packs
// TOOLGATE_PACKS names. It is the one place that knows which Go packs are
// built in: a process names its packs, never a package-level registry.
package packs

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/toolgate/toolgate/mcpupstream"
	"github.com/toolgate/toolgate/pack"
	"github.com/toolgate/toolgate/packs/mangrove"
	"github.com/toolgate/toolgate/packs/northgate"
	"github.com/toolgate/toolgate/packs/plancover"
	"github.com/toolgate/toolgate/policy"
)

// Default is the packs a deployment gates when TOOLGATE_PACKS is unset.
const Default = mangrove.Name

// builtIn are the Go packs compiled into toolgate's processes, by name.
var builtIn = map[string]func() pack.Pack{
	mangrove.Name:  mangrove.Pack,
	plancover.Name: plancover.Pack,
	northgate.Name: northgate.Pack,
}

// Set is the packs a deployment gates: their policy, and their code.
type Set struct {
	Policy *policy.Policy
	// Previewers are the packs' dry runs, by tool.
	Previewers map[string]pack.Previewer
	// Shapers reshape the packs' answers for the model, by tool.
	Shapers map[string]pack.Shaper
	// Servers are the packs' own MCP servers, by name: one name is one
	// pack's, as a tool's is.
	Servers map[string]mcpupstream.Server
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

// Load builds the packs named, comma-separated, in order: a built-in pack
// by its name, a pack file by its path. An unknown name,
// or packs that do not hold together (policy.New, pack.Check), stop the
// process at start with what to fix.
func Load(names string) (*Set, error) {
	var policies []policy.Pack
	set := &Set{Previewers: map[string]pack.Previewer{}, Shapers: map[string]pack.Shaper{}, Servers: map[string]mcpupstream.Server{}}
	serverPack := map[string]string{}
	for _, n := range strings.Split(names, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		var p pack.Pack
		if IsFile(n) {
			var err error
			if p, err = LoadFile(n); err != nil {
				return nil, fmt.Errorf("TOOLGATE_PACKS: %w", err)
			}
		} else {
			build, ok := builtIn[n]
			if !ok {
				return nil, fmt.Errorf("TOOLGATE_PACKS: %q is neither a built-in pack (%s) nor a pack file (.yaml, .yml or .json)", n, strings.Join(Names(), ", "))
			}
			p = build()
		}
		if err := p.Check(); err != nil {
			return nil, fmt.Errorf("TOOLGATE_PACKS=%s: %w", names, err)
		}
		for _, s := range p.Servers {
			if other, ok := serverPack[s.Name]; ok {
				return nil, fmt.Errorf("TOOLGATE_PACKS=%s: the MCP server name %q is in packs %s and %s; a server's name is one pack's", names, s.Name, other, p.Policy.Name)
			}
			serverPack[s.Name] = p.Policy.Name
			set.Servers[s.Name] = s
		}
		policies = append(policies, p.Policy)
		maps.Copy(set.Previewers, p.Previewers)
		maps.Copy(set.Shapers, p.Shapers)
	}
	if len(policies) == 0 {
		return nil, fmt.Errorf("TOOLGATE_PACKS names no pack; set it to one or more of %s, comma-separated", strings.Join(Names(), ", "))
	}
	p, err := policy.New(policies...)
	if err != nil {
		return nil, fmt.Errorf("TOOLGATE_PACKS=%s: %w", names, err)
	}
	set.Policy = p
	return set, nil
}

// MustLoad is Load for tests and tools that gate the default packs.
func MustLoad(names string) *Set {
	s, err := Load(names)
	if err != nil {
		panic(err)
	}
	return s
}
