package policy

// The internals the external tests (package policy_test) reach.
var ACRRank = acrRank

// IsDecimal reports whether s is n as strconv.FormatInt writes it.
var IsDecimal = isDecimal
