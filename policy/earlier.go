package policy

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// This file is everything toolgate still reads in the form it wrote before
// resources had kinds, when a session's resources were numeric stores: the
// session's and approver's "storeIds", a verdict's and an activity input's
// "storeId", a limit key of scope "store". Recorded histories, signed
// decisions and agent backends of that time still mean what they meant;
// nothing new is written so, except a payload written back in the form it
// came in. The kind they name is the one those payloads could only mean.

// legacyKind is the one kind sessions and approvers could hold before
// resources had kinds: their "storeIds" wire field reads as it, so an agent
// backend, a recorded history or a signed decision of that time still means
// what it meant.
const legacyKind = "store"

// legacyIDs converts the numeric IDs of the earlier wire field.
func legacyIDs(ids []int64) Resources {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = strconv.FormatInt(id, 10)
	}
	return Resources{legacyKind: out}
}

// legacyOf gives back the earlier wire field's IDs when r holds only what it
// could say, and false otherwise.
func legacyOf(r Resources) ([]int64, bool) {
	if len(r) > 1 {
		return nil, false
	}
	ids := make([]int64, 0, len(r[legacyKind]))
	for k, list := range r {
		if k != legacyKind {
			return nil, false
		}
		for _, s := range list {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil || strconv.FormatInt(n, 10) != s {
				return nil, false
			}
			ids = append(ids, n)
		}
	}
	return ids, true
}

// resourceWire is how sessions and approvers carry resources on the wire:
// "resources" by kind, or the earlier "storeIds".
type resourceWire struct {
	Resources Resources `json:"resources,omitempty"`
	StoreIDs  *[]int64  `json:"storeIds,omitempty"`
}

// read fills r from the wire, refusing both fields at once.
func (w resourceWire) read(r *Resources, legacy *bool) error {
	if w.StoreIDs != nil && w.Resources != nil {
		return fmt.Errorf("give resources or storeIds, not both")
	}
	*r, *legacy = w.Resources, false
	if w.StoreIDs != nil {
		for _, id := range *w.StoreIDs {
			if id < 1 {
				return fmt.Errorf("storeIds holds %d; a store number is 1 or more", id)
			}
		}
		*r, *legacy = legacyIDs(*w.StoreIDs), true
	}
	return nil
}

// write is the wire form of r: the field it came in, so that what was
// fingerprinted or signed encodes the same again.
func write(r Resources, legacy bool) resourceWire {
	if legacy {
		if ids, ok := legacyOf(r); ok {
			return resourceWire{StoreIDs: &ids}
		}
	}
	return resourceWire{Resources: r}
}

// EarlierResource is embedded in payloads that carried a call's resource as
// a number before resources had kinds ("storeId"); new payloads leave it
// zero, so it reads only what an earlier worker recorded.
type EarlierResource struct {
	StoreID int64 `json:"storeId,omitempty"`
}

// Or is r, or the earlier field's resource when r names none.
func (e EarlierResource) Or(r ResourceRef) ResourceRef {
	if r.Kind == "" && e.StoreID != 0 {
		return ResourceRef{Kind: legacyKind, ID: strconv.FormatInt(e.StoreID, 10)}
	}
	return r
}

// EarlierResources is EarlierResource for a session's claims ("storeIds").
type EarlierResources struct {
	StoreIDs []int64 `json:"storeIds,omitempty"`
}

// Or is r, or the earlier field's resources when r holds none.
func (e EarlierResources) Or(r Resources) Resources {
	if len(r) == 0 && len(e.StoreIDs) > 0 {
		return legacyIDs(e.StoreIDs)
	}
	return r
}

// UnmarshalJSON reads a verdict, and one recorded when the resource was a
// numeric "storeId".
func (v *Verdict) UnmarshalJSON(b []byte) error {
	type plain Verdict
	var w struct {
		plain
		StoreID int64 `json:"storeId"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*v = Verdict(w.plain)
	if w.StoreID != 0 && v.Resource.Kind == "" {
		v.Resource = ResourceRef{Kind: legacyKind, ID: strconv.FormatInt(w.StoreID, 10)}
	}
	return nil
}

// UnmarshalJSON reads a limit key, and one recorded when a per-resource
// limit was scope "store" with a numeric "store".
func (k *LimitKey) UnmarshalJSON(b []byte) error {
	type plain LimitKey
	var w struct {
		plain
		Store int64 `json:"store"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*k = LimitKey(w.plain)
	if k.Scope == legacyKind {
		k.Scope, k.Resource = PerResource, ResourceRef{Kind: legacyKind, ID: strconv.FormatInt(w.Store, 10)}
	}
	return nil
}
