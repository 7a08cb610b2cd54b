package main

import (
	_ "embed"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"chainproxy/chain"
	"chainproxy/config"
)

//go:embed demo.yaml
var demoYAML []byte

// demoScenario is one story the -demo models tell: the word in the
// question that picks it, what it shows, and the status the chain ends
// with (the traces view's status).
type demoScenario struct {
	Word, Shows, Status string
	// ClientTool is the tool the client must offer for the story.
	ClientTool string
}

// demoScenarios are the demo's stories, as the startup banner and the
// cockpit's empty state list them (web/static/index.html; a test keeps the
// three in step with demo.yaml).
var demoScenarios = []demoScenario{
	{Word: "loop", Shows: "a small model repeating list_dir — watch the guard stop it", Status: chain.StageStoppedRepeat},
	{Word: "format", Shows: "tools that do not exist, then arguments that are not JSON — stopped after three format errors", Status: chain.StageStoppedFormatErrors},
	{Word: "chant", Shows: "the reviewer repeats one sentence — the stream is cut, the answer marked degenerate", Status: chain.StageDegenerate},
	{Word: "echo", Shows: "the reviewer hands back the synthesis word for word — degenerate, the synthesis answers", Status: chain.StageDegenerate},
	{Word: "weather", Shows: "the chain calls the client's get_weather tool — it waits for the client, then resumes", Status: chain.StageAwaitingClient, ClientTool: "get_weather"},
	{Word: "script", Shows: "model text holding <script> — shown as text, never run", Status: chain.StageOK},
}

// demoBanner tells a newcomer what to try, at startup.
func demoBanner(w io.Writer, addr string) {
	fmt.Fprintf(w, "\ndemo: scripted models, no model server. A word in a reflexive question picks a story\n(watch each one at http://%s/#/traces):\n", addr)
	for _, s := range demoScenarios {
		fmt.Fprintf(w, "  %-8s %s → %s\n", s.Word, s.Shows, s.Status)
	}
	fmt.Fprintf(w, "  try: curl -s http://%s/v1/chat/completions -H 'Content-Type: application/json' \\\n"+
		"         -d '{\"model\":\"chain/reflexive\",\"messages\":[{\"role\":\"user\",\"content\":\"loop: compare the files\"}]}'\n"+
		"  weather needs a client that offers get_weather: the cockpit's weather example, or the README's SDK snippet.\n"+
		"  Short questions go to M1 alone, which says it is a demo and echoes them.\n", addr)
}

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
