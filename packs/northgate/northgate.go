// Package northgate is a bank's card desk as a pack: the actions a voice
// agent takes for a caller at Northgate Bank
// (../../../shared/background/evidence-before-approving-agent-actions.txt).
// Risk follows the verb: each action's row names the tier of the pack's
// ladder (none, low, medium, high) the caller must hold in the
// conversation, so one caller in one call needs different evidence for a
// balance and for a reissue; a row that names none needs the strictest. A
// caller signed in holds low; a passphrase raises them to medium and a
// one-time code, on top of it, to high, through the two verification
// tools, never through the model. Two wrong answers to one factor lock the
// caller out beyond the call until a person hands them back. A reissued
// card cannot be recalled once posted, so card operations approve every
// reissue and transfer, on a card built from a dry run that names the card
// and the registered address (never an address from the model). Its
// upstream stand-in is ./upstream.
package northgate

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"reflect"
	"regexp"
	"time"

	"github.com/toolgate/toolgate/pack"
	"github.com/toolgate/toolgate/policy"
)

// Name is the pack's name in TOOLGATE_PACKS and TOOLGATE_UPSTREAMS.
const Name = "northgate"

// The pack's roles: the caller on the line, and card operations, who
// approve what cannot be undone.
const (
	RoleCaller  policy.Role = "caller"
	RoleCardOps policy.Role = "card_ops"
)

// KindAccount is the pack's resource: a caller's bank account, granted by
// the provider's northgate_accounts claim; another's is not found. (A kind
// is one pack's: the card desk's file pack has "account".)
const KindAccount = "bank_account"

// The ladder's tiers, weakest first.
const (
	TierNone   = "none"
	TierLow    = "low"
	TierMedium = "medium"
	TierHigh   = "high"
)

// Tool names, the wire names a model calls.
const (
	ToolGetBranchHours          = "get_branch_hours"
	ToolFreezeCard              = "freeze_card"
	ToolGetBalance              = "get_balance"
	ToolGetRecentBill           = "get_recent_bill"
	ToolReissueCard             = "reissue_card"
	ToolTransferFunds           = "transfer_funds"
	ToolVerifyPassphrase        = "verify_passphrase"
	ToolVerifyOneTimeCode       = "verify_one_time_code"
	FactorPassphrase            = "passphrase"
	FactorOneTimeCode           = "one_time_code"
	reissueWhy                  = "a card cannot be recalled once it is posted"
	transferWhy                 = "money sent cannot be called back"
	disclosureWhy               = "it discloses the caller's account"
	freezeWhy                   = "it changes the caller's card"
	oneTimeCodeWhy              = "a one-time code is asked for only of a caller who has given their passphrase"
	passphraseWhy               = "a factor is taken only from a signed-in caller"
	defaultTimeout              = 10 * time.Second
	writeTimeout                = 15 * time.Second
	maxTransferPence      int64 = 250000
)

// AccountRef is an account reference as the bank writes it.
var AccountRef = regexp.MustCompile(`^ACC-[0-9]{5}$`)

// ByAccount is the resource of every tool whose args embed AccountArg.
var ByAccount = policy.ResourceArg{Arg: "accountRef", Kind: KindAccount}

// AccountArg is embedded in the args of the tools that act on one account.
type AccountArg struct {
	AccountRef string `json:"accountRef,omitempty" title:"Account" validate:"omitempty,accountref" desc:"The caller's account, e.g. ACC-20417; their first when left out."`
}

// The tools' arguments.
type (
	// BranchArgs are get_branch_hours' arguments.
	BranchArgs struct {
		Branch string `json:"branch,omitempty" title:"Branch" validate:"omitempty,min=2,max=40" desc:"The town of the branch, e.g. Leeds; every branch when left out."`
	}
	// ReissueArgs are reissue_card's: the account and why. There is no
	// address: a card goes only to the registered one.
	ReissueArgs struct {
		AccountArg
		Reason string `json:"reason" title:"Reason" validate:"required,oneof=lost stolen damaged captured" desc:"Why the card is replaced: lost, stolen, damaged, or captured by a cash machine."`
	}
	// TransferArgs are transfer_funds'.
	TransferArgs struct {
		AccountArg
		ToSortCode string `json:"toSortCode" title:"Sort code" validate:"required,sortcode" desc:"The payee's sort code, e.g. 40-11-62."`
		ToAccount  string `json:"toAccount" title:"Payee account" validate:"required,payeeaccount" desc:"The payee's eight-digit account number."`
		Amount     int64  `json:"amount" title:"Amount" validate:"required,min=1,max=1000000" desc:"The amount in pence, e.g. 12500 for £125.00."`
	}
	// PassphraseArgs are verify_passphrase's: the passphrase as the caller
	// said it, sealed by the front door before the call starts.
	PassphraseArgs struct {
		Passphrase string `json:"passphrase" title:"Passphrase" validate:"required,sealed" desc:"The passphrase exactly as the caller said it. It is sealed before anything records the call."`
	}
	// OneTimeCodeArgs are verify_one_time_code's.
	OneTimeCodeArgs struct {
		Code string `json:"code" title:"One-time code" validate:"required,sealed" desc:"The six-digit code from the caller's Northgate app, as they read it out. It is sealed before anything records the call."`
	}
)

