package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"chainproxy/config"
	"chainproxy/internal/origin"
	"chainproxy/internal/redact"

	"go.opentelemetry.io/otel/propagation"
	"golang.org/x/text/encoding/htmlindex"
)

// Limits of HTTP tools.
const (
	maxHTTPBody     = 1 << 20
	maxErrorSnippet = 200
)

// newHTTPTool builds a tool that POSTs (or the configured method) its
// arguments as JSON to a URL and returns the response body.
func newHTTPTool(h config.HTTPTool, client *http.Client, defTimeout time.Duration) (*tool, error) {
	u, err := url.Parse(h.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("url: want an absolute http:// or https:// URL")
	}
	method := strings.ToUpper(h.Method)
	if method == "" {
		method = http.MethodPost
	}
	params := []byte(`{"type":"object"}`)
	if h.Parameters != nil {
		if params, err = json.Marshal(h.Parameters); err != nil {
			return nil, fmt.Errorf("parameters: %w", err)
		}
	}
	timeout := h.Timeout
	if timeout <= 0 {
		timeout = defTimeout
	}
	name, target, headers := h.Name, h.URL, h.Headers
	// The endpoint may echo the tool's secrets; where the answer is cut,
	// what the cut leaves of one must go (see callHTTP).
	red := redact.HTTPTool(h)
	// Configured headers (a key, a token) go to the configured origin
	// only: redirects elsewhere are refused, not followed.
	client = origin.Client(client, h.FollowRedirects == config.FollowSameOrigin)
	return &tool{
		spec: Spec{
			Name:        h.Name,
			Description: h.Description,
			Parameters:  params,
			Kind:        httpKind(h),
		},
		timeout: timeout,
		run: func(ctx context.Context, args []byte) (string, error) {
			return callHTTP(ctx, client, red, name, method, target, headers, args)
		},
	}, nil
}

// callHTTP sends one call and returns the endpoint's answer. Where it
// cuts the answer (an error's snippet, a result over 1 MiB), red drops
// what the cut left of a secret: the process's Redactor, applied later,
// masks whole secrets only.
func callHTTP(ctx context.Context, client *http.Client, red redact.Redactor, name, method, target string, headers map[string]string, args []byte) (string, error) {
	req, err := http.NewRequestWithContext(ctx, method, target, bytes.NewReader(args))
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/plain;q=0.9, */*;q=0.5")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	// A traced call (the chain's execute_tool span is in ctx): the
	// endpoint, or a gateway in front of it, continues the trace, as a
	// node does for a model call (chain/bodycap.go). Only the tool's own
	// origin gets it: client never follows a redirect elsewhere.
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(req.Header))
	resp, err := client.Do(req)
	if err != nil {
		// The URL is configuration and may carry a secret in its query, so
		// the message keeps only the cause.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return "", fmt.Errorf("%s: request failed: %w", name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxHTTPBody+1))
	if err != nil {
		return "", fmt.Errorf("%s: reading the response: %w", name, err)
	}
	more := len(body) > maxHTTPBody // the endpoint sent more than was read
	body = utf8Body(resp.Header, body)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		snippet := string(body)
		if more || len(body) > maxErrorSnippet {
			snippet = strings.TrimSpace(red.Cut(snippet[:runeCut(snippet, maxErrorSnippet)])) + " …"
		} else {
			snippet = strings.TrimSpace(snippet)
		}
		return "", fmt.Errorf("%s: http %s: %s", name, resp.Status, snippet)
	}
	if len(body) == 0 {
		return "(empty response)", nil
	}
	if isBinary(body) {
		return "", fmt.Errorf("%s: the response is binary (%s); only text responses can be returned", name, describeBody(resp.Header))
	}
	if more || len(body) > maxHTTPBody {
		text := string(body)
		return red.Cut(text[:runeCut(text, maxHTTPBody)]) + fmt.Sprintf("\n… [truncated: response larger than %d bytes]", maxHTTPBody), nil
	}
	return string(body), nil
}

// utf8Body returns body in UTF-8, the encoding a model reads: decoded
// from the charset its Content-Type names (a WHATWG label, as browsers
// read it) when it is not UTF-8 already. Otherwise, or when the charset is
// unknown, body is returned as it came.
func utf8Body(h http.Header, body []byte) []byte {
	if utf8.Valid(body) {
		return body
	}
	_, params, err := mime.ParseMediaType(h.Get("Content-Type"))
	if err != nil || params["charset"] == "" {
		return body
	}
	enc, err := htmlindex.Get(params["charset"])
	if err != nil {
		return body
	}
	if out, err := enc.NewDecoder().Bytes(body); err == nil {
		return out
	}
	return body
}

// describeBody names what a response says its body is: its Content-Type,
// and its Content-Encoding when the transport left it encoded (the
// tool's headers asked for it).
func describeBody(h http.Header) string {
	desc := fmt.Sprintf("Content-Type %q", h.Get("Content-Type"))
	if ce := h.Get("Content-Encoding"); ce != "" {
		desc += fmt.Sprintf(", Content-Encoding %q", ce)
	}
	return desc
}

// httpKind is the anti-loop kind an HTTP tool's config declares.
func httpKind(h config.HTTPTool) Kind {
	switch {
	case !h.ReadOnly:
		return Writing
	case h.Volatile:
		return Volatile
	}
	return Deterministic
}
