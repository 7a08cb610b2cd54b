package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestExpandEnv(t *testing.T) {
	t.Setenv("CP_SET", "v")
	t.Setenv("CP_EMPTY", "")
	tests := []struct {
		in, want, err string
	}{
		{in: "a: ${CP_SET}", want: "a: v"},
		{in: "a: ${CP_EMPTY}", want: "a: "},
		{in: "a: ${CP_UNSET_X:-dflt}", want: "a: dflt"},
		{in: "a: ${CP_SET:-dflt}", want: "a: v"},
		{in: "a: $CP_SET", want: "a: $CP_SET"},
		{in: "a: 1\nb: ${CP_UNSET_X}", err: "config:2: ${CP_UNSET_X} is not set"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := expandEnv([]byte(tt.in))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Errorf("expandEnv(%q) error = %v, want %q", tt.in, err, tt.err)
				}
				return
			}
			if err != nil || string(got) != tt.want {
				t.Errorf("expandEnv(%q) = %q, %v, want %q", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestLoadNamesFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(path, []byte("chain:\n  max_total_turns: 0\nstore:\n  redis_url: ${CP_UNSET_Y}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	if err == nil || !strings.Contains(err.Error(), path+":4: ${CP_UNSET_Y} is not set") {
		t.Errorf("Load = %v, want %s:4 naming the unset variable", err, path)
	}
}
