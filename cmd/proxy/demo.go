package main

import (
	_ "embed"
	"fmt"
	"os"
	"path/filepath"

	"chainproxy/config"
)

//go:embed demo.yaml
var demoYAML []byte

// demoConfig is the configuration of -demo: scripted mock nodes, over which
// a -config file may still set anything, and replace demo nodes by name
// (say, to point M1 at a real server).
func demoConfig(path string) (*config.Config, error) {
	base, err := config.Parse(demoYAML)
	if err != nil {
		return nil, fmt.Errorf("demo config: %w", err)
	}
	if path == "" {
		return base, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return config.ParseOver(base, data)
}

// demoWorkspace writes the small workspace the demo's tools read.
func demoWorkspace() (string, error) {
	dir, err := os.MkdirTemp("", "chainproxy-demo-")
	if err != nil {
		return "", err
	}
	files := map[string]string{
		"notes.md":        "# Notes\n\nGoals: ship the reflexive chain proxy.\nRisks:\n1. small models loop on tools\n2. no rollback of a bad deploy\n",
		"plan.md":         "# Plan\n\n1. anti-loop guards\n2. three-stage chain\n3. cockpit\n",
		"data/usage.csv":  "day,requests\nmon,120\ntue,180\n",
		"data/README.txt": "Sample data for the demo.\n",
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			return "", err
		}
	}
	return dir, nil
}
