package plancover

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// MaxHospitals is how many hospitals the model is given: PlanCover returns
// about 250 for the region whatever it is asked, which would not fit the
// result cap (TOOL_MAX_RESULT_CHARS, 4000) without cutting records apart.
const MaxHospitals = 10

// Hospital is one network hospital as the model reads it: where it is,
// nothing else (PlanCover's record also carries a desk's mobile number).
type Hospital struct {
	Name     string `json:"name"`
	Address  string `json:"address"`
	City     string `json:"city"`
	District string `json:"district"`
	PinCode  string `json:"pin_code"`
}

// Hospitals is find_network_hospitals' result.
type Hospitals struct {
	Hospitals []Hospital `json:"hospitals"`
	Note      string     `json:"note"`
}

// ShapeHospitals ranks PlanCover's regional records for the call: those at
// the exact pin code first, then those in the city (the one asked, or the
// pin code's), then in its district, then those sharing the pin code's
// first three digits (its sorting district), each in PlanCover's order. A
// pin code no hospital has takes its city and district from the record
// whose pin code shares the most leading digits with it. It keeps the first
// MaxHospitals, each whole, and tells the model the list is regional, not
// exhaustive.
func ShapeHospitals(args json.RawMessage, answer []byte) ([]byte, error) {
	var a HospitalArgs
	if err := json.Unmarshal(args, &a); err != nil {
		return nil, fmt.Errorf("find_network_hospitals args: %w", err)
	}
	var in struct {
		Hospitals []Hospital `json:"hospitals"`
	}
	if err := json.Unmarshal(answer, &in); err != nil {
		return nil, fmt.Errorf("the hospitals answer: %w", err)
	}
	city, district := a.City, ""
	if ref, ok := nearest(in.Hospitals, a); ok {
		if city == "" {
			city = ref.City
		}
		district = ref.District
	}
	rank := func(h Hospital) int {
		switch {
		case a.PinCode != "" && h.PinCode == a.PinCode:
			return 0
		case city != "" && strings.EqualFold(h.City, city):
			return 1
		case district != "" && strings.EqualFold(h.District, district):
			return 2
		case a.PinCode != "" && sharedDigits(h.PinCode, a.PinCode) >= sortingDigits:
			return 3
		}
		return 4
	}
	ranked := slices.Clone(in.Hospitals)
	slices.SortStableFunc(ranked, func(x, y Hospital) int { return rank(x) - rank(y) })
	ranked = ranked[:min(len(ranked), MaxHospitals)]
	near := "pin code " + a.PinCode
	if a.PinCode == "" {
		near = a.City
	}
	out := Hospitals{Hospitals: ranked, Note: fmt.Sprintf("A regional list of %d network hospitals, nearest to %s first; it is not exhaustive. "+
		"A hospital the member names that is not here may still be in the network: say so, and never say it is not covered.", len(ranked), near)}
	switch {
	case len(ranked) == 0:
		out.Note = "PlanCover listed no network hospital in this region. Ask the member for another pin code or city; never say a hospital is not covered."
	case rank(ranked[0]) == 4:
		out.Note = fmt.Sprintf("No network hospital was found near %s; these are others in the region, and the list is not exhaustive. "+
			"Ask the member for a nearby pin code or city.", near)
	}
	return json.Marshal(out)
}

// sortingDigits are the leading digits of an Indian pin code that name its
// sorting district.
const sortingDigits = 3

// nearest is the record the ranking takes its city and district from: the
// first at the exact pin code, else the first sharing the most leading
// digits with it (at least sortingDigits), else, for a city alone, the
// first in that city.
func nearest(hs []Hospital, a HospitalArgs) (Hospital, bool) {
	best, bestDigits := -1, sortingDigits-1
	for i, h := range hs {
		switch {
		case a.PinCode != "":
			if n := sharedDigits(h.PinCode, a.PinCode); n > bestDigits {
				best, bestDigits = i, n
			}
		case strings.EqualFold(h.City, a.City):
			return h, true
		}
	}
	if best < 0 {
		return Hospital{}, false
	}
	return hs[best], true
}

// sharedDigits counts the leading characters two pin codes share.
func sharedDigits(x, y string) int {
	n := 0
	for n < len(x) && n < len(y) && x[n] == y[n] {
		n++
	}
	return n
}
