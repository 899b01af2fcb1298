package approvals

import (
	"crypto/subtle"

	"github.com/toolgate/toolgate/policy"
)

// User is a person who can sign in, with the identity approvals run as.
type User struct {
	policy.Identity
	Name string
}

// Identity is a pluggable source of approvers. The card UI trusts only what
// it returns: an approver's role and stores come from here, never from a form.
type Identity interface {
	// Users lists the people a sign-in page may offer; nil hides the list.
	Users() []User
	// SignIn checks a user's secret and returns who they are.
	SignIn(userID, secret string) (User, bool)
}

// DemoPassword signs in every demo user.
const DemoPassword = "demo"

// DemoIdentity signs in the seed users of docs/contract.md with DemoPassword.
type DemoIdentity struct{}

var demoUsers = []User{
	{Identity: policy.Identity{UserID: "ama", Role: policy.RoleStoreManager, StoreIDs: []int64{112}}, Name: "Ama Mensah"},
	{Identity: policy.Identity{UserID: "efua", Role: policy.RoleStoreManager, StoreIDs: []int64{118}}, Name: "Efua Owusu"},
	{Identity: policy.Identity{UserID: "kofi", Role: policy.RoleAreaManager, StoreIDs: []int64{110, 111, 112, 113, 114, 115, 116, 117, 118, 119, 120, 121}}, Name: "Kofi Boateng"},
	{Identity: policy.Identity{UserID: "yaw", Role: policy.RoleStoreManager, StoreIDs: []int64{131}}, Name: "Yaw Asante"},
}

// Users lists the seed users.
func (DemoIdentity) Users() []User { return demoUsers }

// SignIn accepts a seed user with DemoPassword.
func (DemoIdentity) SignIn(userID, secret string) (User, bool) {
	for _, u := range demoUsers {
		if u.UserID == userID && subtle.ConstantTimeCompare([]byte(secret), []byte(DemoPassword)) == 1 {
			return u, true
		}
	}
	return User{}, false
}
