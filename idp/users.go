package idp

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"
)

// User is one person the provider can sign in.
type User struct {
	ID       string  `json:"id"`
	Name     string  `json:"name"`
	Password string  `json:"password"`
	Role     string  `json:"role"`
	Stores   []int64 `json:"stores"`
	// Claims are more claims the provider puts in the person's tokens,
	// e.g. {"carddesk_accounts": ["ACC-4471"]}: how a pack's resources
	// reach a sign-in.
	Claims map[string]any `json:"claims,omitempty"`
	// TOTPSecret is the base32 secret of the person's authenticator app.
	TOTPSecret string `json:"totpSecret"`
}

// MaxFactorFailures is how many wrong second factors in a row lock an
// account. A locked account signs in and steps up no more, even with the
// right code, until an operator unlocks it.
const MaxFactorFailures = 5

// seed is the demo domain's approvers (docs/contract.md).
var seed = []User{
	{ID: "ama", Name: "Ama Mensah", Role: "store_manager", Stores: []int64{112}},
	{ID: "efua", Name: "Efua Owusu", Role: "store_manager", Stores: []int64{118}},
	{ID: "kofi", Name: "Kofi Boateng", Role: "area_manager", Stores: []int64{110, 111, 112, 113, 114, 115, 116, 117, 118, 119, 120, 121}},
	{ID: "yaw", Name: "Yaw Asante", Role: "store_manager", Stores: []int64{131}},
	// A second area manager: transfers above $1,500.00 need two.
	{ID: "adwoa", Name: "Adwoa Darko", Role: "area_manager", Stores: []int64{110, 111, 112, 113, 114, 115, 116, 117, 118, 119, 120, 121}},
	// The auditor reads the insights page for the area, the card desk's
	// accounts, PlanCover's portals and Northgate's accounts; she decides
	// nothing.
	{ID: "abena", Name: "Abena Ofori", Role: "auditor", Stores: []int64{110, 111, 112, 113, 114, 115, 116, 117, 118, 119, 120, 121},
		Claims: map[string]any{"carddesk_accounts": []string{"ACC-4471", "ACC-5120", "ACC-9999"}, "plancover_portals": []string{"PRT-40122", "PRT-40123", "PRT-50017"},
			"northgate_accounts": []string{"ACC-20417", "ACC-31108"}}},
	// The card desk of examples/packs/carddesk.yaml: an agent and a
	// supervisor over two accounts, granted by the pack's own claim.
	{ID: "cara", Name: "Cara Doyle", Role: "card_agent", Claims: map[string]any{"carddesk_accounts": []string{"ACC-4471", "ACC-5120"}}},
	{ID: "sam", Name: "Sam Okafor", Role: "card_supervisor", Claims: map[string]any{"carddesk_accounts": []string{"ACC-4471", "ACC-5120"}}},
	// PlanCover's members (domains/plancover): meera holds her family's
	// and her parents' portals, ravi his own.
	{ID: "meera", Name: "Meera Iyer", Role: "member", Claims: map[string]any{"plancover_portals": []string{"PRT-40122", "PRT-40123"}, "plancover_company": []string{"ACME"}}},
	{ID: "ravi", Name: "Ravi Kumar", Role: "member", Claims: map[string]any{"plancover_portals": []string{"PRT-50017"}}},
	// Northgate Bank's callers (domains/northgate), one account each, and
	// card operations, who approve reissues and transfers on both.
	{ID: "dana", Name: "Dana Whitfield", Role: "caller", Claims: map[string]any{"northgate_accounts": []string{"ACC-20417"}}},
	{ID: "lewis", Name: "Lewis Pryce", Role: "caller", Claims: map[string]any{"northgate_accounts": []string{"ACC-31108"}}},
	{ID: "imogen", Name: "Imogen Hale", Role: "card_ops", Claims: map[string]any{"northgate_accounts": []string{"ACC-20417", "ACC-31108"}}},
	// The MCP reference servers (examples/packs/reference.yaml): a writer
	// whose writes and deletes wait for a keeper.
	{ID: "noor", Name: "Noor Haddad", Role: "writer"},
	{ID: "tomas", Name: "Tomas Reyes", Role: "keeper"},
}

// DemoUsers returns the seed users with fresh random passwords and TOTP
// secrets.
func DemoUsers() ([]User, error) {
	users := make([]User, len(seed))
	for i, u := range seed {
		key, err := totp.Generate(totp.GenerateOpts{Issuer: "toolgate demo", AccountName: u.ID, Rand: rand.Reader})
		if err != nil {
			return nil, fmt.Errorf("TOTP secret for %s: %w", u.ID, err)
		}
		u.Password = rand.Text()[:12]
		u.TOTPSecret = key.Secret()
		users[i] = u
	}
	return users, nil
}

// LoadOrCreateUsers reads the users file, or writes one with DemoUsers
// (mode 0600) when it does not exist. created says which.
func LoadOrCreateUsers(path string) (users []User, created bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		if users, err = DemoUsers(); err != nil {
			return nil, false, err
		}
		b, _ = json.MarshalIndent(users, "", "  ")
		if err := os.WriteFile(path, append(b, '\n'), 0o600); err != nil {
			return nil, false, fmt.Errorf("write %s: %w", path, err)
		}
		return users, true, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read %s: %w", path, err)
	}
	if err := json.Unmarshal(b, &users); err != nil {
		return nil, false, fmt.Errorf("%s: want a JSON list of users (id, name, password, role, stores, totpSecret): %w", path, err)
	}
	for _, u := range users {
		if u.ID == "" || u.Password == "" || u.TOTPSecret == "" || u.Role == "" {
			return nil, false, fmt.Errorf("%s: user %q needs an id, a password, a role and a totpSecret", path, u.ID)
		}
	}
	return users, false, nil
}

// OTPAuthURL is the otpauth:// URL an authenticator app reads (as a QR
// code, or typed in) to add the user's TOTP secret.
func (u User) OTPAuthURL(issuer string) string {
	k, err := otp.NewKeyFromURL(fmt.Sprintf("otpauth://totp/%s:%s?secret=%s&issuer=%s", issuer, u.ID, u.TOTPSecret, issuer))
	if err != nil {
		return ""
	}
	return k.URL()
}

// account is a user's sign-in state at the provider.
type account struct {
	User
	failures int
	locked   bool
	// passwords counts wrong passwords for the throttle, on the account so
	// that no flood of other names crowds it out.
	passwords passwordFailures
	// lastStep is the TOTP time step of the last code accepted: a code is
	// good once.
	lastStep uint64
}

func (a *account) passwordOK(pw string) bool {
	return subtle.ConstantTimeCompare([]byte(pw), []byte(a.Password)) == 1
}

// checkCode validates a TOTP code at now, allowing one step of clock drift
// either way, and refuses a code (or an earlier one) already used.
func (a *account) checkCode(code string, now time.Time) bool {
	if len(code) != 6 {
		return false
	}
	step := uint64(now.Unix() / 30)
	for _, s := range []uint64{step - 1, step, step + 1} {
		want, err := totp.GenerateCodeCustom(a.TOTPSecret, time.Unix(int64(s)*30, 0), totp.ValidateOpts{Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1, Period: 30})
		if err == nil && subtle.ConstantTimeCompare([]byte(code), []byte(want)) == 1 && s > a.lastStep {
			a.lastStep = s
			return true
		}
	}
	return false
}
