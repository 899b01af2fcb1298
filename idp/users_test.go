package idp

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestAPacksPeopleJoinTheDemoUsers: a people file names a pack's people by
// role and claims, without secrets; each is made with a random password
// and TOTP secret, a second add keeps them, and the auditor is granted what
// they hold so the insights page shows their calls.
func TestAPacksPeopleJoinTheDemoUsers(t *testing.T) {
	dir := t.TempDir()
	users, people := filepath.Join(dir, "idp-users.json"), filepath.Join(dir, "people.json")
	write := func(body string) {
		if err := os.WriteFile(people, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(`[{"id": "hana", "name": "Hana Sato", "role": "agent", "claims": {"helpdesk_queues": ["Q-1", "Q-2"]}},
		{"id": "ivo", "name": "Ivo Petrov", "role": "lead", "claims": {"helpdesk_queues": ["Q-2"]}}]`)
	added, err := AddUsers(users, people)
	if err != nil {
		t.Fatal(err)
	}
	if len(added) != 2 || added[0].Password == "" || added[0].TOTPSecret == "" || added[0].Password == added[1].Password {
		t.Fatalf("added %+v", added)
	}
	all, created, err := LoadOrCreateUsers(users)
	if err != nil || created {
		t.Fatalf("load: %v %v", err, created)
	}
	byID := map[string]User{}
	for _, u := range all {
		byID[u.ID] = u
	}
	if byID["hana"].Password != added[0].Password || byID["ama"].Password == "" {
		t.Fatalf("the users file lost someone: %+v", all)
	}
	queues, _ := byID["abena"].Claims["helpdesk_queues"].([]any)
	if !slices.Equal(queues, []any{"Q-1", "Q-2"}) || len(byID["abena"].Claims["carddesk_accounts"].([]any)) != 3 {
		t.Fatalf("the auditor holds %v", byID["abena"].Claims)
	}

	// Again, with hana's role changed: she keeps her secrets.
	write(`[{"id": "hana", "name": "Hana Sato", "role": "lead", "claims": {"helpdesk_queues": ["Q-1"]}}]`)
	again, err := AddUsers(users, people)
	if err != nil || again[0].Password != added[0].Password || again[0].TOTPSecret != added[0].TOTPSecret || again[0].Role != "lead" {
		t.Fatalf("added again: %+v %v", again, err)
	}

	for body, want := range map[string]string{
		`[{"id": "Hana!", "role": "agent"}]`:                 "user ID",
		`[{"id": "hana", "name": "Hana"}]`:                   "needs a role",
		`[{"id": "hana", "role": "agent", "password": "x"}]`: "leave password and totpSecret out",
		`[{"id": "hana", "role": "agent", "claim": {}}]`:     "unknown field",
		`[{"id": "hana", "role": "auditor"}]`:                "add auditors to",
		`{"id": "hana", "role": "agent"}`:                    "want a JSON list of people",
		`[{"id": "abena", "role": "member"}]`:                "is an auditor in",
	} {
		write(body)
		if _, err := AddUsers(users, people); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("people %s: %v, want %q", body, err, want)
		}
	}
}

// TestAUserListedWithoutSecretsIsGivenThem: a user added to the users file
// by hand with an ID and a role signs in with a password and TOTP secret
// made for them and written back.
func TestAUserListedWithoutSecretsIsGivenThem(t *testing.T) {
	path := filepath.Join(t.TempDir(), "idp-users.json")
	// Written by hand where anyone may read it: the secrets made for hana
	// are not.
	if err := os.WriteFile(path, []byte(`[{"id": "hana", "role": "agent", "claims": {"helpdesk_queues": ["Q-1"]}}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	users, _, err := LoadOrCreateUsers(path)
	if err != nil || len(users) != 1 || users[0].Password == "" || users[0].TOTPSecret == "" {
		t.Fatalf("%+v %v", users, err)
	}
	if info, err := os.Stat(path); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("the users file, with secrets, is %v (%v)", info.Mode(), err)
	}
	b, _ := os.ReadFile(path)
	var written []User
	if err := json.Unmarshal(b, &written); err != nil || written[0].Password != users[0].Password {
		t.Fatalf("not written back: %s", b)
	}
	if err := os.WriteFile(path, []byte(`[{"id": "hana"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadOrCreateUsers(path); err == nil || !strings.Contains(err.Error(), "needs a role") {
		t.Fatalf("a user with no role: %v", err)
	}
}
