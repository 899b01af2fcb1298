// Package plancover is an insurer's member portal as a pack: the curated
// reads a member's assistant makes on PlanCover, the insurer's API
// (../../../shared/background/tool-authorisation-chain.txt). Every read
// runs as the signed-in member, is idempotent and needs no confirmation;
// ownership is by portal, and a portal the caller does not hold is not
// found, saying nothing of whose it is. The claim tools rely on PlanCover's
// own scoping of claims to the member's token. The knowledge search runs
// as no one (the corpus is the same for every caller), takes no filters
// (the caller's company, whose group wordings it adds, comes from the
// session), and, when its index is down, tells the model not to answer
// from memory. The hospital search
// re-ranks the ~250 regional records PlanCover returns whatever it is
// asked (shape.go). Its upstream stand-in is ./upstream.
package plancover

import (
	"reflect"
	"regexp"
	"time"

	"github.com/toolgate/toolgate/pack"
	"github.com/toolgate/toolgate/policy"
)

// Name is the pack's name in TOOLGATE_PACKS and TOOLGATE_UPSTREAMS.
const Name = "plancover"

// RoleMember is the pack's one role: a member signed in to the portal.
// The text's role mappings are provisional (every read open to every
// role), so there is one.
const RoleMember policy.Role = "member"

// KindPortal is the pack's resource: a member's portal (one per policy),
// granted by the provider's plancover_portals claim.
const KindPortal = "portal"

// KindCompany is the employer whose group cover a member holds, granted by
// the provider's plancover_company claim: the knowledge search's scope,
// from the session, never from the model.
const KindCompany = "company"

// Tool names, the wire names a model calls.
const (
	ToolListMyPolicies        = "list_my_policies"
	ToolGetPlanDetails        = "get_plan_details"
	ToolGetCoveredBenefits    = "get_covered_benefits"
	ToolListPolicyDocuments   = "list_policy_documents"
	ToolListMyClaims          = "list_my_claims"
	ToolGetClaimStatus        = "get_claim_status"
	ToolGetClaimSettlement    = "get_claim_settlement"
	ToolFindNetworkHospitals  = "find_network_hospitals"
	ToolSearchPolicyKnowledge = "search_policy_knowledge"
)

// Validate tags the pack's args use beyond the validator's own.
var (
	// PortalRef is a portal reference as list_my_policies returns it.
	PortalRef = regexp.MustCompile(`^PRT-[0-9]{5}$`)
	// ClaimRef is a claim number (CLM-2026-0042) or a claim id (88123):
	// either works for both lookups; PlanCover translates. Neither has nine
	// digits, which the sanitizer would take for a phone number.
	ClaimRef = regexp.MustCompile(`^(CLM-[0-9]{4}-[0-9]{4}|[0-9]{1,8})$`)
	// PinCode is an Indian postal code: exactly six digits.
	PinCode = regexp.MustCompile(`^[0-9]{6}$`)
)

// ByPortal is the resource of every tool whose args embed PortalArg.
var ByPortal = policy.ResourceArg{Arg: "portal_ref", Kind: KindPortal}

// PortalArg is embedded in the args of the tools that read one portal.
type PortalArg struct {
	PortalRef string `json:"portal_ref,omitempty" title:"Portal" validate:"omitempty,portalref" desc:"The portal of one policy, e.g. PRT-40122, as list_my_policies returns it; the member's first when left out. Never guess one."`
}

// The tools' arguments.
type (
	// NoArgs are the arguments of a tool that takes none: the member comes
	// from the sign-in.
	NoArgs struct{}

	// ClaimArgs are the arguments of the two claim lookups.
	ClaimArgs struct {
		ClaimRef string `json:"claim_ref" title:"Claim" validate:"required,claimref" desc:"The claim number (e.g. CLM-2026-0042) or the claim id (e.g. 88123), as list_my_claims returns them; either works."`
	}

	// HospitalArgs are the arguments of find_network_hospitals: a pin code
	// or a city, at least one.
	HospitalArgs struct {
		PortalArg
		PinCode string `json:"pin_code,omitempty" title:"Pin code" validate:"required_without=City,omitempty,pincode" desc:"The six-digit pin code to search near, e.g. 560034."`
		City    string `json:"city,omitempty" title:"City" validate:"required_without=PinCode,omitempty,min=2,max=60" desc:"The city to search in, e.g. Bengaluru."`
	}

	// KnowledgeArgs are the arguments of search_policy_knowledge: a query
	// and nothing that narrows it.
	KnowledgeArgs struct {
		Query string `json:"query" validate:"required,min=2,max=300" redact:"pii" desc:"What to look up in the policy wordings, in plain words, e.g. \"waiting period for cataract surgery\". Leave out names, numbers and anything personal: phone numbers and e-mail addresses are removed."`
	}
)

// readTimeout bounds one PlanCover read.
const readTimeout = 10 * time.Second

// read is the shape every PlanCover read shares: read risk, idempotent,
// as the signed-in member.
func read(name, description, example string, args reflect.Type, route policy.Route) policy.ToolSpec {
	return policy.ToolSpec{Name: name, Description: description, Example: example, Args: args, Route: route,
		Tier: policy.TierRead, Idempotent: true, RequiresCredential: true, Timeout: readTimeout}
}

// portalRead is a read of one portal the member holds.
func portalRead(name, description string, args reflect.Type, route policy.Route) policy.ToolSpec {
	s := read(name, description, `{"portal_ref":"PRT-40122"}`, args, route)
	s.Resource = ByPortal
	return s
}

