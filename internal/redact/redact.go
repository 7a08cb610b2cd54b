// Package redact masks secrets in text meant for clients, traces and logs.
//
// A Redactor is built once from the configuration (FromConfig) and masks
// each configured secret by its value, wherever it appears and whatever its
// shape: server keys, node keys, URL credentials and query values, the
// headers and environment of HTTP tools and MCP servers. Generic patterns
// (URL credentials, "Bearer …", well-known key prefixes) are a second layer
// for what the configuration does not name. Handler puts a Redactor in front
// of a slog.Handler, so that no log call site can forget it.
//
// It imports only config, so chain, tools, web and cmd/proxy can all use it.
package redact

import (
	"encoding/base64"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"chainproxy/config"
)

// Mask replaces every secret.
const Mask = "***"

// MinSecret is the shortest value masked by value: shorter ones ("1",
// "yes") would mask ordinary words everywhere.
const MinSecret = 6

var (
	// bearerRe matches a scheme and what follows it; maskCredential
	// decides whether that is a credential or a word of prose.
	bearerRe = regexp.MustCompile(`(?i)\b(?:bearer|basic)\s+[A-Za-z0-9._~+/=:-]+`)
	// keyRe matches keys of well-known providers by their prefix: OpenAI
	// and compatibles (sk-), Groq (gsk_), Google (AIza), Hugging Face
	// (hf_), GitHub (ghp_, gho_, ghu_, ghs_, ghr_, github_pat_), Slack
	// (xox?-), AWS (AKIA, and ASIA for temporary keys). A bare "sk-" or
	// "hf_" also starts ordinary names (the CSS class sk-fading-circle,
	// huggingface_hub's hf_hub_download), so it needs a key's length:
	// OpenAI's are 48 characters or more after it, unless they carry a
	// project, service account, admin or Anthropic prefix; Hugging Face's
	// are 34 letters or digits, with no underscore.
	keyRe = regexp.MustCompile(`\b(?:sk-(?:proj|svcacct|admin|ant)-[A-Za-z0-9_-]{6,}|sk-[A-Za-z0-9_-]{20,}|hf_[A-Za-z0-9]{30,}|(?:gsk_|gh[pousr]_|github_pat_|xox[abprs]-)[A-Za-z0-9_-]{6,})|\bAIza[A-Za-z0-9_-]{20,}|\b(?:AKIA|ASIA)[A-Z0-9]{12,}`)
	urlRe = regexp.MustCompile(`(?i)\b[a-z][a-z0-9+.-]*://[^\s"'<>]+`)
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

// Text masks the secrets in s by pattern: URLs (see URL), "Bearer …" and
// "Basic …" credentials, keys of well-known providers, and each of keys by
// value (keys shorter than 4 bytes are ignored). It is the second layer of
// a Redactor; prefer a Redactor, which knows the configured secrets.
func Text(s string, keys ...string) string {
	for _, k := range keys {
		if len(k) >= 4 {
			s = strings.ReplaceAll(s, k, Mask)
		}
	}
	return patterns(s)
}

// patterns applies the generic patterns, each only when a cheap test says
// it may match: most log lines and messages carry none.
func patterns(s string) string {
	if len(s) <= shortText && !mayMatch(s) {
		return s
	}
	if strings.Contains(s, "://") {
		s = urlRe.ReplaceAllStringFunc(s, URL)
	}
	if hasScheme(s) {
		s = bearerRe.ReplaceAllStringFunc(s, maskCredential)
	}
	for _, p := range keyPrefixes {
		// The regexp is slow on long text; a prefix search is not.
		if strings.Contains(s, p) {
			return keyRe.ReplaceAllStringFunc(s, maskKey)
		}
	}
	return s
}

// shortText is the length up to which mayMatch is the cheaper test: a log
// attribute (an id, a route, a status) is a few dozen bytes, and fourteen
// substring searches cost more than one pass over it; on longer text the
// searches' vector loops win.
const shortText = 64

// needles are the substrings patterns' cheap tests look for;
// needlesAt[b] are those that begin with byte b.
var (
	needles   = slices.Concat([]string{"://"}, schemeWords, keyPrefixes)
	needlesAt = func() (t [256][]string) {
		for _, n := range needles {
			t[n[0]] = append(t[n[0]], n)
		}
		return t
	}()
)

// mayMatch reports whether s holds any of needles, in one pass over s: it
// is false exactly when every one of patterns' tests would be.
func mayMatch(s string) bool {
	for i := 0; i < len(s); i++ {
		for _, n := range needlesAt[s[i]] {
			if strings.HasPrefix(s[i:], n) {
				return true
			}
		}
	}
	return false
}

// keyPrefixes are the prefixes keyRe looks for.
var keyPrefixes = []string{"sk-", "gsk_", "hf_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "xox", "AIza", "AKIA", "ASIA"}

// maskKey keeps a key's prefix, which says which provider it was for.
func maskKey(k string) string {
	for _, p := range keyPrefixes {
		if p == "xox" {
			continue
		}
		if strings.HasPrefix(k, p) {
			return p + Mask
		}
	}
	if strings.HasPrefix(k, "xox") && len(k) > 4 {
		return k[:4] + Mask
	}
	return Mask
}

// maskCredential masks what follows "Bearer" or "Basic" in m (a bearerRe
// match) when it is a credential, and returns m unchanged when it is a
// word: "Basic usage", "the bearer of", "a Bearer token." are prose, and
// masking them would garble every text that mentions HTTP authentication.
// A Basic credential is "user:password" in base64 (RFC 7617), or in clear;
// a bearer token is a word only when it is letters alone, which generated
// tokens (digits, '.', '-', '_' …) almost never are. A sentence's final
// '.' or ':' is kept outside the mask.
func maskCredential(m string) string {
	i := strings.IndexAny(m, " \t\n\f\r") // bearerRe's \s
	scheme := m[:i]
	rest := strings.TrimLeft(m[i:], " \t\n\f\r")
	token := strings.TrimRight(rest, ".:")
	if strings.EqualFold(scheme, "basic") {
		if !strings.Contains(token, ":") && !strings.Contains(decodeBase64(token), ":") {
			return m
		}
	} else if strings.IndexFunc(token, notLetter) < 0 {
		return m
	}
	return m[:len(m)-len(rest)] + Mask + rest[len(token):]
}

func notLetter(r rune) bool { return (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') }

// decodeBase64 is s decoded, with or without its padding; "" when it is
// not base64.
func decodeBase64(s string) string {
	b, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(s, "="))
	if err != nil {
		return ""
	}
	return string(b)
}

// schemeWords are what hasScheme looks for.
var schemeWords = []string{"earer", "EARER", "asic", "ASIC"}

// hasScheme reports whether s may hold a "Bearer" or "Basic" credential,
// in the spellings servers use; a substring search is much faster than the
// case-folding regexp on long text.
func hasScheme(s string) bool {
	for _, w := range schemeWords {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

// Redactor masks configured secrets by value, then the generic patterns.
// The zero value masks by pattern only. A Redactor is a small value, safe
// for concurrent use, meant to be built once and passed around by value.
type Redactor struct {
	r *strings.Replacer
	// secrets are the values masked, longest first.
	secrets []string
	// first marks the bytes a secret starts with, so that Stream rules out
	// most tails with one lookup.
	first *[256]bool
}

// New returns a Redactor of the given secret values; values shorter than
// MinSecret and duplicates are left out. A value with a "/" is also masked
// as JSON may spell it, "\/" (PHP's json_encode does by default): a
// server echoing a base64 credential in JSON writes it so.
func New(secrets ...string) Redactor {
	var keep []string
	for _, s := range secrets {
		if len(s) < MinSecret {
			continue
		}
		for _, v := range []string{s, strings.ReplaceAll(s, "/", `\/`)} {
			if !slices.Contains(keep, v) {
				keep = append(keep, v)
			}
		}
	}
	if len(keep) == 0 {
		return Redactor{}
	}
	// A secret that contains another must be tried first: the replacer
	// tries its pairs in argument order at each position.
	slices.SortStableFunc(keep, func(a, b string) int { return len(b) - len(a) })
	pairs := make([]string, 0, 2*len(keep))
	for _, s := range keep {
		pairs = append(pairs, s, Mask)
	}
	first := new([256]bool)
	for _, s := range keep {
		first[s[0]] = true
	}
	return Redactor{r: strings.NewReplacer(pairs...), secrets: keep, first: first}
}

// String masks the secrets in s.
func (r Redactor) String(s string) string {
	return patterns(r.Values(s))
}

// Empty reports whether r knows no configured secret.
func (r Redactor) Empty() bool { return r.r == nil }

// FromConfig gathers every secret the configuration holds: server
// api_keys and admin_keys, each node's api_key, the user-info (and its base64, as sent
// in "Authorization: Basic") and query values of every configured URL
// (each host of a node with base_urls too),
// and the values of the headers of HTTP tools and MCP servers and of the
// environment of MCP servers (a header's token also without its scheme).
func FromConfig(cfg *config.Config) Redactor {
	var s []string
	s = append(s, cfg.Server.APIKeys...)
	s = append(s, cfg.Server.AdminKeys...)
	for _, n := range cfg.Nodes {
		s = append(s, n.APIKey)
		for _, u := range n.Hosts() { // base_url, or each of base_urls
			s = append(s, urlSecrets(u)...)
		}
	}
	for _, h := range cfg.Tools.HTTP {
		s = append(s, httpToolSecrets(h)...)
	}
	for _, m := range cfg.Tools.MCP {
		s = append(s, urlSecrets(m.URL)...)
		s = append(s, headerSecrets(m.Headers)...)
		for k, v := range m.Env {
			if !plainEnv[k] {
				s = append(s, v)
			}
		}
	}
	s = append(s, urlSecrets(cfg.Store.RedisURL)...)
	s = append(s, headerSecrets(cfg.Telemetry.Headers)...)
	s = append(s, urlSecrets(cfg.Telemetry.Endpoint)...)
	s = append(s, urlSecrets(cfg.Telemetry.TracesEndpoint)...)
	return New(s...)
}

// HTTPTool returns a Redactor of the secrets one HTTP tool is configured
// with: its URL's user-info and query values and its headers' values, the
// secrets its endpoint is sent and so can echo. The tool uses it where it
// cuts an answer (Cut), before the process's Redactor sees the answer.
func HTTPTool(h config.HTTPTool) Redactor { return New(httpToolSecrets(h)...) }

func httpToolSecrets(h config.HTTPTool) []string {
	return append(urlSecrets(h.URL), headerSecrets(h.Headers)...)
}

// plainEnv are variables that describe the machine, not a credential.
var plainEnv = map[string]bool{"PATH": true, "HOME": true, "LANG": true, "TMPDIR": true}

// plainHeaders carry no credential; masking their values ("application/json")
// would only blank ordinary words.
var plainHeaders = map[string]bool{
	"accept": true, "accept-encoding": true, "accept-language": true, "content-type": true,
	"user-agent": true, "cache-control": true, "connection": true,
}

func headerSecrets(h map[string]string) []string {
	var out []string
	for k, v := range h {
		if plainHeaders[strings.ToLower(k)] {
			continue
		}
		out = append(out, v)
		scheme, token, ok := strings.Cut(strings.TrimSpace(v), " ")
		if !ok {
			continue
		}
		token = strings.TrimSpace(token)
		out = append(out, token)
		if strings.EqualFold(scheme, "basic") {
			if dec, err := base64.StdEncoding.DecodeString(token); err == nil {
				// The user name is no secret; the pair and the password are.
				_, pass, _ := strings.Cut(string(dec), ":")
				out = append(out, string(dec), pass)
			}
		}
	}
	return out
}

func urlSecrets(raw string) []string {
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil
	}
	var out []string
	if u.User != nil {
		user := u.User.Username()
		if pass, ok := u.User.Password(); ok {
			out = append(out, pass, url.QueryEscape(pass), base64.StdEncoding.EncodeToString([]byte(user+":"+pass)))
		} else {
			out = append(out, user) // a token given as the user name
		}
	}
	for _, vs := range u.Query() {
		for _, v := range vs {
			out = append(out, v, url.QueryEscape(v))
		}
	}
	return out
}
