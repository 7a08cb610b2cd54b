package tools

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"chainproxy/config"
	"chainproxy/internal/redact"
)

// TestHTTPToolCutKeepsNoSecret: an endpoint that echoes the headers it got
// (docs/security.md: "an endpoint echoing the headers it got shows
// X-Api-Key: ***") may place the tool's key across the point where the
// tool cuts its answer: the 200-byte snippet of an error, or the 1 MiB
// cap of a result. The chain masks the configured secrets by value after
// the cut, so what the cut leaves of a key must not reach it: no part of
// the key may survive the masking the chain applies.
func TestHTTPToolCutKeepsNoSecret(t *testing.T) {
	const key = "tool-key-5678-abcdef-XYZ"
	tests := []struct {
		name   string
		status int
		cut    int // where the tool cuts the answer
	}{
		{"error snippet", http.StatusUnauthorized, maxErrorSnippet},
		{"result cap", http.StatusOK, maxHTTPBody},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				// The key starts 8 bytes before the cut.
				open, mid := `{"error":"invalid key","note":"`, `","headers":{"X-Api-Key":"`
				pad := strings.Repeat("x", tt.cut-8-len(open)-len(mid))
				w.WriteHeader(tt.status)
				fmt.Fprintf(w, `%s%s%s%s"}}`, open, pad, mid, key)
			}))
			defer srv.Close()
			h := config.HTTPTool{Name: "lookup", URL: srv.URL, Timeout: 5 * time.Second, Headers: map[string]string{"X-Api-Key": key}}
			reg := newHTTPRegistry(t, h)
			out, err := reg.Call(t.Context(), "lookup", []byte(`{}`))
			if err != nil {
				out = err.Error()
			}
			red := redact.FromConfig(&config.Config{Tools: config.Tools{HTTP: []config.HTTPTool{h}}})
			if got := red.String(out); strings.Contains(got, key[:6]) {
				i := strings.Index(got, key[:6])
				t.Errorf("the masked answer keeps the start of the key: …%s", got[max(0, i-40):min(len(got), i+40)])
			}
		})
	}
}

// TestHTTPToolBinaryAnswer: an endpoint answering with bytes that are not
// text (an image, or a gzip body the transport does not decode because
// the tool's headers asked for gzip themselves: net/http's
// Transport.DisableCompression doc, "if the user explicitly requested gzip
// it is not automatically uncompressed") gives an error naming what came,
// as read_file does for a binary file, instead of up to 1 MiB of bytes
// the model reads as noise.
func TestHTTPToolBinaryAnswer(t *testing.T) {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(`{"rows":[[1,"a"]]}`))
	zw.Close()
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89")
	tests := []struct {
		name        string
		headers     map[string]string
		contentType string
		encoding    string
		body        []byte
		want        string
		wantErr     string
	}{
		{name: "image", contentType: "image/png", body: png,
			wantErr: `lookup: the response is binary (Content-Type "image/png"); only text responses can be returned`},
		{name: "gzip the headers asked for", headers: map[string]string{"Accept-Encoding": "gzip"}, contentType: "application/json", encoding: "gzip", body: gz.Bytes(),
			wantErr: `lookup: the response is binary (Content-Type "application/json", Content-Encoding "gzip"); only text responses can be returned`},
		{name: "gzip the transport asked for", contentType: "application/json", encoding: "gzip", body: gz.Bytes(), want: `{"rows":[[1,"a"]]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tt.encoding != "" && !strings.Contains(r.Header.Get("Accept-Encoding"), tt.encoding) {
					t.Errorf("the request did not accept %s", tt.encoding)
				}
				w.Header().Set("Content-Type", tt.contentType)
				if tt.encoding != "" {
					w.Header().Set("Content-Encoding", tt.encoding)
				}
				w.Write(tt.body)
			}))
			defer srv.Close()
			reg := newHTTPRegistry(t, config.HTTPTool{Name: "lookup", URL: srv.URL, Timeout: 5 * time.Second, Headers: tt.headers})
			got, err := reg.Call(t.Context(), "lookup", []byte(`{}`))
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Errorf("Call() = %.40q, %v; want error %q", got, err, tt.wantErr)
				}
			} else if err != nil || got != tt.want {
				t.Errorf("Call() = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// TestHTTPToolCharset: a text answer in the charset its Content-Type
// names (RFC 9110, 8.3.2; legacy servers still send ISO-8859-1,
// windows-1252 or Shift_JIS) reaches the model as UTF-8, the encoding it
// reads: undecoded, every "é" would turn into U+FFFD on the way.
// Charset labels are the WHATWG Encoding Standard's, as browsers read
// them. UTF-8, and text without a charset, pass as sent.
func TestHTTPToolCharset(t *testing.T) {
	tests := []struct {
		name, contentType, body, want string
	}{
		{"iso-8859-1", "text/plain; charset=ISO-8859-1", "caf\xe9 cr\xe8me", "café crème"},
		{"windows-1252 quotes", `text/html; charset="windows-1252"`, "\x93ok\x94 \x80 5", "“ok” € 5"},
		{"shift_jis", "text/plain;charset=Shift_JIS", "\x82\xb1\x82\xf1\x82\xc9\x82\xbf\x82\xcd", "こんにちは"},
		{"utf-8", "application/json; charset=utf-8", `{"city":"Zürich"}`, `{"city":"Zürich"}`},
		{"no charset", "application/octet-stream", "caf\xe9", "caf\xe9"},
		{"unknown charset", "text/plain; charset=x-unknown", "caf\xe9", "caf\xe9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tt.contentType)
				io.WriteString(w, tt.body)
			}))
			defer srv.Close()
			reg := newHTTPRegistry(t, config.HTTPTool{Name: "lookup", URL: srv.URL, Timeout: 5 * time.Second})
			if got, err := reg.Call(t.Context(), "lookup", []byte(`{}`)); err != nil || got != tt.want {
				t.Errorf("Call() = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// TestHTTPToolEndlessAnswers: an answer that never ends costs the tool its
// limits, not the answer: one trickled a byte at a time ends with the
// tool's timeout, and one streamed without Content-Length and without end
// is cut at 1 MiB, with a note.
func TestHTTPToolEndlessAnswers(t *testing.T) {
	tests := []struct {
		name    string
		pause   time.Duration // between writes
		chunk   string
		timeout time.Duration
		want    string // prefix of the result
		wantErr string // prefix of the error
	}{
		{"a byte at a time", 20 * time.Millisecond, "x", 300 * time.Millisecond, "", "lookup: timed out after 300ms"},
		{"endless chunked", 0, strings.Repeat("y", 32<<10), 10 * time.Second, strings.Repeat("y", maxHTTPBody) + "\n… [truncated", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/plain")
				for r.Context().Err() == nil {
					if _, err := io.WriteString(w, tt.chunk); err != nil {
						return
					}
					w.(http.Flusher).Flush()
					time.Sleep(tt.pause)
				}
			}))
			defer srv.Close()
			reg := newHTTPRegistry(t, config.HTTPTool{Name: "lookup", URL: srv.URL, Timeout: tt.timeout})
			got, err := reg.Call(t.Context(), "lookup", []byte(`{}`))
			switch {
			case tt.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.wantErr)):
				t.Errorf("Call() = %.40q, %v; want an error starting %q", got, err, tt.wantErr)
			case tt.wantErr == "" && (err != nil || !strings.HasPrefix(got, tt.want)):
				t.Errorf("Call() = %d bytes ending %q, %v; want %d bytes then a note", len(got), got[max(0, len(got)-60):], err, maxHTTPBody)
			}
		})
	}
}