// Tools are the pack's tools, in the order they are offered.
func Tools() []policy.ToolSpec {
	acct := func(s policy.ToolSpec) policy.ToolSpec {
		s.Resource, s.RequiresCredential = ByAccount, true
		if s.Timeout == 0 {
			s.Timeout = defaultTimeout
		}
		return s
	}
	return []policy.ToolSpec{
		{Name: ToolGetBranchHours, Description: "Opening hours of Northgate's branches. Public: it needs no verification.",
			Args: reflect.TypeFor[BranchArgs](), Tier: policy.TierRead, Idempotent: true, Timeout: defaultTimeout, Example: `{"branch":"Leeds"}`,
			Route: policy.Route{Method: "GET", Path: "/v1/branches/hours", Query: map[string]string{"branch": "branch"}}},
		acct(policy.ToolSpec{Name: ToolFreezeCard, Description: "Freeze the caller's card at once (a lost or stolen card). It can be unfrozen; it sends nothing.",
			Args: reflect.TypeFor[AccountArg](), Tier: policy.TierWriteReversible, Timeout: writeTimeout, Example: `{}`,
			Route: policy.Route{Method: "POST", Path: "/v1/accounts/{accountRef}/card/freeze", Body: []string{}, Keyed: true}}),
		acct(policy.ToolSpec{Name: ToolGetBalance, Description: "The balance of the caller's account.",
			Args: reflect.TypeFor[AccountArg](), Tier: policy.TierRead, Idempotent: true, Example: `{}`,
			Route: policy.Route{Method: "GET", Path: "/v1/accounts/{accountRef}/balance"}}),
		acct(policy.ToolSpec{Name: ToolGetRecentBill, Description: "The caller's most recent card bill: the amount, the minimum payment and when it is due.",
			Args: reflect.TypeFor[AccountArg](), Tier: policy.TierRead, Idempotent: true, Example: `{}`,
			Route: policy.Route{Method: "GET", Path: "/v1/accounts/{accountRef}/bill"}}),
		acct(policy.ToolSpec{Name: ToolReissueCard, Description: "Post a replacement card to the caller's registered address. A posted card cannot be recalled, " +
			"so card operations approve it first; it takes no address, and the reference comes back only once it is posted.",
			Args: reflect.TypeFor[ReissueArgs](), Tier: policy.TierIrreversible, DryRun: true, Timeout: writeTimeout, Example: `{"reason":"captured"}`,
			Route: policy.Route{Method: "POST", Path: "/v1/accounts/{accountRef}/reissues", Body: []string{"reason"}, Keyed: true}}),
		acct(policy.ToolSpec{Name: ToolTransferFunds, Description: "Send money from the caller's account to a payee. Card operations approve it first; it cannot be called back.",
			Args: reflect.TypeFor[TransferArgs](), Tier: policy.TierIrreversible, ValueArg: "amount", Timeout: writeTimeout,
			Example: `{"toSortCode":"40-11-62","toAccount":"31926819","amount":12500}`,
			Route:   policy.Route{Method: "POST", Path: "/v1/accounts/{accountRef}/transfers", Body: []string{"toSortCode", "toAccount", "amount"}, Keyed: true}}),
		{Name: ToolVerifyPassphrase, Description: "Check the passphrase the caller says. A match lets the caller hear their balance and bill in this call. " +
			"Pass it exactly as said; never guess, repeat or suggest one. The result says whether it matched, and how many tries are left.",
			Args: reflect.TypeFor[PassphraseArgs](), Tier: policy.TierWriteReversible, RequiresCredential: true, Timeout: defaultTimeout,
			Example:  `{"passphrase":"sealed:sf_00000000000000000000000000000000"}`,
			Verifies: &policy.Factor{Name: FactorPassphrase, Arg: "passphrase", Grants: TierMedium},
			Route:    policy.Route{Method: "POST", Path: "/v1/verify/passphrase", Body: []string{"passphrase"}}},
		{Name: ToolVerifyOneTimeCode, Description: "Check the one-time code from the caller's Northgate app, after their passphrase. " +
			"A match lets card operations be asked for a reissue or a transfer in this call. The result says whether it matched, and how many tries are left.",
			Args: reflect.TypeFor[OneTimeCodeArgs](), Tier: policy.TierWriteReversible, RequiresCredential: true, Timeout: defaultTimeout,
			Example:  `{"code":"sealed:sf_00000000000000000000000000000000"}`,
			Verifies: &policy.Factor{Name: FactorOneTimeCode, Arg: "code", Grants: TierHigh},
			Route:    policy.Route{Method: "POST", Path: "/v1/verify/one-time-code", Body: []string{"code"}}},
	}
}

