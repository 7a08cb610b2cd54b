package config

import (
	"testing"
	"time"
)

func TestParseKeepAlive(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Duration
		wantErr bool
	}{
		{"5m", 5 * time.Minute, false},
		{"300", 300 * time.Second, false},
		{"1.5", 1500 * time.Millisecond, false},
		{"0", 0, false},
		{"0s", 0, false},
		{"-1", -1, false},
		{"-5m", -1, false},
		{"soon", 0, true},
		{"", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseKeepAlive(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseKeepAlive(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestKeepAliveAndCapabilitiesParse(t *testing.T) {
	cfg, err := Parse([]byte("nodes:\n  - {name: OL1, provider: ollama, base_url: http://x, model: m, keep_alive: -1, capabilities: [tools]}\n  - {name: M1, provider: mock, mock: {}}\n  - {name: M2, provider: mock, mock: {}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	n := cfg.Nodes[0]
	if n.KeepAlive != "-1" || len(n.Capabilities) != 1 || n.Capabilities[0] != "tools" {
		t.Errorf("node = keep_alive %q, capabilities %q; want -1, [tools]", n.KeepAlive, n.Capabilities)
	}
}

// FuzzParseKeepAlive: any text either fails or gives -1 (for ever) or a
// duration that is not negative.
func FuzzParseKeepAlive(f *testing.F) {
	for _, s := range []string{"5m", "300", "-1", "0", "1.5", "-0", "1e3", "NaN", "Inf"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseKeepAlive(s)
		if err == nil && d < 0 && d != -1 {
			t.Errorf("ParseKeepAlive(%q) = %v, want -1 or a duration ≥ 0", s, d)
		}
	})
}
