package chain

import (
	"net/http"
	"testing"
	"time"

	"chainproxy/chain/node"
)

func TestRetryAfterHeader(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		value string
		want  time.Duration
	}{
		{"", 0},
		{"0", 0},
		{"30", 30 * time.Second},
		{" 5 ", 5 * time.Second},
		{"-3", 0},
		{"1.5", 0},
		{"99999999999", 0},
		{now.Add(time.Minute).Format(http.TimeFormat), time.Minute},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},
		{"tomorrow", 0},
	}
	for _, tt := range tests {
		h := http.Header{}
		if tt.value != "" {
			h.Set("Retry-After", tt.value)
		}
		if got := node.RetryAfter(h, now); got != tt.want {
			t.Errorf("RetryAfter(%q) = %v, want %v", tt.value, got, tt.want)
		}
	}
}
