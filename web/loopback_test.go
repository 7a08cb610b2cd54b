package web

import "testing"

// TestLoopbackHost: the names and addresses the Host check accepts as this
// machine, however written.
func TestLoopbackHost(t *testing.T) {
	for host, want := range map[string]bool{
		"127.0.0.1": true, "127.1.2.3": true, "::1": true, "[::1]": true, "::ffff:127.0.0.1": true,
		"localhost": true, "LOCALHOST": true, "localhost.": true, "a.localhost": true, "A.LocalHost": true,
		"10.0.0.1": false, "example.com": false, ".localhost": false, "localhost.example.com": false, "": false,
	} {
		if got := loopbackHost(host); got != want {
			t.Errorf("loopbackHost(%q) = %v, want %v", host, got, want)
		}
	}
}
