package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"chainproxy/internal/redistest"
)

// TestEvalTracesOpenInCockpit: an eval on a configuration with a shared
// store (Redis) keeps each answer's trace there, so that a proxy started
// on the same configuration (through run, as the binary) answers GET
// /v1/chain/traces/{id} for it, to the caller its cockpit is used as: anyone
// when the server has no keys, an admin key when it has keys, and not
// another key. Each item under each mode has its own trace id, and
// report.html links each to the -cockpit given.
func TestEvalTracesOpenInCockpit(t *testing.T) {
	tests := []struct {
		name   string
		server string // the config's server section
		open   string // the key the cockpit is used with ("" none)
		other  string // a key that must not open them ("" none)
	}{
		{name: "no keys", server: ""},
		{name: "admin key", server: "server:\n  api_keys: [user-key]\n  admin_keys: [admin-key]\n", open: "admin-key", other: "user-key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := redistest.Start(t)
			dir := t.TempDir()
			cfgPath := filepath.Join(dir, "c.yaml")
			cfg := tt.server + fmt.Sprintf("store:\n  redis_url: %q\n", rs.URL())
			if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, "out")
			code, stdout, stderr := runEvalCmd(t, "-demo", "-config", cfgPath, "-data", sampleSet, "-n", "3", "-out", out, "-cockpit", "http://127.0.0.1:9/")
			if code != 0 {
				t.Fatalf("eval exit code = %d, want 0; stderr:\n%s", code, stderr)
			}
			if want := "traces: in the store (store.redis_url); open one at http://127.0.0.1:9/#/traces/TRACE_ID"; !strings.Contains(stdout, want) {
				t.Errorf("stdout lacks %q:\n%s", want, stdout)
			}
			rep, _ := readReport(t, out)
			if got, want := len(rep.Results), 3*5; got != want {
				t.Fatalf("%d results, want %d (3 items × 5 modes)", got, want)
			}
			page, err := os.ReadFile(filepath.Join(out, "report.html"))
			if err != nil {
				t.Fatal(err)
			}
			seen := map[string]string{}
			for _, r := range rep.Results {
				at := r.ID + " under " + r.Mode
				if prev, dup := seen[r.TraceID]; dup || r.TraceID == "" {
					t.Errorf("%s has trace id %q, as %s", at, r.TraceID, prev)
				}
				seen[r.TraceID] = at
				if link := `<a href="http://127.0.0.1:9/#/traces/` + r.TraceID + `">`; !strings.Contains(string(page), link) {
					t.Errorf("report.html lacks the link %s", link)
				}
			}

			base := startWired(t, cfg)
			get := func(id, key string) (int, []byte) {
				req, err := http.NewRequest("GET", base+"/v1/chain/traces/"+id, nil)
				if err != nil {
					t.Fatal(err)
				}
				if key != "" {
					req.Header.Set("Authorization", "Bearer "+key)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				body, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, body
			}
			for _, r := range rep.Results {
				code, body := get(r.TraceID, tt.open)
				if code != http.StatusOK {
					t.Errorf("GET trace of %s under %s: %d %s, want 200", r.ID, r.Mode, code, body)
					continue
				}
				var doc struct {
					TraceID string `json:"trace_id"`
					Status  string `json:"status"`
					Client  string `json:"client"`
					Chain   struct {
						Mode   string            `json:"mode"`
						Stages []json.RawMessage `json:"stages"`
					} `json:"chain"`
				}
				if err := json.Unmarshal(body, &doc); err != nil {
					t.Fatalf("trace of %s under %s: %v: %s", r.ID, r.Mode, err, body)
				}
				if doc.TraceID != r.TraceID || doc.Status != "ok" || doc.Client != "chainproxy-eval" || doc.Chain.Mode != r.Routed || len(doc.Chain.Stages) != len(r.Stages) {
					t.Errorf("trace of %s under %s = id %q status %q client %q mode %q %d stages, want %q ok chainproxy-eval %q %d stages",
						r.ID, r.Mode, doc.TraceID, doc.Status, doc.Client, doc.Chain.Mode, len(doc.Chain.Stages), r.TraceID, r.Routed, len(r.Stages))
				}
				if tt.other != "" {
					if code, _ := get(r.TraceID, tt.other); code != http.StatusNotFound {
						t.Errorf("GET trace of %s under %s with another key: %d, want 404", r.ID, r.Mode, code)
					}
				}
			}
		})
	}
}

