package config

import (
	"path/filepath"
	"testing"
)

// TestExamplesLoad: every configuration in examples/ loads as written, with
// the environment variables its comments ask for.
func TestExamplesLoad(t *testing.T) {
	t.Setenv("M2_API_KEY", "sk-example")
	t.Setenv("CHAINPROXY_KEY", "example-key")
	files, err := filepath.Glob("../examples/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 4 {
		t.Fatalf("examples/*.yaml = %d files, want at least 4", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			if _, err := Load(f); err != nil {
				t.Errorf("Load(%s) = %v", f, err)
			}
		})
	}
}
