package openai

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"chainproxy/chain"
)

// readAll returns the data of every event of body.
func readAll(body string) ([]string, error) {
	r := newSSEReader(strings.NewReader(body))
	defer r.release()
	var out []string
	for {
		data, err := r.next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, string(data))
	}
}

func TestSSEReader(t *testing.T) {
	long := strings.Repeat("x", 40<<10) // longer than the reader's buffer
	tests := []struct {
		name string
		body string
		want []string
	}{
		{"one event", "data: {\"a\":1}\n\n", []string{`{"a":1}`}},
		{"no space after the colon", "data:{\"a\":1}\n\n", []string{`{"a":1}`}},
		{"only one space removed", "data:  x\n\n", []string{" x"}},
		{"CRLF line ends", "data: a\r\n\r\ndata: b\r\n\r\n", []string{"a", "b"}},
		{"comments and other fields skipped", ": keepalive\n\nevent: message\nid: 7\nretry: 10\ndata: a\n\n", []string{"a"}},
		{"data lines of one event joined", "data: {\"a\":\ndata: 1}\n\n", []string{"{\"a\":\n1}"}},
		{"blank lines between events", "\n\n\ndata: a\n\n\n\ndata: b\n\n", []string{"a", "b"}},
		{"last event without a blank line", "data: a\n\ndata: [DONE]", []string{"a", "[DONE]"}},
		{"last line without an end", "data: a", []string{"a"}},
		{"line longer than the buffer", "data: " + long + "\n\ndata: b\n\n", []string{long, "b"}},
		{"empty data", "data:\n\n", []string{""}},
		{"nothing", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readAll(tt.body)
			if err != nil {
				t.Fatalf("error = %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSSEReaderEventTooLarge(t *testing.T) {
	line := "data: " + strings.Repeat("x", 1<<20) + "\n"
	_, err := readAll(strings.Repeat(line, maxEvent>>20+1) + "\n")
	if !errors.Is(err, errEventTooLarge) {
		t.Errorf("error = %v, want errEventTooLarge", err)
	}
	_, err = readAll("data: " + strings.Repeat("x", maxEvent+1) + "\n\n")
	if !errors.Is(err, errEventTooLarge) {
		t.Errorf("one long line: error = %v, want errEventTooLarge", err)
	}
}

func FuzzSSEReader(f *testing.F) {
	f.Add("data: a\n\n", "a", "b")
	f.Add("data: {\"x\"\r\ndata:1}\r\n\r\n: c\n", "", " lead")
	f.Fuzz(func(t *testing.T, body, a, b string) {
		// Any body: no panic, no event over the cap.
		events, _ := readAll(body)
		for _, e := range events {
			if len(e) > maxEvent {
				t.Fatalf("event of %d bytes", len(e))
			}
		}
		// Data without line ends comes back as written, whichever line end
		// and spacing the server uses.
		if strings.ContainsAny(a+b, "\r\n") {
			return
		}
		noSpace := "data:" + b // the space is optional unless b starts with one
		if strings.HasPrefix(b, " ") {
			noSpace = "data: " + b
		}
		got, err := readAll("data: " + a + "\r\n\r\n: comment\n" + noSpace + "\n\n")
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{a, b}; !cmp.Equal(got, want) {
			t.Errorf("events = %q, want %q", got, want)
		}
	})
}

func TestChatJSONAnswerToAStreamRequest(t *testing.T) {
	// Some servers ignore "stream": true and answer one chat.completion.
	body := `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"whole"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`
	b := New(node("http://upstream.invalid/v1"), &http.Client{Transport: memTransport{body: body, contentType: "application/json"}})
	got, err := collect(t.Context(), b, userRequest("hi"))
	if err != nil {
		t.Fatalf("Chat() error = %v", err)
	}
	if got.content != "whole" || got.finish != "stop" {
		t.Errorf("got content %q, finish %q; want \"whole\", \"stop\"", got.content, got.finish)
	}
}

func TestChatErrorBodies(t *testing.T) {
	tests := []struct {
		name, body, want string
	}{
		{"OpenAI's shape", `{"error":{"message":"bad model","type":"invalid_request_error"}}`, "bad model"},
		{"error as a string", `{"error":"model not loaded"}`, "model not loaded"},
		{"top-level message", `{"object":"error","message":"context too long","type":"BadRequestError"}`, "context too long"},
		{"FastAPI detail", `{"detail":"Not authenticated"}`, "Not authenticated"},
		{"text", "upstream connect error", "upstream connect error"},
		{"empty", "", "400 Bad Request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := New(node("http://upstream.invalid/v1"), &http.Client{Transport: memTransport{status: 400, body: tt.body}})
			_, err := collect(t.Context(), b, userRequest("hi"))
			var ue *chain.UpstreamError
			if !errors.As(err, &ue) || ue.Status != 400 || ue.Message != tt.want {
				t.Errorf("Chat() error = %#v, want status 400 with message %q", err, tt.want)
			}
		})
	}
}

func TestChatErrorEventAsString(t *testing.T) {
	body := "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}}]}\n\ndata: {\"error\":\"worker died\"}\n\n"
	b := New(node("http://upstream.invalid/v1"), &http.Client{Transport: memTransport{body: body}})
	_, err := collect(t.Context(), b, userRequest("hi"))
	var ue *chain.UpstreamError
	if !errors.As(err, &ue) || ue.Kind != chain.KindProtocol || ue.Message != "worker died" {
		t.Errorf("Chat() error = %#v, want a protocol error with the upstream's message", err)
	}
}
