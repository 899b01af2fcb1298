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
const (
	MaxFailedSignIns        = 5
	MaxFailedSignInsPerUser = 20
	ThrottleWindow          = 15 * time.Minute
	maxTracked              = 10_000
)

type failures struct {
	count int
	since time.Time
}

// throttle counts failed passwords in memory (the demo provider is one
// process).
type throttle struct {
	mu   sync.Mutex
	seen map[string]*failures
}

// keys are the user's count and the user-and-address count.
func keys(r *http.Request, user string) [2]string {
	ip, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		ip = r.RemoteAddr
	}
	return [2]string{"user\x00" + user, "pair\x00" + user + "\x00" + ip}
}

// blocked reports whether the user may not try to sign in now.
func (t *throttle) blocked(r *http.Request, user string, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := keys(r, user)
	return t.over(k[0], MaxFailedSignInsPerUser, now) || t.over(k[1], MaxFailedSignIns, now)
}

func (t *throttle) over(key string, limit int, now time.Time) bool {
	f := t.seen[key]
	if f == nil {
		return false
	}
	if now.Sub(f.since) >= ThrottleWindow {
		delete(t.seen, key)
		return false
	}
	return f.count >= limit
}

// failed counts a wrong password.
func (t *throttle) failed(r *http.Request, user string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.seen == nil {
		t.seen = map[string]*failures{}
	}
	if len(t.seen) >= maxTracked {
		for k, f := range t.seen {
			if now.Sub(f.since) >= ThrottleWindow {
				delete(t.seen, k)
			}
		}
	}
	for _, k := range keys(r, user) {
		f := t.seen[k]
		if f == nil || now.Sub(f.since) >= ThrottleWindow {
			if len(t.seen) >= maxTracked {
				continue // full of live entries: the per-user count still holds for known users
			}
			f = &failures{since: now}
			t.seen[k] = f
		}
		f.count++
	}
}
