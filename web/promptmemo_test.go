package web

import (
	"strings"
	"testing"
)

// TestPromptMemo: a remembered text is masked as it would be again, each
// long text is masked once, and the memo stays within its bound.
func TestPromptMemo(t *testing.T) {
	calls := 0
	p := promptMemo{m: map[string]string{}, redact: func(s string) string {
		calls++
		return strings.ReplaceAll(s, "sk-secret", "[REDACTED]")
	}}
	long := strings.Repeat("You are a helpful assistant. ", 10)
	for _, tc := range []struct{ in, want string }{
		{long + "key sk-secret", long + "key [REDACTED]"},
		{long, long},
		{"short sk-secret", "short [REDACTED]"},
	} {
		for i := range 3 {
			if got := p.String(tc.in); got != tc.want {
				t.Fatalf("call %d: String(%.30q…) = %.30q…, want %.30q…", i, tc.in, got, tc.want)
			}
		}
	}
	if calls != 1+1+3 {
		t.Errorf("%d maskings for two long texts and a short one, three times each; want 5", calls)
	}
	for i := range 3 * promptMemoCap {
		p.String(long + strings.Repeat("x", i))
	}
	if len(p.m) > promptMemoCap {
		t.Errorf("memo holds %d texts, bound %d", len(p.m), promptMemoCap)
	}
}
