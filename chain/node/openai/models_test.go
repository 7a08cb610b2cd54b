package openai

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"chainproxy/chain/node"
	"chainproxy/internal/fakeopenai"
)

func TestDescribe(t *testing.T) {
	tests := []struct {
		name    string
		models  []string
		status  int
		wantErr string
	}{
		{"listed", []string{"other", "deepseek-coder-v2"}, 0, ""},
		{"lists nothing: taken at its word", []string{}, 0, ""},
		{"not listed", []string{"other"}, 0, `model "deepseek-coder-v2" not found on %s`},
		{"listing fails", nil, http.StatusInternalServerError, "HTTP 500"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := fakeopenai.New(t)
			srv.SetModels(tc.models...)
			srv.SetModelsStatus(tc.status)
			base := srv.BaseURL()
			info, err := New(nodeAt(base), nil).Describe(t.Context())
			if strings.Contains(tc.wantErr, "%s") {
				tc.wantErr = fmt.Sprintf(tc.wantErr, base)
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Describe() error = %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("Describe() error = %v, want %q", err, tc.wantErr)
			case tc.status == 0 && tc.wantErr != "" && !errors.Is(err, node.ErrModelNotFound):
				t.Errorf("Describe() error = %v, want ErrModelNotFound", err)
			}
			if info.Capabilities != nil {
				t.Errorf("Describe() capabilities = %q, want nil: OpenAI's listing has none", info.Capabilities)
			}
		})
	}
}
