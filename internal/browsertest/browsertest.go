// Package browsertest starts the headless Chromium of the browser tests
// (the cockpit's in web, the eval report's in eval): found on PATH,
// skipped without it unless CI is set, started with the flags this
// machine's closed network needs. It exists so both packages start the
// browser the same way.
package browsertest

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/chromedp/chromedp"
)

// Chromium returns the path of chromium, or skips the test (fails when CI
// is set) when it is not installed; what names the tests, for the message.
func Chromium(t testing.TB, what string) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("chromium not found in PATH: CI must install Debian's chromium package for %s", what)
	}
	t.Skipf("skipping %s: chromium not found in PATH (apt-get install chromium)", what)
	return ""
}

// New starts chromium headless with a fresh profile and a window of width
// × height, and returns a chromedp context ended at the test's cleanup.
// Background networking, component updates, sync and QUIC are off: the
// machine's closed network refuses their connections.
func New(t testing.TB, chromium string, width, height int) context.Context {
	t.Helper()
	profile := t.TempDir()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("mute-audio", true),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(width, height),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	// Registered after TempDir: runs first, so the profile is free to go.
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium %s: %v", chromium, err)
	}
	return ctx
}
