package approvals

import "github.com/toolgate/toolgate/policy"

// User is a signed-in person, with the identity approvals run as. The card
// UI trusts only what the identity provider's ID token says: an approver's
// role and resources come from its claims, never from a form.
type User struct {
	policy.Identity
	Name string
}
