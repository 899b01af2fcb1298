package idp

import (
	"bytes"
	"crypto/rand"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
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

// seed is the demo pack's approvers (docs/contract.md).
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
	// PlanCover's members (packs/plancover): meera holds her family's
	// and her parents' portals, ravi his own.
	{ID: "meera", Name: "Meera Iyer", Role: "member", Claims: map[string]any{"plancover_portals": []string{"PRT-40122", "PRT-40123"}, "plancover_company": []string{"ACME"}}},
	{ID: "ravi", Name: "Ravi Kumar", Role: "member", Claims: map[string]any{"plancover_portals": []string{"PRT-50017"}}},
	// Northgate Bank's callers (packs/northgate), one account each, and
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
	users := slices.Clone(seed)
	for i := range users {
		users[i].Stores = slices.Clone(users[i].Stores)
		users[i].Claims = maps.Clone(users[i].Claims)
		if err := users[i].withSecrets(); err != nil {
			return nil, err
		}
	}
	return users, nil
}

// withSecrets gives the user a random password and TOTP secret where they
// have none.
func (u *User) withSecrets() error {
	if u.Password == "" {
		u.Password = rand.Text()[:12]
	}
	if u.TOTPSecret == "" {
		key, err := totp.Generate(totp.GenerateOpts{Issuer: "toolgate demo", AccountName: u.ID, Rand: rand.Reader})
		if err != nil {
			return fmt.Errorf("TOTP secret for %s: %w", u.ID, err)
		}
		u.TOTPSecret = key.Secret()
	}
	return nil
}

// userID is what a user ID may hold: it is typed at the sign-in form and
// named in commands.
var userID = regexp.MustCompile(`^[a-z][a-z0-9._-]{0,31}$`)

// check says what a user lacks; a new person's ID must also be one
// userID allows (a users file's own may be any the operator wrote).
func (u User) check(path string, person bool) error {
	if u.ID == "" || person && !userID.MatchString(u.ID) {
		return fmt.Errorf("%s: user ID %q: use 1 to 32 lowercase letters, digits, '.', '_' or '-', starting with a letter", path, u.ID)
	}
	if u.Role == "" {
		return fmt.Errorf("%s: user %q needs a role (the pack's role name, e.g. member)", path, u.ID)
	}
	return nil
}

// LoadOrCreateUsers reads the users file, or writes one with DemoUsers
// (mode 0600) when it does not exist. A user the file lists without a
// password or TOTP secret is given random ones, written back. created says
// whether the file was made.
func LoadOrCreateUsers(path string) (users []User, created bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		if users, err = DemoUsers(); err != nil {
			return nil, false, err
		}
		return users, true, writeUsers(path, users)
	}
	if err != nil {
		return nil, false, fmt.Errorf("read %s: %w", path, err)
	}
	if err := json.Unmarshal(b, &users); err != nil {
		return nil, false, fmt.Errorf("%s: want a JSON list of users (id, name, role, stores, claims; password and totpSecret are made when missing): %w", path, err)
	}
	filled := false
	for i := range users {
		if err := users[i].check(path, false); err != nil {
			return nil, false, err
		}
		if users[i].Password == "" || users[i].TOTPSecret == "" {
			if err := users[i].withSecrets(); err != nil {
				return nil, false, err
			}
			filled = true
		}
	}
	if filled {
		return users, false, writeUsers(path, users)
	}
	return users, false, nil
}

// writeUsers replaces the users file whole, readable by its owner alone
// whatever the mode of the file it replaces (it holds passwords and TOTP
// secrets), and never half-written.
func writeUsers(path string, users []User) error {
	b, _ := json.MarshalIndent(users, "", "  ")
	tmp, err := os.CreateTemp(filepath.Dir(path), ".idp-users-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // made 0600 by CreateTemp
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// AddUsers adds the people of a people file (a JSON list of users: id,
// name, role and a pack's resource claims, or stores; no secrets) to the
// users file at path, made with DemoUsers when missing. A person already
// there keeps their password and TOTP secret and takes the file's name,
// role, stores and claims; a new one gets random ones. Every auditor in
// the users file is granted what the people hold (each claim's values,
// each store), so the insights page shows their calls. It returns the
// people as written, with their secrets.
func AddUsers(path, peopleFile string) ([]User, error) {
	b, err := os.ReadFile(peopleFile)
	if err != nil {
		return nil, fmt.Errorf("people: %w", err)
	}
	var people []User
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&people); err != nil {
		return nil, fmt.Errorf("%s: want a JSON list of people, e.g. [{\"id\": \"hana\", \"name\": \"Hana Sato\", \"role\": \"member\", \"claims\": {\"mine_accounts\": [\"A-1\"]}}]: %w", peopleFile, err)
	}
	users, _, err := LoadOrCreateUsers(path)
	if err != nil {
		return nil, err
	}
	var added []User
	for _, p := range people {
		if err := p.check(peopleFile, true); err != nil {
			return nil, err
		}
		if p.Password != "" || p.TOTPSecret != "" {
			return nil, fmt.Errorf("%s: %s: leave password and totpSecret out; they are made at random and printed", peopleFile, p.ID)
		}
		if p.Role == auditorRole {
			return nil, fmt.Errorf("%s: %s: an auditor is granted every person's resources here; add auditors to %s itself", peopleFile, p.ID, path)
		}
		if i := slices.IndexFunc(users, func(u User) bool { return u.ID == p.ID }); i >= 0 {
			if users[i].Role == auditorRole {
				return nil, fmt.Errorf("%s: %s is an auditor in %s; name your people with IDs of their own", peopleFile, p.ID, path)
			}
			p.Password, p.TOTPSecret = users[i].Password, users[i].TOTPSecret
			users[i] = p
		} else {
			if err := p.withSecrets(); err != nil {
				return nil, err
			}
			users = append(users, p)
		}
		added = append(added, p)
	}
	for i := range users {
		if users[i].Role == auditorRole {
			for _, p := range added {
				users[i].grant(p)
			}
		}
	}
	return added, writeUsers(path, users)
}

// auditorRole is the card UI's auditor, who reads the insights page over
// the resources they hold.
const auditorRole = "auditor"

// grant adds what p holds to u's stores and claims.
func (u *User) grant(p User) {
	for _, s := range p.Stores {
		if !slices.Contains(u.Stores, s) {
			u.Stores = append(u.Stores, s)
		}
	}
	for claim, v := range p.Claims {
		values, ok := v.([]any)
		if !ok {
			continue
		}
		if u.Claims == nil {
			u.Claims = map[string]any{}
		}
		held, _ := u.Claims[claim].([]any)
		if list, ok := u.Claims[claim].([]string); ok {
			for _, s := range list {
				held = append(held, s)
			}
		}
		for _, x := range values {
			switch x.(type) {
			case string, float64, bool: // comparable: an ID
			default:
				continue
			}
			if !slices.Contains(held, x) {
				held = append(held, x)
			}
		}
		u.Claims[claim] = held
	}
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
