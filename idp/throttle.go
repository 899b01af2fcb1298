package idp

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// Sign-in throttling: after MaxFailedSignIns wrong passwords for one user
// from one address within ThrottleWindow, or MaxFailedSignInsPerUser from
// anywhere, that user's sign-ins are refused (429) until the window has
// passed since the first of them, even with the right password.
//
// An account's counts live on the account, where no flood of other names can
// crowd them out. Names with no account are counted the same way (so, until
// a flood fills it, the answers do not tell which names exist) in a table of
// at most maxTracked live entries; when it is full, a name it holds no entry
// for is refused rather than an entry forgotten.
const (
	MaxFailedSignIns        = 5
	MaxFailedSignInsPerUser = 20
	ThrottleWindow          = 15 * time.Minute
	maxTracked              = 10_000
)

// failures counts wrong passwords since the first of a window.
type failures struct {
	count int
	since time.Time
}

func (f *failures) live(now time.Time) bool { return f != nil && now.Sub(f.since) < ThrottleWindow }

// add counts one more, starting a new window when the last one has passed.
func (f *failures) add(now time.Time) {
	if !f.live(now) {
		*f = failures{since: now}
	}
	f.count++
}

// passwordFailures are one name's counts: from anywhere, and per address.
// The per-address map holds at most MaxFailedSignInsPerUser live entries:
// once the name's own count reaches it, nothing more is counted.
type passwordFailures struct {
	all  failures
	from map[string]*failures
}

// held reports whether the name may not try a password from ip now.
func (p *passwordFailures) held(ip string, now time.Time) bool {
	if p.all.live(now) && p.all.count >= MaxFailedSignInsPerUser {
		return true
	}
	f := p.from[ip]
	return f.live(now) && f.count >= MaxFailedSignIns
}

// failed counts a wrong password from ip.
func (p *passwordFailures) failed(ip string, now time.Time) {
	if !p.all.live(now) {
		p.from = nil
	}
	p.all.add(now)
	if p.from == nil {
		p.from = map[string]*failures{}
	}
	f := p.from[ip]
	if f == nil {
		f = &failures{}
		p.from[ip] = f
	}
	f.add(now)
}

// throttle counts wrong passwords for names with no account (the demo
// provider is one process; an account's counts are on the account).
type throttle struct {
	mu   sync.Mutex
	seen map[string]*passwordFailures
}

// addressOf is the client's address, the second key of a count.
func addressOf(r *http.Request) string {
	ip, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return ip
}

// room reports whether the table can take another name, after dropping
// every entry whose window has passed when it is full.
func (t *throttle) room(now time.Time) bool {
	if len(t.seen) < maxTracked {
		return true
	}
	for k, p := range t.seen {
		if !p.all.live(now) {
			delete(t.seen, k)
		}
	}
	return len(t.seen) < maxTracked
}

// blocked reports whether a name with no account may not try now: held by
// its counts, or the table is full of live entries and has none for it.
func (t *throttle) blocked(name, ip string, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p := t.seen[name]; p != nil {
		return p.held(ip, now)
	}
	return !t.room(now)
}

// failed counts a wrong password for a name with no account.
func (t *throttle) failed(name, ip string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.seen[name]
	if p == nil {
		if !t.room(now) {
			return
		}
		if t.seen == nil {
			t.seen = map[string]*passwordFailures{}
		}
		p = &passwordFailures{}
		t.seen[name] = p
	}
	p.failed(ip, now)
}
