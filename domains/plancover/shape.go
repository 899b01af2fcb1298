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
// pin code's), then those in its district, each in PlanCover's order; it
// keeps the first MaxHospitals, each whole, and tells the model the list is
// regional, not exhaustive.
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
	for _, h := range in.Hospitals {
		if a.PinCode != "" && h.PinCode == a.PinCode || a.PinCode == "" && strings.EqualFold(h.City, city) {
			if city == "" {
				city = h.City
			}
			district = h.District
			break
		}
	}
	rank := func(h Hospital) int {
		switch {
		case a.PinCode != "" && h.PinCode == a.PinCode:
			return 0
		case city != "" && strings.EqualFold(h.City, city):
			return 1
		case district != "" && strings.EqualFold(h.District, district):
			return 2
		}
		return 3
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
	if len(ranked) == 0 || rank(ranked[0]) == 3 {
		out.Note = fmt.Sprintf("No network hospital was found at %s; these are others in the region, and the list is not exhaustive. "+
			"Ask the member for a nearby pin code or city.", near)
	}
	return json.Marshal(out)
}
