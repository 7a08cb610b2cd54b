package node

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"chainproxy/config"
)

// gzipped compresses n bytes of s repeated: a bomb when n is large, since
// a run of one byte packs about a thousand to one.
func gzipped(t *testing.T, s string, n int) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	chunk := []byte(strings.Repeat(s, (64<<10)/len(s)))
	for w := 0; w < n; w += len(chunk) {
		zw.Write(chunk[:min(len(chunk), n-w)])
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestNodeClientContentEncoding: net/http asks a node for gzip alone (the
// proxy sets no Accept-Encoding of its own) and decodes it, so the body
// caps count what it decoded, not what came on the wire. A server, or a
// cache in front of it, may answer in another coding all the same (RFC
// 9110 section 12.5.3 says a server should not; an nginx cache serving br
// to clients that asked for gzip and deflate: canonical/ubuntu.com#13980):
// the body is then bytes the proxy cannot read, and reading it must say
// so, rather than end in "stream ended before a finish_reason" or in a
// model list taken for an empty one.
func TestNodeClientContentEncoding(t *testing.T) {
	tests := []struct {
		name     string
		path     string
		encoding string
		body     []byte
		want     string // the body read, when wantErr is ""
		wantErr  string
	}{
		{"gzip, decoded", "/v1/models", "gzip", gzipped(t, `{"data":[]}`, len(`{"data":[]}`)), `{"data":[]}`, ""},
		{"gzip bomb, capped decoded", "/v1/models", "gzip", gzipped(t, " ", 2*MaxBodyBytes), "", "answer larger than"},
		{"identity", "/v1/models", "identity", []byte(`{"data":[]}`), `{"data":[]}`, ""},
		{"br on a chat call", "/v1/chat/completions", "br", []byte("\x1b\x0f\x00\xf8\xa5\x02\x42\x01"), "", `Content-Encoding "br"`},
		{"zstd on a model list", "/v1/models", "zstd", []byte("\x28\xb5\x2f\xfd\x04\x58\x61\x00"), "", `Content-Encoding "zstd"`},
		{"deflate on Ollama's chat", "/api/chat", "deflate", []byte("\x78\x9c\xcb\x48\x04\x00"), "", `Content-Encoding "deflate"`},
		{"gzip under br", "/v1/models", "gzip, br", []byte("\x1b\x0f\x00\xf8"), "", `Content-Encoding "gzip, br"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Content-Encoding", tt.encoding)
				w.Write(tt.body)
			}))
			defer srv.Close()
			resp, err := NewHTTPClient(config.Node{Name: "A"}).Get(srv.URL + tt.path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			got, err := io.ReadAll(resp.Body)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("reading the body: %v", err)
			case tt.wantErr == "" && string(got) != tt.want:
				t.Errorf("body = %q, want %q", got, tt.want)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("reading the body: error = %v, want one that says %q", err, tt.wantErr)
			}
		})
	}
}

// loginPage is what a proxy in front of a node answers in its place with
// status 200: a sign-in, captive-portal or block page. An HTTP proxy taken
// from the environment does so for `ollama list` (ollama/ollama#12480:
// "invalid character '<' looking for beginning of value").
const loginPage = `<!DOCTYPE html><html><head><title>Sign in</title></head><body><form action="/login">…</form></body></html>`

// TestNodeClientHTMLPage: no node API answers with an HTML page, so a 2xx
// one is a page in the node's place; reading it says so, rather than end
// in "stream ended before a finish_reason", a decoding error, or a model
// list taken for an empty one. An error status keeps its page, which the
// backends read as the status's message (UpstreamError hides the markup).
// A body labelled HTML that is not a page (JSON from a server whose
// framework labels every answer HTML: Jan's Nitro on drogon,
// janhq/cortex.cpp#465) is read as it came.
func TestNodeClientHTMLPage(t *testing.T) {
	const models = `{"object":"list","data":[{"id":"m","object":"model"}]}`
	tests := []struct {
		name        string
		path        string
		status      int
		contentType string
		body        string
		wantErr     string
	}{
		{"chat call", "/v1/chat/completions", http.StatusOK, "text/html; charset=utf-8", loginPage, `an HTML page (Content-Type "text/html; charset=utf-8")`},
		{"Ollama's chat", "/api/chat", http.StatusOK, "text/html", loginPage, `an HTML page (Content-Type "text/html")`},
		{"model list", "/v1/models", http.StatusOK, "TEXT/HTML", loginPage, `an HTML page (Content-Type "TEXT/HTML")`},
		{"page after blank lines", "/v1/models", http.StatusOK, "text/html", "\r\n\r\n" + loginPage, `an HTML page`},
		{"error status", "/v1/chat/completions", http.StatusBadGateway, "text/html", loginPage, ""},
		{"JSON", "/v1/models", http.StatusOK, "application/json", loginPage, ""},
		{"JSON labelled HTML", "/v1/models", http.StatusOK, "text/html; charset=utf-8", models, ""},
		{"JSON labelled HTML on a chat call", "/v1/chat/completions", http.StatusOK, "text/html; charset=utf-8", "\n" + models, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tt.contentType)
				w.WriteHeader(tt.status)
				w.Write([]byte(tt.body))
			}))
			defer srv.Close()
			resp, err := NewHTTPClient(config.Node{Name: "A"}).Get(srv.URL + tt.path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			got, err := io.ReadAll(resp.Body)
			switch {
			case tt.wantErr == "" && (err != nil || string(got) != tt.body):
				t.Errorf("body = %q, %v; want the page as it came", got, err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("reading the body: error = %v, want one that says %q", err, tt.wantErr)
			}
		})
	}
}
