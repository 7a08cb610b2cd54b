package web

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"chainproxy/config"
)

// TestUpstreamRetryAfter: a node's 429 comes with the Retry-After its rate
// limiter gave (OpenAI, OpenRouter and Groq send one), and the client is
// told the same wait, whichever front it came through; a 429 without one
// gets none, and a 503's is not passed on (the client gets a 502).
func TestUpstreamRetryAfter(t *testing.T) {
	date := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
	tests := []struct {
		name, upstream string // upstream's Retry-After
		status         int    // upstream's status
		path, body     string
		wantStatus     int
		wantRetry      string // "" for none; "date" for 89 to 91
	}{
		{"seconds", "7", 429, "/v1/chat/completions", `{"model":"A","messages":[{"role":"user","content":"hi"}]}`, 429, "7"},
		{"seconds, streamed", "7", 429, "/v1/chat/completions", `{"model":"A","stream":true,"messages":[{"role":"user","content":"hi"}]}`, 429, "7"},
		{"HTTP date", date, 429, "/v1/chat/completions", `{"model":"A","messages":[{"role":"user","content":"hi"}]}`, 429, "date"},
		{"anthropic", "12", 429, "/v1/messages", `{"model":"A","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, 429, "12"},
		{"ollama", "12", 429, "/api/chat", `{"model":"A","stream":false,"messages":[{"role":"user","content":"hi"}]}`, 429, "12"},
		{"none given", "", 429, "/v1/chat/completions", `{"model":"A","messages":[{"role":"user","content":"hi"}]}`, 429, ""},
		{"garbage", "soon", 429, "/v1/chat/completions", `{"model":"A","messages":[{"role":"user","content":"hi"}]}`, 429, ""},
		{"503", "7", 503, "/v1/chat/completions", `{"model":"A","messages":[{"role":"user","content":"hi"}]}`, 502, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tt.upstream != "" {
					w.Header().Set("Retry-After", tt.upstream)
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tt.status)
				w.Write([]byte(`{"error":{"message":"Rate limit reached for requests","type":"requests","code":"rate_limit_exceeded"}}`))
			}))
			defer up.Close()
			_, srv := wireProxy(t, []config.Node{openaiNode("A", up.URL+"/v1")}, oneStage)
			resp, err := http.Post(srv.URL+tt.path, "application/json", strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			body := readAll(t, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.wantStatus, body)
			}
			got := resp.Header.Get("Retry-After")
			switch tt.wantRetry {
			case "date":
				if got != "89" && got != "90" && got != "91" {
					t.Errorf("Retry-After %q, want about 90 seconds", got)
				}
			default:
				if got != tt.wantRetry {
					t.Errorf("Retry-After %q, want %q", got, tt.wantRetry)
				}
			}
		})
	}
}
