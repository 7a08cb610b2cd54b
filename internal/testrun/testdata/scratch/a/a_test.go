package a

import "testing"

func TestPass(t *testing.T)  { t.Log("hello") }
func TestSkip(t *testing.T)  { t.Log("before"); t.Skip("redis-server not found: install it") }
func TestSkipf(t *testing.T) { t.Skipf("chromium not in PATH\nsecond line") }
func TestSub(t *testing.T) {
	for _, n := range []string{"x", "y"} {
		t.Run(n, func(t *testing.T) { t.Skip("redis-server not found: install it") })
	}
}
func TestFail(t *testing.T) { t.Run("s", func(t *testing.T) { t.Error("boom") }) }
