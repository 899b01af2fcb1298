package policy

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/toolargs"
)

// ClaimMap says which sign-in claim lists the resources of each kind, by
// kind: the packs' own (ResourceKind.Claim), as a deployment overrides them.
type ClaimMap map[string]string

// ClaimMap is the packs' claim for each resource kind, with override
// applied: "kind=claim" pairs separated by commas (TOOLGATE_RESOURCE_CLAIMS),
// each kind one the packs declare. A kind with no claim is granted by no
// sign-in.
func (p *Policy) ClaimMap(override string) (ClaimMap, error) {
	m := ClaimMap{}
	kinds := p.ResourceKinds()
	for _, k := range kinds {
		if k.Claim != "" {
			m[k.Name] = k.Claim
		}
	}
	for _, pair := range strings.Split(override, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		kind, claim, ok := strings.Cut(pair, "=")
		kind, claim = strings.TrimSpace(kind), strings.TrimSpace(claim)
		if !ok || kind == "" || claim == "" {
			return nil, fmt.Errorf("resource claims: %q is not kind=claim", toolargs.Clip(pair))
		}
		if !slices.ContainsFunc(kinds, func(k ResourceKind) bool { return k.Name == kind }) {
			return nil, fmt.Errorf("resource claims: %q is not a resource kind of the packs (%s)", toolargs.Clip(kind), strings.Join(kindNames(kinds), ", "))
		}
		m[kind] = claim
	}
	return m, nil
}

func kindNames(kinds []ResourceKind) []string {
	out := []string{}
	for _, k := range kinds {
		out = append(out, k.Name)
	}
	return out
}

// ResourcesFromClaims reads a sign-in's resources from its claims by m.
// Each claim is a list of strings or integers, or one string of them
// separated by commas or spaces; an absent claim grants nothing of its
// kind. Each ID must be one its kind's args take (CheckResource). The error
// names the claim and what is wrong.
func (p *Policy) ResourcesFromClaims(m ClaimMap, claims map[string]json.RawMessage) (Resources, error) {
	out := Resources{}
	for _, kind := range sortedStrings(mapKeys(m)) {
		claim := m[kind]
		raw, ok := claims[claim]
		if !ok || string(raw) == "null" {
			continue
		}
		var list []any
		if err := json.Unmarshal(raw, &list); err != nil {
			var s string
			if json.Unmarshal(raw, &s) != nil {
				return nil, fmt.Errorf("the %q claim: want a list of %s IDs, got %s", claim, kind, toolargs.Clip(string(raw)))
			}
			for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' }) {
				list = append(list, f)
			}
		}
		for _, v := range list {
			var id string
			switch v := v.(type) {
			case string:
				id = v
			case float64:
				if v == float64(int64(v)) {
					id = strconv.FormatInt(int64(v), 10)
				}
			}
			if id == "" {
				return nil, fmt.Errorf("the %q claim: %v is not a %s ID", claim, v, kind)
			}
			if err := p.CheckResource(kind, id); err != nil {
				return nil, fmt.Errorf("the %q claim: %w", claim, err)
			}
			if !slices.Contains(out[kind], id) {
				out[kind] = append(out[kind], id)
			}
		}
	}
	if n := out.Count(); n > MaxResources {
		return nil, fmt.Errorf("the sign-in grants %d resources; at most %d", n, MaxResources)
	}
	return out, nil
}

func mapKeys(m ClaimMap) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func sortedStrings(s []string) []string {
	slices.Sort(s)
	return s
}