// Register is the pack's action register: each action's tier, why, and
// decision. A test loops over it; a new row joins those tests the day it
// is added.
var Register = []policy.Row{
	{Tool: ToolGetBranchHours, Verified: TierNone, Decision: policy.DecisionAllow},
	{Tool: ToolFreezeCard, Verified: TierLow, VerifiedWhy: freezeWhy, Decision: policy.DecisionAllow},
	{Tool: ToolGetBalance, Verified: TierMedium, VerifiedWhy: disclosureWhy, Decision: policy.DecisionAllow},
	{Tool: ToolGetRecentBill, Verified: TierMedium, VerifiedWhy: disclosureWhy, Decision: policy.DecisionAllow},
	{Tool: ToolReissueCard, Verified: TierHigh, VerifiedWhy: reissueWhy, Decision: policy.DecisionApprove,
		Approvers: []policy.Approver{{Role: RoleCardOps}}, Limits: []policy.Limit{{Scope: policy.PerResource, Window: policy.Day, MaxCalls: 2}}},
	{Tool: ToolTransferFunds, Verified: TierHigh, VerifiedWhy: transferWhy, Decision: policy.DecisionApprove, HardLimitCents: maxTransferPence,
		Approvers: []policy.Approver{{Role: RoleCardOps}}},
	{Tool: ToolVerifyPassphrase, Verified: TierLow, VerifiedWhy: passphraseWhy, Decision: policy.DecisionAllow},
	{Tool: ToolVerifyOneTimeCode, Verified: TierMedium, VerifiedWhy: oneTimeCodeWhy, Decision: policy.DecisionAllow},
}

// Policy is the Northgate pack's policy.
func Policy() policy.Pack {
	rows := make([]policy.Row, len(Register))
	for i, r := range Register {
		r.Roles = []policy.Role{RoleCaller}
		r.Limits = append(r.Limits, policy.Limit{Scope: policy.PerUser, Window: policy.Hour, MaxCalls: 60})
		rows[i] = r
	}
	return policy.Pack{
		Name:   Name,
		System: "Northgate Bank",
		Roles:  []policy.RoleSpec{{Name: RoleCaller, Label: "Caller"}, {Name: RoleCardOps, Label: "Card operations"}},
		Tools:  Tools(),
		Rows:   rows,
		Evidence: []policy.EvidenceRule{{Tool: ToolReissueCard, ACR: policy.ACRPassword, MaxAge: 8 * time.Hour},
			{Tool: ToolTransferFunds, ACR: policy.ACRPassword, MaxAge: 8 * time.Hour}},
		Formats: []policy.Format{
			{Tag: "accountref", Pattern: AccountRef, Rule: `must be an account reference such as "ACC-20417"`},
			{Tag: "sortcode", Pattern: regexp.MustCompile(`^[0-9]{2}-[0-9]{2}-[0-9]{2}$`), Rule: `must be a sort code such as "40-11-62"`},
			{Tag: "payeeaccount", Pattern: regexp.MustCompile(`^[0-9]{8}$`), Rule: "must be eight digits"},
		},
		Unit:      policy.Unit{Currency: "GBP"},
		Resources: []policy.ResourceKind{{Name: KindAccount, Plural: "bank accounts", Claim: "northgate_accounts", Conceal: true, Example: "ACC-20417"}},
		Verification: &policy.Verification{Tiers: []string{TierNone, TierLow, TierMedium, TierHigh}, SignedIn: TierLow,
			Budget: policy.DefaultVerificationBudget},
	}
}

// Pack is the Northgate pack: its policy and reissue_card's dry run.
func Pack() pack.Pack {
	return pack.Pack{Policy: Policy(), Previewers: map[string]pack.Previewer{ToolReissueCard: PreviewReissue}}
}

// PreviewReissue reads, as the caller, the card a reissue replaces and the
// address the bank has on record, and builds the card the approver sees:
// the card, the registered address, the fee. The action is the args as
// asked: the address is never one of them.
func PreviewReissue(ctx context.Context, req pack.PreviewRequest, sys pack.System) (pack.Preview, error) {
	var args ReissueArgs
	if err := json.Unmarshal(req.Args, &args); err != nil || args.AccountRef == "" {
		return pack.Preview{}, fmt.Errorf("reissue_card's args do not read")
	}
	body, err := sys.Get(ctx, "/v1/accounts/"+url.PathEscape(args.AccountRef)+"/card")
	if err != nil {
		return pack.Preview{}, err
	}
	var card struct {
		Last4      string `json:"last4"`
		State      string `json:"state"`
		Registered string `json:"registeredAddress"`
		FeePence   *int64 `json:"reissueFeePence"`
	}
	if err := json.Unmarshal(body, &card); err != nil || card.Last4 == "" || card.Registered == "" || card.FeePence == nil {
		return pack.Preview{}, pack.Unavailable("the bank's card record does not read")
	}
	return pack.Preview{Action: req.Args, ValueCents: *card.FeePence,
		CardText: fmt.Sprintf("Reissue the card ending %s on %s (%s, card %s). It is posted to the registered address, %s, and cannot be recalled once posted. Fee £%d.%02d.",
			policy.CardValue(card.Last4), args.AccountRef, args.Reason, policy.CardValue(card.State), policy.CardValue(card.Registered), *card.FeePence/100, *card.FeePence%100)}, nil
}
