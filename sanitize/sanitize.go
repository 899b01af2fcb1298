// Package sanitize is the one filter every arg and every tool result passes
// before the model, the workflow history, the audit log or a log line sees
// it: secrets and PII are redacted, lists are capped with a cursor, and the
// text is cut on a record boundary, saying what was cut.
package sanitize

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/toolgate/toolgate/sentences"
	"golang.org/x/text/unicode/norm"
)

// Defaults of docs/contract.md.
const (
	DefaultMaxChars = 4000
	DefaultMaxItems = 10
)

// Redacted replaces a secret value.
const Redacted = "[redacted]"

// Sanitizer holds the limits in force. The zero value uses the defaults.
type Sanitizer struct {
	// MaxChars caps the encoded result, in characters (TOOL_MAX_RESULT_CHARS).
	MaxChars int
	// MaxItems caps every list.
	MaxItems int
}

func (s Sanitizer) maxChars() int {
	if s.MaxChars > 0 {
		return s.MaxChars
	}
	return DefaultMaxChars
}

func (s Sanitizer) maxItems() int {
	if s.MaxItems > 0 {
		return s.MaxItems
	}
	return DefaultMaxItems
}

// Key names whose values are secret: a key containing one of secretWords,
// or equal to or ending in one of secretSuffixes (short words that would
// match too much inside other names), once case, '_', '-' and spaces are
// ignored.
var (
	secretWords = []string{"password", "passwd", "passphrase", "secret", "token", "apikey", "accesskey", "authorization",
		"cookie", "privatekey", "credential", "totp", "otpcode"}
	secretSuffixes = []string{"pin", "cvv", "iban", "ssn", "otp", "pwd", "auth", "session", "sessionid", "sid"}
)

func isSecretKey(k string) bool {
	n := strings.ToLower(strings.NewReplacer("_", "", "-", "", " ", "").Replace(normalize(k)))
	for _, s := range secretWords {
		if strings.Contains(n, s) {
			return true
		}
	}
	for _, s := range secretSuffixes {
		if strings.HasSuffix(n, s) {
			return true
		}
	}
	return false
}

// normalize folds compatibility characters (full-width digits and letters,
// the full-width at sign) to their plain forms with NFKC and removes
// invisible format characters (zero-width spaces and joiners, the word
// joiner, soft hyphens, byte-order marks), so patterns see what a reader
// sees.
func normalize(s string) string {
	if isPlainASCII(s) {
		return s
	}
	s = norm.NFKC.String(s)
	return strings.Map(func(r rune) rune {
		if unicode.Is(unicode.Cf, r) {
			return -1
		}
		return r
	}, s)
}

func isPlainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