// TestEvalTracesWithoutRedis: with no shared store, eval says where its
// traces are and how to open them, and report.html links none even with
// -cockpit.
func TestEvalTracesWithoutRedis(t *testing.T) {
	out := t.TempDir()
	code, stdout, stderr := runEvalCmd(t, "-demo", "-data", sampleSet, "-n", "2", "-modes", "M1", "-out", out, "-cockpit", "http://127.0.0.1:9")
	if code != 0 {
		t.Fatalf("eval exit code = %d, want 0; stderr:\n%s", code, stderr)
	}
	for _, want := range []string{"traces: not in a proxy's cockpit (no store.redis_url", filepath.Join(out, "traces.jsonl") + " | jq .chain"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if want := "eval: warning: -cockpit: the traces are not shared with a proxy"; !strings.Contains(stderr, want) {
		t.Errorf("stderr lacks %q:\n%s", want, stderr)
	}
	page, err := os.ReadFile(filepath.Join(out, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(page), "<a href=") {
		t.Error("report.html links traces a proxy cannot open")
	}
}

// TestEvalTracesListedInCockpit: with a shared store, an eval's answers
// and its judge's gradings are listed in the cockpit's trace list of a
// proxy on the same configuration (GET /v1/chain/traces, to the admin key
// the cockpit is used with, not to another key), each judging opens by
// its id, and report.html links it beside the answer it graded.
func TestEvalTracesListedInCockpit(t *testing.T) {
	rs := redistest.Start(t)
	dir := t.TempDir()
	cfg := fmt.Sprintf("server:\n  api_keys: [user-key]\n  admin_keys: [admin-key]\nstore:\n  redis_url: %q\n", rs.URL())
	cfgPath := filepath.Join(dir, "c.yaml")
	data := filepath.Join(dir, "items.jsonl")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(data, []byte(`{"id":"capital","question":"What is the capital of France?","answer":"Paris","match":"contains"}`+"\n"+
		`{"id":"poem","question":"Write two lines about the sea.","rubric":"two lines, about the sea"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The cockpit is open while the eval runs.
	base := startWired(t, cfg)
	out := filepath.Join(dir, "out")
	code, _, stderr := runEvalCmd(t, "-demo", "-config", cfgPath, "-data", data, "-modes", "M1,chain/reflexive", "-judge", "M2", "-out", out, "-cockpit", base)
	if code != 0 {
		t.Fatalf("eval exit code = %d, want 0; stderr:\n%s", code, stderr)
	}
	rep, _ := readReport(t, out)
	page, err := os.ReadFile(filepath.Join(out, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{} // trace id → what it is
	for _, r := range rep.Results {
		want[r.TraceID] = r.ID + " under " + r.Mode
		if r.ID != "poem" {
			continue
		}
		if r.Judge == nil || r.Judge.TraceID == "" {
			t.Fatalf("%s under %s: judge %+v, want a verdict with its trace id", r.ID, r.Mode, r.Judge)
		}
		want[r.Judge.TraceID] = "the judging of " + r.ID + " under " + r.Mode
		if link := `<a href="` + base + `/#/traces/` + r.Judge.TraceID + `">`; !strings.Contains(string(page), link) {
			t.Errorf("report.html lacks the link to the judging of %s under %s: %s", r.ID, r.Mode, link)
		}
	}
	if len(want) != 6 {
		t.Fatalf("%d trace ids, want 6 (4 answers, 2 judgings): %v", len(want), want)
	}

	list := func(key string) map[string]string {
		req, _ := http.NewRequest("GET", base+"/v1/chain/traces", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var l struct {
			Data []struct {
				TraceID                  string `json:"trace_id"`
				Status, Client, Question string
			} `json:"data"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, s := range l.Data {
			if s.Client == "chainproxy-eval" {
				got[s.TraceID] = s.Status + " " + s.Question
			}
		}
		return got
	}
	listed := list("admin-key")
	for id, what := range want {
		if st, ok := listed[id]; !ok || !strings.HasPrefix(st, "ok ") {
			t.Errorf("the cockpit's list has %s as %q (listed %v), want it ok", what, st, ok)
		}
	}
	if len(listed) != len(want) {
		t.Errorf("the cockpit lists %d eval traces, want %d: %v", len(listed), len(want), listed)
	}
	if other := list("user-key"); len(other) != 0 {
		t.Errorf("another key's list shows the eval's traces: %v", other)
	}
	for id, what := range want {
		req, _ := http.NewRequest("GET", base+"/v1/chain/traces/"+id, nil)
		req.Header.Set("Authorization", "Bearer admin-key")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET the trace of %s: %d, want 200", what, resp.StatusCode)
		}
	}
}
