package testenv

import (
	"reflect"
	"regexp"
	"time"

	"github.com/toolgate/toolgate/policy"
)

// The library pack is the core's second pack in tests: a lending library
// with no stores, no money and no dry run, whose loans are each member's
// own. Its tools are judged by the same engine as Mangrove's.
const (
	LibraryTool   = "find_book"
	LibraryRenew  = "renew_loan"
	LibraryMember = policy.Role("member")
	LibraryStaff  = policy.Role("librarian")
	// LibrarySearches is how many find_book calls a person makes in an hour.
	LibrarySearches = 3
)

// FindBookArgs are the arguments of find_book.
type FindBookArgs struct {
	Title string `json:"title" validate:"required,min=2,max=120" desc:"Words from the book's title."`
}

// RenewLoanArgs are the arguments of renew_loan.
type RenewLoanArgs struct {
	LoanID string `json:"loanId" validate:"required,loanid" desc:"The loan's id, e.g. LN-2041."`
	Weeks  int64  `json:"weeks" validate:"required,min=1,max=4" desc:"How many weeks longer, 1 to 4."`
}

// LibraryPack is the library pack: a read anyone may make and a renewal
// a librarian approves, one card per member.
func LibraryPack() policy.Pack {
	return policy.Pack{
		Name:   "library",
		System: "the library system",
		Roles:  []policy.RoleSpec{{Name: LibraryMember, Label: "Member"}, {Name: LibraryStaff, Label: "Librarian"}},
		Tools: []policy.ToolSpec{
			{Name: LibraryTool, Description: "Find books by title words. Not for loans.", Args: reflect.TypeFor[FindBookArgs](), Tier: policy.TierRead,
				Idempotent: true, RequiresCredential: true, Timeout: 10 * time.Second, Example: `{"title":"Middlemarch"}`,
				Route: policy.Route{Method: "GET", Path: "/v1/books", Query: map[string]string{"q": "title"}}},
			{Name: LibraryRenew, Description: "Renew one of the member's loans. A librarian approves it.", Args: reflect.TypeFor[RenewLoanArgs](), Tier: policy.TierWrite,
				RequiresCredential: true, Timeout: 10 * time.Second, Example: `{"loanId":"LN-2041","weeks":2}`,
				Route: policy.Route{Method: "POST", Path: "/v1/loans/{loanId}/renewals", Body: []string{"weeks"}, Keyed: true}},
		},
		Rows: []policy.Row{
			{Tool: LibraryTool, Roles: []policy.Role{LibraryMember, LibraryStaff}, Decision: policy.DecisionAllow,
				Limits: []policy.Limit{{Scope: policy.PerUser, Window: policy.Hour, MaxCalls: LibrarySearches}}},
			{Tool: LibraryRenew, Roles: []policy.Role{LibraryMember}, Decision: policy.DecisionApprove, Approvers: []policy.Approver{{Role: LibraryStaff}},
				Editable: []string{"weeks"}},
		},
		Evidence: []policy.EvidenceRule{{Tool: LibraryRenew, ACR: policy.ACRPassword, MaxAge: 8 * time.Hour}},
		Formats:  []policy.Format{{Tag: "loanid", Pattern: loanID, Rule: `must be a loan id such as "LN-2041"`}},
	}
}

// WithLibrary is the shipped packs and the library pack, in one policy.
var WithLibrary = func() *policy.Policy {
	p, err := policy.New(append(Policy.Packs(), LibraryPack())...)
	if err != nil {
		panic(err)
	}
	return p
}()

var loanID = regexp.MustCompile(`^LN-[0-9]{1,8}$`)
