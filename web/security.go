package web

import (
	"crypto/subtle"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"

	"github.com/gin-gonic/gin"

	"chainproxy/chain/trace"
)

// cockpitCSP allows the page's own scripts, styles and fetches only: no
// inline script, and no framing (clickjacking).
const cockpitCSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

// bearerToken returns the token of an "Authorization: Bearer <token>"
// header. The scheme is required and matched case-insensitively (RFC 9110
// §11.1); a bare key is not a credential.
func bearerToken(h string) (string, bool) {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

// auth checks the key when keys are configured (Bearer, else Anthropic's
// x-api-key header), in constant time,
// and records the caller's identity for scoping.
func (s *Server) auth(c *gin.Context) {
	if len(s.keys) == 0 {
		return
	}
	tok, ok := bearerToken(header(c, hAuthorization))
	if !ok {
		// Anthropic's clients (Claude Code, its SDKs) send the key so.
		tok = header(c, hAPIKey)
	}
	got := []byte(tok)
	valid, admin := 0, 0
	for _, k := range s.keys {
		valid |= subtle.ConstantTimeCompare(got, k)
	}
	for _, k := range s.admins {
		admin |= subtle.ConstantTimeCompare(got, k)
	}
	if valid|admin != 1 {
		s.reject(c, "auth", errUnauthorized)
		c.Abort()
		return
	}
	c.Set("caller", trace.CallerID(tok))
	if admin == 1 {
		c.Set("admin", true) // sees every caller's traces
	}
}

// caller is the identity auth recorded ("" when the server has no keys).
func caller(c *gin.Context) string { return c.GetString("caller") }

// reject answers a request refused before it reached a handler, with its
// log line and metric, so that refused requests are counted too.
func (s *Server) reject(c *gin.Context, why string, err error) {
	s.fail(c, err)
	status, obj := statusFor(err)
	if anthropicPath(c.Request.URL.Path) {
		status, _ = anthropicStatus(err, status, obj)
	}
	s.endSpan(c, status, nil, nil, err)
	s.log.Info("request rejected", "req_id", reqID(c), "method", c.Request.Method, "path", c.Request.URL.Path,
		"status", status, "why", why, "remote", c.Request.RemoteAddr)
	if s.metrics != nil {
		s.metrics.observeRejected(c.FullPath(), status)
	}
}

var errForbiddenOrigin = &httpError{http.StatusForbidden, "invalid_request_error", "forbidden_origin",
	"cross-origin request refused: add the page's origin to server.cors_origins to allow it"}

var errForbiddenHost = &httpError{http.StatusForbidden, "invalid_request_error", "forbidden_host",
	"Host header refused: this proxy listens on loopback; add the name to server.allowed_hosts to allow it"}

// LoopbackAddr reports whether a listen address (host:port) is loopback
// only. An empty host listens on every interface.
func LoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	return loopbackHost(host)
}

func loopbackHost(host string) bool {
	host = strings.TrimSuffix(host, ".")
	if strings.EqualFold(host, "localhost") || len(host) > len(".localhost") && strings.EqualFold(host[len(host)-len(".localhost"):], ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(strings.Trim(host, "[]")) // no allocation, unlike net.ParseIP
	return err == nil && ip.IsLoopback()
}

var (
	nosniffValue = []string{"nosniff"}
	cspValue     = []string{cockpitCSP}
)

// browserGuard refuses what a browser page on another site could make the
// proxy do: a foreign Host when bound to loopback (DNS rebinding, the class
// of CVE-2024-28224), and a request from an origin that is neither the
// proxy's own nor in server.cors_origins (a "simple" text/plain POST needs
// no preflight). Allowed origins get CORS headers and their preflights.
// Every answer gets nosniff and, for the cockpit, its CSP.
func (s *Server) browserGuard(c *gin.Context) {
	h := c.Writer.Header()
	// Shared values, set on every response without an allocation; the keys
	// are canonical already. Nothing appends to them (Add would copy: their
	// capacity is their length).
	h["X-Content-Type-Options"] = nosniffValue
	h["Content-Security-Policy"] = cspValue
	if s.loopback && !s.hostAllowed(c.Request.Host) {
		s.reject(c, "host", errForbiddenHost)
		c.Abort()
		return
	}
	origin := header(c, hOrigin)
	if origin == "" {
		return // not sent by a browser page, or same-origin GET/HEAD
	}
	h.Add("Vary", "Origin")
	if s.sameOrigin(origin, c.Request.Host) {
		return
	}
	if !s.corsAllowed(origin) {
		s.reject(c, "origin", errForbiddenOrigin)
		c.Abort()
		return
	}
	h.Set("Access-Control-Allow-Origin", origin)
	h.Set("Access-Control-Expose-Headers", "X-Chain-Trace-Id, X-Chain-Mode, Retry-After")
	if c.Request.Method == http.MethodOptions {
		h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
		h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, X-Chain-Session, X-Chain-Mode, X-Chain-Category, X-Chain-Priority, X-Chain-Render, X-Api-Key, Anthropic-Version, Anthropic-Beta")
		h.Set("Access-Control-Max-Age", "600")
		c.AbortWithStatus(http.StatusNoContent)
	}
}

func (s *Server) hostAllowed(host string) bool {
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	if loopbackHost(name) {
		return true
	}
	return slices.ContainsFunc(s.cfg.Server.AllowedHosts, func(a string) bool {
		return strings.EqualFold(a, name) || strings.EqualFold(a, host)
	})
}

// sameOrigin: the page was served by this proxy under the Host it asks.
func (s *Server) sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && strings.EqualFold(u.Host, host)
}

func (s *Server) corsAllowed(origin string) bool {
	return slices.ContainsFunc(s.cfg.Server.CORSOrigins, func(a string) bool {
		return a == "*" || strings.EqualFold(strings.TrimSuffix(a, "/"), origin)
	})
}