var (
	bearerRe = regexp.MustCompile(`(?i)bearer\s+[A-Za-z0-9._~+/=-]+`)
	basicRe  = regexp.MustCompile(`(?i)\bbasic\s+[A-Za-z0-9+/=]{8,}`)
	// tokenRe matches the shapes of well-known credentials: toolgate's own
	// upstream tokens, JWTs, OpenAI/Anthropic, Stripe, GitHub, Slack, AWS,
	// Google, GitLab and npm keys, and PEM private keys.
	tokenRe = regexp.MustCompile(`(?:mgv1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+` +
		`|eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*` +
		`|sk-[A-Za-z0-9_-]{16,}` +
		`|(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{10,}` +
		`|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}` +
		`|xox[abposr]-[A-Za-z0-9-]{6,}|https://hooks\.slack\.com/services/[A-Za-z0-9/_-]+` +
		`|(?:AKIA|ASIA)[0-9A-Z]{16}` +
		`|AIza[0-9A-Za-z_-]{30,}` +
		`|glpat-[A-Za-z0-9_-]{16,}` +
		`|npm_[A-Za-z0-9]{30,}` +
		`|-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$))`)
	// urlCredRe matches user:password@ in a URL.
	urlCredRe = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://)[^/\s:@]+:[^/\s@]+@`)
	// namedSecretRe matches "password: x", "pwd=x", "aws_secret_access_key = x" in prose.
	namedSecretRe = regexp.MustCompile(`(?i)(password|passwd|passphrase|pwd|secret[_-]?access[_-]?key|secret|api[_-]?key|access[_-]?token|token)(\s*[:=]\s*)[^\s,;]+`)
	emailRe       = regexp.MustCompile(`[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}`)
	phoneRe       = regexp.MustCompile(`\+?\(?\d[\d\s().-]{7,}\d`)
	cardRe        = regexp.MustCompile(`\b(?:\d[ -]?){12,18}\d\b`)
	dateRe        = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}`)
)

// Text redacts secrets and PII patterns in free text, after normalizing it.
func Text(s string) string {
	s = normalize(s)
	s = tokenRe.ReplaceAllString(s, Redacted)
	s = bearerRe.ReplaceAllString(s, "Bearer "+Redacted)
	s = basicRe.ReplaceAllString(s, "Basic "+Redacted)
	s = urlCredRe.ReplaceAllString(s, "${1}"+Redacted+"@")
	s = namedSecretRe.ReplaceAllString(s, "${1}${2}"+Redacted)
	s = emailRe.ReplaceAllString(s, "[email]")
	s = cardRe.ReplaceAllStringFunc(s, func(m string) string {
		if luhn(m) {
			return "[card]"
		}
		return m
	})
	s = phoneRe.ReplaceAllStringFunc(s, func(m string) string {
		d := digits(m)
		if len(d) >= 9 && len(d) <= 15 && !looksLikeDate(m) {
			return "[phone]"
		}
		return m
	})
	return s
}

func digits(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	return b.String()
}

func looksLikeDate(s string) bool {
	return dateRe.MatchString(strings.TrimSpace(s))
}

func luhn(s string) bool {
	d := digits(s)
	if len(d) < 13 {
		return false
	}
	sum := 0
	for i := 0; i < len(d); i++ {
		n := int(d[len(d)-1-i] - '0')
		if i%2 == 1 {
			n *= 2
			if n > 9 {
				n -= 9
			}
		}
		sum += n
	}
	return sum%10 == 0
}

// redact walks a decoded JSON value, redacting the values of secret keys,
// secrets and PII in keys themselves, and text patterns.
func redact(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for _, k := range sortedKeys(t) {
			x := t[k]
			if isSecretKey(k) {
				x = Redacted
			} else {
				x = redact(x)
			}
			key := Text(k)
			for n := 2; ; n++ {
				if _, taken := out[key]; !taken {
					break
				}
				key = fmt.Sprintf("%s (%d)", Text(k), n)
			}
			out[key] = x
		}
		return out
	case []any:
		for i := range t {
			t[i] = redact(t[i])
		}
		return t
	case string:
		return Text(t)
	}
	return v
}

// Args redacts a call's arguments for the audit log and logs. Args are not
// cut: the audit row must show what ran; the decoder already bounds their size.
func (s Sanitizer) Args(raw json.RawMessage) json.RawMessage {
	v, err := decode(raw)
	if err != nil {
		return quoteNote("arguments were not valid JSON and are not shown")
	}
	return encode(redact(v))
}

// Result redacts, caps lists and cuts a tool result to fit MaxChars. A page
// shaped {"items": [...], "offset": n} gets a nextCursor that resumes at the
// first item not shown.
func (s Sanitizer) Result(raw json.RawMessage) json.RawMessage {
	v, err := decode(raw)
	if err != nil {
		return quoteNote("the tool returned something that is not JSON; it is not shown")
	}
	v = redact(v)
	v = s.capLists(v)
	out := encode(v)
	if s.fits(out) {
		return out
	}
	if page, ok := v.(map[string]any); ok {
		if items, ok := page["items"].([]any); ok && len(items) > 0 {
			out = s.cutPage(page, items)
			if s.fits(out) {
				return out
			}
			v = page
		}
	}
	for range 64 {
		if !shortenLongest(v) {
			break
		}
		out = encode(v)
		if s.fits(out) {
			return out
		}
	}
	return quoteNote(fmt.Sprintf("the result was longer than %d characters and could not be cut on a record boundary; ask for less (a narrower query or one record)", s.maxChars()))
}

func (s Sanitizer) fits(b []byte) bool { return utf8.RuneCount(b) <= s.maxChars() }

// capLists keeps the first MaxItems of every list and says so beside it.
func (s Sanitizer) capLists(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for _, k := range sortedKeys(t) {
			list, ok := t[k].([]any)
			if !ok {
				t[k] = s.capLists(t[k])
				continue
			}
			for i := range list {
				list[i] = s.capLists(list[i])
			}
			if len(list) > s.maxItems() {
				kept := list[:s.maxItems()]
				t[k] = kept
				if k == "items" {
					if _, isPage := t["offset"]; isPage {
						next := offsetOf(t) + len(kept)
						t["nextCursor"] = strconv.Itoa(next)
						t["note"] = sentences.Say(sentences.PageNote, len(kept), len(list), strconv.Itoa(next))
						continue
					}
				}
				t[k+"Note"] = fmt.Sprintf("Showing the first %d of %d.", len(kept), len(list))
			}
		}
	case []any:
		for i := range t {
			t[i] = s.capLists(t[i])
		}
		if len(t) > s.maxItems() {
			return append(t[:s.maxItems():s.maxItems()], fmt.Sprintf("… %d more not shown", len(t)-s.maxItems()))
		}
	}
	return v
}

// cutPage drops whole items from the end until the page fits.
func (s Sanitizer) cutPage(page map[string]any, items []any) []byte {
	total := len(items)
	_, isPage := page["offset"]
	oldNext, hadNext := page["nextCursor"]
	var out []byte
	for keep := len(items) - 1; keep >= 1; keep-- {
		page["items"] = items[:keep]
		if isPage {
			next := offsetOf(page) + keep
			page["nextCursor"] = strconv.Itoa(next)
			page["note"] = sentences.Say(sentences.CutPageNote, s.maxChars(), keep, total, strconv.Itoa(next))
		} else {
			page["note"] = sentences.Say(sentences.CutNote, s.maxChars(), keep, total)
		}
		out = encode(page)
		if s.fits(out) {
			return out
		}
	}
	page["items"] = items[:1]
	if hadNext && !isPage {
		page["nextCursor"] = oldNext
	}
	return encode(page)
}

func offsetOf(page map[string]any) int {
	switch o := page["offset"].(type) {
	case json.Number:
		n, _ := o.Int64()
		return int(n)
	case float64:
		return int(o)
	}
	return 0
}

// shortenLongest halves the longest string, cutting at a sentence or word
// boundary and saying how much was cut. It reports false when nothing is long.
func shortenLongest(v any) bool {
	var best *string
	var set func(string)
	var walk func(any)
	walk = func(x any) {
		switch t := x.(type) {
		case map[string]any:
			for _, k := range sortedKeys(t) {
				if s, ok := t[k].(string); ok {
					if best == nil || utf8.RuneCountInString(s) > utf8.RuneCountInString(*best) {
						s := s
						best = &s
						set = func(n string) { t[k] = n }
					}
					continue
				}
				walk(t[k])
			}
		case []any:
			for i := range t {
				if s, ok := t[i].(string); ok {
					if best == nil || utf8.RuneCountInString(s) > utf8.RuneCountInString(*best) {
						s, i := s, i
						best = &s
						set = func(n string) { t[i] = n }
					}
					continue
				}
				walk(t[i])
			}
		}
	}
	walk(v)
	if best == nil || utf8.RuneCountInString(*best) < 80 {
		return false
	}
	r := []rune(*best)
	cut := len(r) / 2
	text := string(r[:cut])
	if i := strings.LastIndexAny(text, ".!?\n"); i > len(text)/2 {
		text = text[:i+1]
	} else if i := strings.LastIndex(text, " "); i > len(text)/2 {
		text = text[:i]
	}
	set(fmt.Sprintf("%s … [cut %d characters]", text, len(r)-utf8.RuneCountInString(text)))
	return true
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func decode(raw json.RawMessage) (any, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return map[string]any{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

func encode(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return quoteNote("the value could not be encoded")
	}
	return bytes.TrimRight(buf.Bytes(), "\n")
}

func quoteNote(note string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{"note": note})
	return b
}