// Tools are the pack's tools, in the order they are offered.
func Tools() []policy.ToolSpec {
	hospitals := portalRead(ToolFindNetworkHospitals,
		"Network hospitals near a pin code or in a city, for the member's plan: where cashless treatment is offered. "+
			"Give pin_code or city. The answer is a regional list of at most ten, nearest first; it is not exhaustive, "+
			"so a hospital the member names that is not in it may still be in the network: say so, and never say it is not covered.",
		reflect.TypeFor[HospitalArgs](), policy.Route{Method: "GET", Path: "/v1/portals/{portal_ref}/hospitals", Query: map[string]string{"pin_code": "pin_code", "city": "city"}})
	hospitals.Example = `{"portal_ref":"PRT-40122","pin_code":"560034"}`
	knowledge := read(ToolSearchPolicyKnowledge,
		"Search the policy wordings (conditions, exclusions, waiting periods, how to claim) and return passages to cite. "+
			"Use it for how cover works; for what this member's plan covers, prefer get_covered_benefits. It takes a query only.",
		`{"query":"waiting period for cataract surgery"}`, reflect.TypeFor[KnowledgeArgs](), policy.Route{Method: "GET", Path: "/v1/knowledge", Query: map[string]string{"q": "query"},
			Session: map[string]string{"company": KindCompany}})
	knowledge.RequiresCredential = false
	knowledge.Unavailable = "Do not answer from memory: tell the member the policy wordings cannot be searched right now and to ask again later."
	return []policy.ToolSpec{
		read(ToolListMyPolicies,
			"The member's policies, one portal each: the portal_ref every other policy tool takes, the plan's name and its status. "+
				"Call it first; it is the only place a portal_ref comes from.",
			`{}`, reflect.TypeFor[NoArgs](), policy.Route{Method: "GET", Path: "/v1/policies"}),
		portalRead(ToolGetPlanDetails,
			"One policy's plan: the sum insured, who is insured, the room rent limit, the co-payment and the renewal date.",
			reflect.TypeFor[PortalArg](), policy.Route{Method: "GET", Path: "/v1/portals/{portal_ref}/plan"}),
		portalRead(ToolGetCoveredBenefits,
			"The benefits one policy covers today, each with its limit. Prefer it to search_policy_knowledge when the member asks what they are covered for; "+
				"it does not carry conditions or waiting periods.",
			reflect.TypeFor[PortalArg](), policy.Route{Method: "GET", Path: "/v1/portals/{portal_ref}/benefits"}),
		portalRead(ToolListPolicyDocuments,
			"The documents of one policy (the schedule, the wording, tax certificates), each with its title and when it was issued.",
			reflect.TypeFor[PortalArg](), policy.Route{Method: "GET", Path: "/v1/portals/{portal_ref}/documents"}),
		read(ToolListMyClaims,
			"The member's claims, newest first, each with its claim number, claim id, patient, hospital and stage.",
			`{}`, reflect.TypeFor[NoArgs](), policy.Route{Method: "GET", Path: "/v1/claims"}),
		read(ToolGetClaimStatus,
			"Where one claim stands and what it is waiting for. It gives no settlement date: never predict one.",
			`{"claim_ref":"CLM-2026-0042"}`, reflect.TypeFor[ClaimArgs](), policy.Route{Method: "GET", Path: "/v1/claims/{claim_ref}/status"}),
		read(ToolGetClaimSettlement,
			"How one settled or partly settled claim was paid: the amount claimed, approved and deducted, line by line. It gives no payment date: never predict one.",
			`{"claim_ref":"88123"}`, reflect.TypeFor[ClaimArgs](), policy.Route{Method: "GET", Path: "/v1/claims/{claim_ref}/settlement"}),
		hospitals,
		knowledge,
	}
}

// Policy is the PlanCover pack's policy.
func Policy() policy.Pack {
	tools := Tools()
	rows := make([]policy.Row, len(tools))
	for i, t := range tools {
		rows[i] = policy.Row{Tool: t.Name, Roles: []policy.Role{RoleMember}, Decision: policy.DecisionAllow,
			Limits: []policy.Limit{{Scope: policy.PerUser, Window: policy.Hour, MaxCalls: 120}}}
	}
	return policy.Pack{
		Name:   Name,
		System: "the member portal",
		Roles:  []policy.RoleSpec{{Name: RoleMember, Label: "Member"}},
		Tools:  tools,
		Rows:   rows,
		Formats: []policy.Format{
			{Tag: "portalref", Pattern: PortalRef, Rule: `must be a portal reference such as "PRT-40122", as list_my_policies returns it`},
			{Tag: "claimref", Pattern: ClaimRef, Rule: `must be a claim number such as "CLM-2026-0042" or a claim id such as "88123", as list_my_claims returns them`},
			{Tag: "pincode", Pattern: PinCode, Rule: `must be exactly six digits, e.g. "560034"`},
		},
		Resources: []policy.ResourceKind{{Name: KindPortal, Plural: "portals", Claim: "plancover_portals", Conceal: true, Example: "PRT-40122"},
			{Name: KindCompany, Plural: "companies", Claim: "plancover_company", Conceal: true, Example: "ACME"}},
	}
}

// Pack is the PlanCover pack: its policy and the hospital search's shaper.
func Pack() pack.Pack {
	return pack.Pack{Policy: Policy(), Shapers: map[string]pack.Shaper{ToolFindNetworkHospitals: ShapeHospitals}}
}
