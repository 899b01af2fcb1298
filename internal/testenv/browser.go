package testenv

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Chromium is the browser the tests drive: $CHROMIUM, else the first
// Chromium on PATH. Without one a test fails under
// TOOLGATE_REQUIRE_SERVICES=1 and is skipped otherwise.
func Chromium(t *testing.T) string {
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if Required() {
		t.Fatal("TOOLGATE_REQUIRE_SERVICES=1 but no Chromium is installed (make browser installs Debian's)")
	}
	t.Skip("skipped: no Chromium (set TOOLGATE_REQUIRE_SERVICES=1 to fail instead)")
	return ""
}

// Browser is one headless Chromium with its own profile, so its cookies
// are its own, at a phone-sized viewport; every step in it has 90 seconds.
func Browser(t *testing.T) context.Context {
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(Chromium(t)),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.WindowSize(390, 844),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// The first run starts the browser and must not carry a timeout.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	limited, cancelLimit := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(cancelLimit)
	return limited
}
