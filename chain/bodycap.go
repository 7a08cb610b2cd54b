package chain

import (
	"fmt"
	"io"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// MaxBodyBytes caps the body of a node's answer to anything but a chat
// call (a model list, a version, a model's details): the clients that
// read those (go-openai's, Ollama's) read them whole, so a hostile node
// could make the proxy hold what it sent.
const MaxBodyBytes = 32 << 20

// boundedTransport fails a non-chat answer's body past MaxBodyBytes. Chat
// answers stream and are bounded where they are read: each line or event,
// and the call's output (see Node.chat). It also sends the traceparent of
// a traced call.
type boundedTransport struct{ base http.RoundTripper }

func (t boundedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if sc := trace.SpanContextFromContext(r.Context()); sc.IsValid() {
		// A traced call (its model call span is in the context): the
		// node, or a gateway in front of it, continues the trace. A
		// RoundTripper must not change the caller's request: a copy
		// carries the header.
		r = r.Clone(r.Context())
		propagation.TraceContext{}.Inject(r.Context(), propagation.HeaderCarrier(r.Header))
	}
	resp, err := t.base.RoundTrip(r)
	if err != nil || isChatPath(r.URL.Path) {
		return resp, err
	}
	resp.Body = &boundedBody{ReadCloser: resp.Body}
	return resp, nil
}

// isChatPath reports whether path is a chat call of either API.
func isChatPath(path string) bool {
	return strings.HasSuffix(path, "/chat/completions") || strings.HasSuffix(path, "/api/chat")
}

// boundedBody fails once more than MaxBodyBytes came; a body of exactly
// that size still ends with io.EOF.
type boundedBody struct {
	io.ReadCloser
	read int64
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if room := MaxBodyBytes + 1 - b.read; int64(len(p)) > room {
		p = p[:room]
	}
	n, err := b.ReadCloser.Read(p)
	b.read += int64(n)
	if b.read > MaxBodyBytes {
		return 0, fmt.Errorf("answer larger than %d bytes", MaxBodyBytes)
	}
	return n, err
}
