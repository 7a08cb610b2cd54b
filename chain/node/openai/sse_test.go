package openai

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"

	"chainproxy/chain/node"
)

// readAll returns the data of every event of body.
func readAll(body string) ([]string, error) {
	return readFrom(strings.NewReader(body))
}

// readFrom returns the data of every event read from body.
func readFrom(body io.Reader) ([]string, error) {
	r := newSSEReader(body)
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
		{"line longer than the small buffer", "data: " + long[:smallSize+10] + "\n\ndata: b\n\n", []string{long[:smallSize+10], "b"}},
		{"line as long as the big buffer", "data: " + long[:bigSize-len("data: \n")] + "\n\ndata: b\n\n", []string{long[:bigSize-len("data: \n")], "b"}},
		{"many events at once", burst(50), burstWant(50)},
		{"empty data", "data:\n\n", []string{""}},
		{"nothing", "", nil},
	}
	// However the body comes in (all at once, byte by byte, by halves,
	// with its end), the events are the same.
	reads := map[string]func(io.Reader) io.Reader{
		"whole":       func(r io.Reader) io.Reader { return r },
		"one byte":    iotest.OneByteReader,
		"halves":      iotest.HalfReader,
		"error early": iotest.DataErrReader,
	}
	for _, tt := range tests {
		for how, wrap := range reads {
			t.Run(tt.name+"/"+how, func(t *testing.T) {
				got, err := readFrom(wrap(strings.NewReader(tt.body)))
				if err != nil {
					t.Fatalf("error = %v", err)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("events (-want +got):\n%s", diff)
				}
			})
		}
	}
}

// burst is n chunk events of the usual size, one after the other.
func burst(n int) string {
	var b strings.Builder
	for _, e := range burstWant(n) {
		b.WriteString("data: " + e + "\n\n")
	}
	return b.String()
}

func burstWant(n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1735689600,"model":"m","choices":[{"index":0,"delta":{"content":"word%d "},"logprobs":null,"finish_reason":null}]}`, i))
	}
	return out
}

// eventReader returns one event per Read, as a stream whose model is
// slower than the proxy does.
type eventReader struct{ events []string }

func (r *eventReader) Read(p []byte) (int, error) {
	if len(r.events) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.events[0])
	if r.events[0] = r.events[0][n:]; r.events[0] == "" {
		r.events = r.events[1:]
	}
	return n, nil
}

// TestSSEReaderWaitsSmall checks what a stream holds while it waits: the
// events of a slow stream come one per read and leave no pooled buffer
// behind, while a burst takes one and gives it back once read.
func TestSSEReaderWaitsSmall(t *testing.T) {
	var events []string
	for _, e := range burstWant(5) {
		events = append(events, "data: "+e+"\n\n")
	}
	slow := newSSEReader(&eventReader{events: events})
	defer slow.release()
	for i := range events {
		if _, err := slow.next(); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if slow.big != nil {
			t.Fatalf("after event %d of a slow stream the reader holds a %d-byte buffer, want only its own %d bytes", i, bigSize, smallSize)
		}
	}

	fast := newSSEReader(&eventReader{events: []string{burst(20), "data: " + burstWant(1)[0] + "\n\n"}})
	defer fast.release()
	if _, err := fast.next(); err != nil {
		t.Fatal(err)
	}
	if fast.big == nil {
		t.Fatal("a burst of 20 events is read through the small buffer, want the big one")
	}
	for i := range 20 {
		if _, err := fast.next(); err != nil {
			t.Fatalf("event %d: %v", i+1, err)
		}
	}
	// The next read, after the lone event, is where the stream would wait.
	if _, err := fast.next(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last event: error = %v, want io.EOF", err)
	}
	if fast.big != nil {
		t.Error("the burst is read and the next event came alone, but the reader still holds the big buffer while it waits")
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
		// Any body: no panic, no event over the cap, the same events
		// however it comes in.
		events, err := readAll(body)
		for _, e := range events {
			if len(e) > maxEvent {
				t.Fatalf("event of %d bytes", len(e))
			}
		}
		for _, wrap := range []func(io.Reader) io.Reader{iotest.OneByteReader, iotest.HalfReader} {
			got, gotErr := readFrom(wrap(strings.NewReader(body)))
			if !cmp.Equal(got, events) || (gotErr == nil) != (err == nil) {
				t.Fatalf("read in pieces: events %q, error %v; read whole: %q, %v", got, gotErr, events, err)
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
	b := New(nodeAt("http://upstream.invalid/v1"), &http.Client{Transport: memTransport{body: body, contentType: "application/json"}})
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
			b := New(nodeAt("http://upstream.invalid/v1"), &http.Client{Transport: memTransport{status: 400, body: tt.body}})
			_, err := collect(t.Context(), b, userRequest("hi"))
			var ue *node.UpstreamError
			if !errors.As(err, &ue) || ue.Status != 400 || ue.Message != tt.want {
				t.Errorf("Chat() error = %#v, want status 400 with message %q", err, tt.want)
			}
		})
	}
}

func TestChatErrorEventAsString(t *testing.T) {
	body := "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}}]}\n\ndata: {\"error\":\"worker died\"}\n\n"
	b := New(nodeAt("http://upstream.invalid/v1"), &http.Client{Transport: memTransport{body: body}})
	_, err := collect(t.Context(), b, userRequest("hi"))
	var ue *node.UpstreamError
	if !errors.As(err, &ue) || ue.Kind != node.KindProtocol || ue.Message != "worker died" {
		t.Errorf("Chat() error = %#v, want a protocol error with the upstream's message", err)
	}
}

func TestSSEReaderErrorField(t *testing.T) {
	// llama.cpp's server sent a failure as an "error:" field, then
	// "data: [DONE]" (ggml-org/llama.cpp 15ae7dd, server_sent_event).
	type event struct {
		data   string
		failed bool
	}
	body := "data: {\"a\":1}\n\n" +
		"error: {\"code\":500,\"message\":\"boom\",\"type\":\"server_error\"}\n\n" +
		"data: [DONE]\n\n"
	want := []event{{`{"a":1}`, false}, {`{"code":500,"message":"boom","type":"server_error"}`, true}, {"[DONE]", false}}
	r := newSSEReader(iotest.OneByteReader(strings.NewReader(body)))
	defer r.release()
	var got []event
	for {
		data, err := r.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, event{string(data), r.erred})
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(event{})); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}
