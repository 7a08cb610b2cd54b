// Package origin keeps the proxy's own outbound HTTP calls (nodes, HTTP
// tools, MCP servers) at the origin the configuration names: a redirect to
// another scheme, host or port is never followed, and configured headers
// are never sent anywhere else. It imports no project package, so chain,
// tools and tools/mcp can all use it.
package origin

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// SameOrigin is the follow_redirects value that lets an HTTP tool or an
// MCP server follow redirects that stay on its configured origin.
const SameOrigin = "same_origin"

// maxRedirects is how many same-origin hops are followed, as Go's client.
const maxRedirects = 10

// MaxResponseHeaderBytes bounds the response headers an outbound call
// reads (http.Transport.MaxResponseHeaderBytes): net/http's default, 10
// MiB, is what a hostile server could make every call hold, where an API
// sends a few KiB.
const MaxResponseHeaderBytes = 1 << 20

// RedirectError is a redirect the proxy refused to follow. Only the status
// and the target's host are kept: the body of a redirect is never read,
// and the target's path and query may carry what the server chose to put
// there.
type RedirectError struct {
	// Status is the HTTP status of the redirect (301, 302, 303, 307, 308).
	Status int
	// Host is the host:port the redirect pointed to.
	Host string
	// CrossOrigin is set when the target is another origin; otherwise the
	// caller did not opt in to same-origin redirects (or there were too
	// many).
	CrossOrigin bool
	// TooMany is set when more than 10 same-origin redirects were asked.
	TooMany bool
}

func (e *RedirectError) Error() string {
	switch {
	case e.TooMany:
		return fmt.Sprintf("redirect (HTTP %d) to %s not followed: more than %d redirects", e.Status, e.Host, maxRedirects)
	case e.CrossOrigin:
		return fmt.Sprintf("redirect (HTTP %d) to %s not followed: another origin", e.Status, e.Host)
	}
	return fmt.Sprintf("redirect (HTTP %d) to %s not followed: follow_redirects is not %s", e.Status, e.Host, SameOrigin)
}

// Same reports whether a and b have one origin: scheme, host and port,
// with the scheme's default port filled in.
func Same(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && hostPort(a) == hostPort(b)
}

func hostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		switch strings.ToLower(u.Scheme) {
		case "https":
			port = "443"
		case "http":
			port = "80"
		}
	}
	return net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// CheckRedirect returns an http.Client.CheckRedirect that refuses every
// redirect with a *RedirectError, or, when sameOrigin, every redirect that
// leaves the origin of the first request. Go's client drops Authorization
// only when the host changes: another port of the same host would get it,
// so the origin is compared whole.
func CheckRedirect(sameOrigin bool) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		e := &RedirectError{Host: req.URL.Host}
		if req.Response != nil {
			e.Status = req.Response.StatusCode
		}
		switch {
		case len(via) > 0 && !Same(via[0].URL, req.URL):
			e.CrossOrigin = true
			return e
		case !sameOrigin:
			return e
		case len(via) >= maxRedirects:
			e.TooMany = true
			return e
		}
		return nil
	}
}

// Client returns a shallow copy of c (a new default client when nil) whose
// redirects follow CheckRedirect(sameOrigin).
func Client(c *http.Client, sameOrigin bool) *http.Client {
	var out http.Client
	if c != nil {
		out = *c
	}
	out.CheckRedirect = CheckRedirect(sameOrigin)
	return &out
}

// Cause returns the *RedirectError inside err (Go's client wraps it in a
// *url.Error that names the whole URL), or nil.
func Cause(err error) *RedirectError {
	var re *RedirectError
	if errors.As(err, &re) {
		return re
	}
	return nil
}

// Headers is an http.RoundTripper that sets the configured headers on the
// requests it sends to one origin, and on no other: a redirect, or a URL a
// server hands out (an SSE endpoint, a session URL), never receives them.
type Headers struct {
	// Base sends the requests; nil means http.DefaultTransport.
	Base http.RoundTripper
	// Origin is the configured URL whose origin gets the headers.
	Origin *url.URL
	// Values are the headers to set.
	Values map[string]string
}

// RoundTrip implements http.RoundTripper.
func (h *Headers) RoundTrip(r *http.Request) (*http.Response, error) {
	if h.Origin != nil && Same(h.Origin, r.URL) {
		r = r.Clone(r.Context())
		for k, v := range h.Values {
			r.Header.Set(k, v)
		}
	}
	base := h.Base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(r)
}
