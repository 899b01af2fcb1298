package packs

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/toolgate/toolgate/mcpupstream"
)

// Review is what Accept found for one tool a pack file's rows name.
type Review struct {
	Server, Tool string
	// Status is new (never accepted), same (as accepted), changed (not as
	// accepted) or missing (the server does not offer it).
	Status string
	Was    *mcpupstream.Definition
	Now    *mcpupstream.Definition
	// Why says why a tool of a server with unlisted is left out.
	Why string
}

// The statuses of a Review.
const (
	ReviewNew     = "new"
	ReviewSame    = "same"
	ReviewChanged = "changed"
	ReviewMissing = "missing"
	// ReviewLeftOut is a tool no row names, of a server with unlisted,
	// that toolgate cannot offer (a schema it cannot check or make an
	// example of): it is not pinned, offered or run.
	ReviewLeftOut = "left-out"
)

// Accept starts or dials a pack file's MCP servers, lists the tools its
// rows name (every tool of a server with unlisted), and holds each against
// the file's pins. With write it
// writes the pins file with the definitions it read, which the pack's
// processes then take as accepted: a person runs it after reading what
// Report shows. A tool a server does not offer is never written.
func Accept(ctx context.Context, path string, write bool) ([]Review, error) {
	r, f, err := readFile(path)
	if err != nil {
		return nil, err
	}
	servers, err := r.servers(filepath.Dir(path), f.Servers)
	if err != nil {
		return nil, err
	}
	if len(servers) == 0 {
		return nil, fmt.Errorf("%s names no MCP servers (servers)", path)
	}
	// Read as written: a pin that is not its definition's (a hand edit,
	// or one made by another version) is shown as changed, to accept again.
	pins, err := readPins(path)
	if err != nil {
		return nil, err
	}
	named := map[string][]string{}
	name := func(server, tool string) {
		if server != "" && tool != "" && !slices.Contains(named[server], tool) {
			named[server] = append(named[server], tool)
		}
	}
	for _, t := range f.Tools {
		name(t.Server, t.Tool)
		if t.Preview != nil {
			name(t.Server, t.Preview.Tool)
		}
	}
	var reviews []Review
	next := Pins{}
	for i, s := range servers {
		unlisted := f.Servers[i]
		if len(named[s.Name]) == 0 && unlisted.Unlisted == nil {
			continue
		}
		if s.Audience != "" && s.Bearer == "" {
			return nil, fmt.Errorf("%s: MCP server %s is called only with the signed-in person's tokens (auth.exchange), so accept-mcp has no credential to list its tools with; give auth.bearer too, \"${NAME}\" naming a variable set in this shell and the worker's, holding a token the server takes for tools/list (a service account's)", path, s.Name)
		}
		c, err := mcpupstream.Dial(ctx, s, nil)
		if err != nil {
			return nil, err
		}
		defs := c.Definitions()
		_ = c.Close()
		if unlisted.Unlisted != nil {
			for _, tool := range slices.Sorted(maps.Keys(defs)) {
				if slices.Contains(named[s.Name], tool) {
					continue
				}
				if _, err := r.unlistedRow(unlisted, defs[tool]); err != nil {
					now := defs[tool]
					reviews = append(reviews, Review{Server: s.Name, Tool: tool, Status: ReviewLeftOut, Now: &now, Why: err.Error()})
					continue
				}
				named[s.Name] = append(named[s.Name], tool)
			}
		}
		slices.Sort(named[s.Name])
		for _, tool := range named[s.Name] {
			rev := Review{Server: s.Name, Tool: tool, Status: ReviewNew}
			if was, ok := pins[s.Name][tool]; ok {
				rev.Was = &was.Definition
			}
			now, ok := defs[tool]
			switch {
			case !ok:
				rev.Status = ReviewMissing
			case rev.Was != nil && rev.Was.Pin() == now.Pin() && pins[s.Name][tool].Pin == now.Pin():
				rev.Status, rev.Now = ReviewSame, &now
			case rev.Was != nil:
				rev.Status, rev.Now = ReviewChanged, &now
			default:
				rev.Now = &now
			}
			if rev.Now != nil {
				if next[s.Name] == nil {
					next[s.Name] = map[string]Pinned{}
				}
				next[s.Name][tool] = Pinned{Pin: now.Pin(), Definition: now}
			}
			reviews = append(reviews, rev)
		}
	}
	if write {
		b, err := json.MarshalIndent(next, "", "  ")
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(PinsFile(path), append(b, '\n'), 0o644); err != nil {
			return nil, fmt.Errorf("pins: %w", err)
		}
	}
	return reviews, nil
}

// Report writes what a person reads before accepting: for each tool, its
// status, and for a new or changed one every word the model will read and
// every hint, the accepted text beside the new.
func Report(w io.Writer, reviews []Review) {
	for _, r := range reviews {
		fmt.Fprintf(w, "%s %s.%s\n", r.Status, r.Server, r.Tool)
		switch r.Status {
		case ReviewLeftOut:
			fmt.Fprintf(w, "  not offered or run: %s\n", r.Why)
		case ReviewNew:
			writeDefinition(w, "  ", *r.Now)
		case ReviewChanged:
			fmt.Fprintln(w, "  accepted:")
			writeDefinition(w, "    ", *r.Was)
			fmt.Fprintln(w, "  now:")
			writeDefinition(w, "    ", *r.Now)
		}
	}
}

func writeDefinition(w io.Writer, indent string, d mcpupstream.Definition) {
	b, _ := json.MarshalIndent(d, indent, "  ")
	fmt.Fprintln(w, indent+strings.TrimSpace(string(b)))
}
