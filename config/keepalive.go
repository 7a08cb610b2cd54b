package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// ParseKeepAlive reads a keep_alive value in Ollama's syntax (api.Duration):
// a bare number counts seconds, anything else is a Go duration; a negative
// value keeps the model loaded for ever (returned as -1),
// zero unloads it after the call.
func ParseKeepAlive(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		switch {
		case f < 0:
			return -1, nil
		case math.IsNaN(f) || f*float64(time.Second) >= math.MaxInt64:
			return 0, fmt.Errorf("keep_alive %q: not a usable number of seconds", s)
		}
		return time.Duration(f * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("keep_alive %q: want a duration (5m), seconds (300), -1 (for ever) or 0 (unload after use)", s)
	}
	if d < 0 {
		return -1, nil
	}
	return d, nil
}
