package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestVersionFlag(t *testing.T) {
	var out, errOut strings.Builder
	if code := run(context.Background(), []string{"-version"}, &out, &errOut); code != 0 {
		t.Fatalf("run(-version) = %d (%s), want 0", code, errOut.String())
	}
	if !strings.HasPrefix(out.String(), "chainproxy ") {
		t.Errorf("run(-version) printed %q, want chainproxy <version>", out.String())
	}
}

func TestMissingToolsRoot(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(cfg, []byte("tools:\n  root: "+filepath.Join(dir, "absent")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("M2_API_KEY", "")
	var out, errOut strings.Builder
	code := run(context.Background(), []string{"-config", cfg, "-addr", "127.0.0.1:0"}, &out, &errOut)
	if code != 2 || !strings.Contains(errOut.String(), "tools.root") {
		t.Errorf("run with a missing tools.root = %d %q, want 2 naming tools.root", code, errOut.String())
	}
}
