package web

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	goopenai "github.com/sashabaranov/go-openai"

	"chainproxy/config"
)

// TestGetModel serves GET /v1/models/{id} for every listed model, to a real
// OpenAI client, and answers model_not_found for the rest.
func TestGetModel(t *testing.T) {
	s := newTestServer(t, testConfig, func(c *config.Config) { c.Server.APIKeys = nil })
	var list struct {
		Data []struct {
			ID, Object, OwnedBy string
		} `json:"data"`
	}
	resp, err := http.Get(s.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(list.Data) < 4 {
		t.Fatalf("listed %d models", len(list.Data))
	}
	cc := goopenai.DefaultConfig("unused")
	cc.BaseURL = s.URL + "/v1"
	client := goopenai.NewClientWithConfig(cc)
	for _, m := range list.Data {
		t.Run("listed "+m.ID, func(t *testing.T) {
			got, err := client.GetModel(context.Background(), m.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.ID != m.ID || got.Object != "model" {
				t.Errorf("GetModel(%q) = %+v", m.ID, got)
			}
		})
	}
	for _, id := range []string{"gpt-9", "chain/nope", "chain", "OL1/extra"} {
		t.Run("unknown "+id, func(t *testing.T) {
			resp, err := http.Get(s.URL + "/v1/models/" + (&url.URL{Path: id}).EscapedPath())
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body struct {
				Error struct {
					Message, Type, Code string
					Param               *string
				} `json:"error"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != 404 || body.Error.Code != "model_not_found" || body.Error.Type != "invalid_request_error" {
				t.Errorf("GET /v1/models/%s = %d %+v, want 404 model_not_found", id, resp.StatusCode, body.Error)
			}
		})
	}
}
