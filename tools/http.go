package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"chainproxy/config"
	"chainproxy/internal/origin"
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
			return callHTTP(ctx, client, name, method, target, headers, args)
		},
	}, nil
}

func callHTTP(ctx context.Context, client *http.Client, name, method, target string, headers map[string]string, args []byte) (string, error) {
	req, err := http.NewRequestWithContext(ctx, method, target, bytes.NewReader(args))
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/plain;q=0.9, */*;q=0.5")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
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
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		snippet := strings.TrimSpace(string(body[:runeCut(string(body), maxErrorSnippet)]))
		if len(body) > maxErrorSnippet {
			snippet += " …"
		}
		return "", fmt.Errorf("%s: http %s: %s", name, resp.Status, snippet)
	}
	if len(body) == 0 {
		return "(empty response)", nil
	}
	if len(body) > maxHTTPBody {
		cut := runeCut(string(body), maxHTTPBody)
		return string(body[:cut]) + fmt.Sprintf("\n… [truncated: response larger than %d bytes]", maxHTTPBody), nil
	}
	return string(body), nil
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
