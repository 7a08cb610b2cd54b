package web

import (
	"encoding/json"
	"time"

	"chainproxy/config"
)

// decodeKeepAlive reads a request's keep_alive as Ollama does: a JSON number
// of seconds or a string ("5m", "300", "-1"); absent or null is unset.
func decodeKeepAlive(raw json.RawMessage) (*time.Duration, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, invalid("keep_alive", "keep_alive must be a duration string or a number of seconds")
	}
	var text string
	switch v := v.(type) {
	case string:
		text = v
	case float64:
		text = string(raw)
	default:
		return nil, invalid("keep_alive", "keep_alive must be a duration string or a number of seconds")
	}
	d, err := config.ParseKeepAlive(text)
	if err != nil {
		return nil, invalid("keep_alive", "%v", err)
	}
	return &d, nil
}
