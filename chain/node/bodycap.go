package node

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

// boundedTransport fails a non-chat answer's body past MaxBodyBytes, as
// decoded: net/http decodes the gzip it asks for, so a small body that
// inflates to gigabytes is cut at the cap too. Chat answers stream and are
// bounded where they are read: each line or event, and the call's output
// (see Caps.Chat). It fails the body of an answer no backend can read (see
// unreadable) or of an HTML page (markupBody), and sends the traceparent
// of a traced call.
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
	if err != nil {
		return resp, err
	}
	if err := unreadable(r, resp); err != nil {
		resp.Body = unreadableBody{ReadCloser: resp.Body, err: err}
		return resp, nil
	}
	if err := htmlLabelled(resp); err != nil {
		resp.Body = &markupBody{ReadCloser: resp.Body, err: err}
	}
	if isChatPath(r.URL.Path) {
		return resp, nil
	}
	resp.Body = &boundedBody{ReadCloser: resp.Body}
	return resp, nil
}

// unreadable says why resp's body is none the backends can read, or nil.
func unreadable(r *http.Request, resp *http.Response) error {
	if resp.Body == http.NoBody {
		return nil
	}
	// The headers are read by their canonical names, as net/http stores
	// them, without Get's canonicalization: this runs on every answer.
	if enc := first(resp.Header["Content-Encoding"]); enc != "" && !strings.EqualFold(enc, "identity") && len(r.Header["Accept-Encoding"]) == 0 {
		// net/http asked for gzip alone and decoded it (the header is
		// gone then): this is a coding nobody asked for, which a server
		// or a cache in front of it sent anyway. Its bytes read as
		// neither events nor JSON.
		return fmt.Errorf("answer in Content-Encoding %q, which the proxy did not ask for (it reads gzip or none)", enc)
	}
	return nil
}

// htmlLabelled says what a 2xx answer labelled HTML is when its body turns
// out to be a page (see markupBody), or nil for an answer of another label
// or status.
func htmlLabelled(resp *http.Response) error {
	if ct := first(resp.Header["Content-Type"]); resp.Body != http.NoBody && resp.StatusCode < http.StatusMultipleChoices && isHTML(ct) {
		// No node API answers with an HTML page: this is one in the
		// node's place (a proxy's sign-in, block or captive-portal page,
		// or a web app at base_url), which would read as a stream
		// without events or a model list without models. An error
		// status keeps its page: the backends read it as the status's
		// message.
		return fmt.Errorf("an HTML page (Content-Type %q) instead of the API's answer: is something in front of the node (a proxy or sign-in page), or is base_url another server?", ct)
	}
	return nil
}

// first is a header's first value, or "".
func first(vs []string) string {
	if len(vs) == 0 {
		return ""
	}
	return vs[0]
}

// isHTML reports whether a Content-Type is HTML's.
func isHTML(contentType string) bool {
	mt, _, _ := strings.Cut(contentType, ";")
	mt = strings.TrimSpace(mt)
	return strings.EqualFold(mt, "text/html") || strings.EqualFold(mt, "application/xhtml+xml")
}

// unreadableBody is a body the backends cannot read: every read fails with
// err, which names why, and the status stays as it came.
type unreadableBody struct {
	io.ReadCloser
	err error
}

func (b unreadableBody) Read([]byte) (int, error) { return 0, b.err }

// markupBody is a 2xx body labelled HTML. A page in the node's place opens
// with markup, and every read fails with err from its first '<'. A server
// whose framework labels everything HTML by default sends its JSON or its
// events so (Jan's Nitro, on drogon: janhq/cortex.cpp#465), and the
// backends read those whatever their label: such a body is read as it
// comes.
type markupBody struct {
	io.ReadCloser
	err error
	// seen: the body's first byte that is not space was read, and it
	// opened no markup.
	seen, failed bool
}

func (b *markupBody) Read(p []byte) (int, error) {
	if b.failed {
		return 0, b.err
	}
	n, err := b.ReadCloser.Read(p)
	for i := 0; i < n && !b.seen; i++ {
		switch p[i] {
		case ' ', '\t', '\n', '\r':
		case '<':
			b.failed = true
			return 0, b.err
		default:
			b.seen = true
		}
	}
	return n, err
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
