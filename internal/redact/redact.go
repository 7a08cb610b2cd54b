// Package redact masks secrets in text meant for clients, traces and logs:
// the user-info and query string of URLs, Bearer tokens, OpenAI-style keys
// and the configured keys themselves. It imports no project package, so
// chain, web and cmd/proxy can all use it.
package redact

import (
	"net/url"
	"regexp"
	"strings"
)

// Mask replaces every secret.
const Mask = "***"

var (
	bearerRe = regexp.MustCompile(`(?i)\b(bearer|basic)(\s+)[A-Za-z0-9._~+/=:-]+`)
	skRe     = regexp.MustCompile(`\bsk-[A-Za-z0-9_-]{6,}`)
	urlRe    = regexp.MustCompile(`(?i)\b[a-z][a-z0-9+.-]*://[^\s"'<>]+`)
)

// URL returns raw with its password and query values masked. The user name
// and query keys stay, so that a log still says which account and which
// parameter were used. A string that is not a URL is returned as is.
func URL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return raw
	}
	if _, hasPass := u.User.Password(); hasPass {
		u.User = url.UserPassword(u.User.Username(), "REDACTED")
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			q[k] = []string{Mask}
		}
		u.RawQuery = q.Encode()
	}
	// url escapes the mask's characters; show it plainly.
	return strings.ReplaceAll(strings.ReplaceAll(u.String(), url.QueryEscape(Mask), Mask), ":REDACTED@", ":"+Mask+"@")
}

// Text masks the secrets in s: URLs (see URL), "Bearer …" and "Basic …"
// credentials, sk-… keys, and each of keys (empty keys are ignored).
func Text(s string, keys ...string) string {
	for _, k := range keys {
		if len(k) >= 4 {
			s = strings.ReplaceAll(s, k, Mask)
		}
	}
	s = urlRe.ReplaceAllStringFunc(s, URL)
	s = bearerRe.ReplaceAllString(s, "${1}${2}"+Mask)
	return skRe.ReplaceAllString(s, "sk-"+Mask)
}
