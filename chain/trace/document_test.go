package trace

import (
	"errors"
	"testing"
)

func TestTraceStatus(t *testing.T) {
	st := func(statuses ...string) *Trace {
		tr := &Trace{}
		for _, s := range statuses {
			tr.Stages = append(tr.Stages, StageTrace{Node: "N", Status: s})
		}
		return tr
	}
	tests := []struct {
		name string
		tr   *Trace
		err  error
		want string
	}{
		{"all ok", st("ok", "ok", "ok"), nil, "ok"},
		{"first stop wins", st("stopped_repeat", "ok", "degenerate"), nil, "stopped_repeat"},
		{"degenerate answer", st("ok", "ok", "degenerate"), nil, "degenerate"},
		{"skipped offline is no stop", st("skipped_offline", "ok", "ok"), nil, "ok"},
		{"waiting for the client", st("awaiting_client"), nil, "awaiting_client"},
		{"the request failed", st("failed", "failed"), errors.New("every stage failed"), "failed"},
		{"failed with no trace", nil, errors.New("canceled"), "failed"},
		{"no stage", st(), nil, "failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := TraceStatus(tt.tr, tt.err); got != tt.want {
				t.Errorf("TraceStatus = %q, want %q", got, tt.want)
			}
		})
	}
}
