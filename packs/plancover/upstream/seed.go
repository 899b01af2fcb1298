package upstream

import "fmt"

// The demo members: meera holds two portals, ravi one.
const (
	Meera = "meera"
	Ravi  = "ravi"
)

// The members' portals.
const (
	MeeraFamily  = "PRT-40122"
	MeeraParents = "PRT-40123"
	RaviOwn      = "PRT-50017"
)

// A pin code and a city the region's records hold; NearPin's are listed
// last of the region, so only a re-ranking puts them first.
const (
	NearPin  = "560034"
	NearCity = "Mysuru"
	// HospitalsInRegion is how many records every search returns.
	HospitalsInRegion = 250
)

func seed() *Server {
	s := &Server{policies: map[string]*Policy{
		MeeraFamily: {PortalRef: MeeraFamily, PolicyNumber: "PC/HL/2026/118204", Plan: "Family Floater Gold", Status: "active",
			Insured: []string{"Meera Iyer", "Arjun Iyer", "Kavya Iyer"}, SumInsured: 1000000, RoomRent: "single private room", CoPay: "none", Renews: "2027-03-31", member: Meera,
			benefits:  []Benefit{{"In-patient hospitalisation", "up to the sum insured"}, {"Day-care procedures", "up to the sum insured"}, {"Maternity", "INR 50,000 per delivery"}, {"Annual health check-up", "INR 5,000 per insured"}},
			documents: []Document{{"Policy schedule 2026-27", "schedule", "2026-04-01"}, {"Policy wording", "wording", "2026-04-01"}, {"Section 80D certificate 2025-26", "tax_certificate", "2026-04-03"}}},
		MeeraParents: {PortalRef: MeeraParents, PolicyNumber: "PC/SC/2025/077310", Plan: "Senior Care Silver", Status: "active",
			Insured: []string{"R. Iyer", "S. Iyer"}, SumInsured: 500000, RoomRent: "1% of sum insured per day", CoPay: "20%", Renews: "2026-12-19", member: Meera,
			benefits:  []Benefit{{"In-patient hospitalisation", "up to the sum insured, 20% co-payment"}, {"Cataract surgery", "INR 40,000 per eye"}},
			documents: []Document{{"Policy schedule 2025-26", "schedule", "2025-12-20"}, {"Policy wording", "wording", "2025-12-20"}}},
		RaviOwn: {PortalRef: RaviOwn, PolicyNumber: "PC/HL/2026/220981", Plan: "Individual Basic", Status: "active",
			Insured: []string{"Ravi Kumar"}, SumInsured: 300000, RoomRent: "shared room", CoPay: "10%", Renews: "2027-01-09", member: Ravi,
			benefits:  []Benefit{{"In-patient hospitalisation", "up to the sum insured"}},
			documents: []Document{{"Policy schedule 2026-27", "schedule", "2026-01-10"}}},
	}, claims: []Claim{
		{Number: "CLM-2026-0042", ID: 88123, Patient: "Arjun Iyer", Hospital: "Sakra Hospital", Stage: "under_review", Waiting: "the discharge summary", Claimed: 184000, member: Meera},
		{Number: "CLM-2025-1977", ID: 80511, Patient: "Kavya Iyer", Hospital: "Cloudnine Hospital", Stage: "settled", Claimed: 62000, Approved: 55500, member: Meera},
		{Number: "CLM-2026-0107", ID: 88990, Patient: "Ravi Kumar", Hospital: "Manipal Hospital", Stage: "settled", Claimed: 41000, Approved: 41000, member: Ravi},
	}}
	towns := []struct{ city, district, pin string }{
		{"Hubballi", "Dharwad", "5800"}, {"Belagavi", "Belagavi", "5900"}, {"Mangaluru", "Dakshina Kannada", "5750"},
		{NearCity, "Mysuru", "5700"}, {"Tumakuru", "Tumakuru", "5721"}, {"Bengaluru", "Bengaluru Urban", "5600"},
	}
	for i := range HospitalsInRegion - 3 {
		t := towns[i*len(towns)/(HospitalsInRegion-3)]
		pin := fmt.Sprintf("%s%02d", t.pin, i%40)
		if pin == NearPin {
			pin = t.pin + "99"
		}
		s.hospitals = append(s.hospitals, Record{Name: fmt.Sprintf("%s Care Hospital %d", t.city, i+1), Address: fmt.Sprintf("%d Main Road, %s", 10+i, t.city),
			City: t.city, District: t.district, PinCode: pin, Mobile: fmt.Sprintf("+91 98450 %05d", 10000+i), Cashless: i%3 != 0})
	}
	for i, name := range []string{"Sakra Hospital", "St. John's Medical College Hospital", "Koramangala Nursing Home"} {
		s.hospitals = append(s.hospitals, Record{Name: name, Address: fmt.Sprintf("%d 80 Feet Road, Koramangala, Bengaluru", 20+i), City: "Bengaluru",
			District: "Bengaluru Urban", PinCode: NearPin, Mobile: fmt.Sprintf("+91 99860 %05d", 40000+i), Cashless: true})
	}
	return s
}

// GroupCompany is the employer whose group wordings the corpus holds:
// only a search scoped to it finds them.
const GroupCompany = "ACME"

// passages are the policy wordings' sections, by the topic a query names;
// a company's group wordings are found only in a search scoped to it.
var passages = []struct{ topic, source, text, company string }{
	{"waiting period", "Policy wording §4.2", "Specified diseases and procedures, cataract among them, are covered after a waiting period of 24 months of continuous cover.", ""},
	{"cataract", "Senior Care wording §3.7", "Cataract surgery is covered up to INR 40,000 per eye, after the 24-month waiting period.", ""},
	{"cashless", "Claims guide §2", "Cashless treatment is available at network hospitals on pre-authorisation; elsewhere, claim reimbursement within 30 days of discharge.", ""},
	{"maternity", "Policy wording §5.1", "Maternity expenses are covered after 9 months of continuous cover, up to the limit in the schedule.", ""},
	{"waiting period", "ACME group wording §2.1", "For ACME employees the waiting periods for specified diseases are waived from the first day of cover.", GroupCompany},
}
