package web

import (
	"testing"
	"time"
)

func TestDecodeKeepAlive(t *testing.T) {
	tests := []struct {
		raw     string
		want    *time.Duration
		wantErr bool
	}{
		{"", nil, false},
		{"null", nil, false},
		{`"5m"`, durp(5 * time.Minute), false},
		{`"300"`, durp(300 * time.Second), false},
		{"300", durp(300 * time.Second), false},
		{"0", durp(0), false},
		{`"0"`, durp(0), false},
		{"-1", durp(-1), false},
		{`"-1m"`, durp(-1), false},
		{`"soon"`, nil, true},
		{"true", nil, true},
	}
	for _, tt := range tests {
		got, err := decodeKeepAlive([]byte(tt.raw))
		if (err != nil) != tt.wantErr {
			t.Errorf("decodeKeepAlive(%s) error = %v, want error %v", tt.raw, err, tt.wantErr)
			continue
		}
		if (got == nil) != (tt.want == nil) || got != nil && *got != *tt.want {
			t.Errorf("decodeKeepAlive(%s) = %v, want %v", tt.raw, got, tt.want)
		}
	}
}

func durp(d time.Duration) *time.Duration { return &d }
