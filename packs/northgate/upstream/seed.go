package upstream

// The demo callers: dana holds one account, lewis another.
const (
	Dana  = "dana"
	Lewis = "lewis"
)

// Their accounts.
const (
	DanaAccount  = "ACC-20417"
	LewisAccount = "ACC-31108"
)

// The demo factors. The passphrases are the bank's, never toolgate's;
// the one-time codes come from each caller's app (Code).
const (
	DanaPassphrase  = "harbour lights"
	LewisPassphrase = "copper kettle"
	// DanaAddress is where dana's cards go: the only address a reissue
	// can reach.
	DanaAddress = "12 Harbour Row, Leeds LS1 4AB"
)

// The demo apps' TOTP secrets (base32), fixed so that make dev's callers
// can be read a code (bin/northgate code dana).
const (
	danaSecret  = "JBSWY3DPEHPK3PXPNORTHGATEDANA234"
	lewisSecret = "JBSWY3DPEHPK3PXPNORTHGATELEWIS23"
)

var branches = [][2]string{{"Leeds", "Mon-Fri 09:00-17:00, Sat 09:00-12:30"}, {"York", "Mon-Fri 09:30-16:30"}, {"Hull", "Tue-Sat 10:00-16:00"}}

func seed() *Server {
	return &Server{
		customers: map[string]Customer{
			Dana:  {User: Dana, Passphrase: DanaPassphrase, TOTPSecret: danaSecret, Accounts: []string{DanaAccount}},
			Lewis: {User: Lewis, Passphrase: LewisPassphrase, TOTPSecret: lewisSecret, Accounts: []string{LewisAccount}},
		},
		accounts: map[string]*Account{
			DanaAccount: {Ref: DanaAccount, Holder: Dana, Balance: 184233, Bill: Bill{AmountPence: 41250, MinimumPence: 2500, Due: "2026-12-18"},
				Last4: "4471", CardState: "active", Registered: DanaAddress},
			LewisAccount: {Ref: LewisAccount, Holder: Lewis, Balance: 9120, Bill: Bill{AmountPence: 12011, MinimumPence: 2500, Due: "2026-12-22"},
				Last4: "0926", CardState: "active", Registered: "3 Mill Lane, York YO1 7HH"},
		},
		reissues:  map[string]string{},
		transfers: map[string]string{},
	}
}

// Demo is the bank's seed, with no token check: for reading a demo
// caller's one-time code, never for serving.
func Demo() *Server { return seed() }
