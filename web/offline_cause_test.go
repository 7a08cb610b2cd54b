package web

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	goopenai "github.com/sashabaranov/go-openai"

	"chainproxy/config"
)

// TestAllNodesDownNamesURL: when every node is down, the client's error
// names the first failure's URL and reason, on the request that found it
// and on the next one, which skips the nodes remembered offline.
func TestAllNodesDownNamesURL(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now: connections are refused
	nodes := []config.Node{
		{Name: "OL1", Provider: config.ProviderOllama, BaseURL: dead, Model: "m1"},
		{Name: "M1", Provider: config.ProviderOpenAI, BaseURL: dead + "/v1", Model: "m2"},
		{Name: "M2", Provider: config.ProviderOpenAI, BaseURL: dead + "/v1", Model: "m3"},
	}
	client, _ := wireProxy(t, nodes, "")
	for _, attempt := range []string{"first request", "nodes remembered offline"} {
		_, err := client.CreateChatCompletion(context.Background(), goopenai.ChatCompletionRequest{
			Model: "chain/reflexive", Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: "hi"}},
		})
		var apiErr *goopenai.APIError
		if !errors.As(err, &apiErr) {
			t.Fatalf("%s: err = %v, want an API error", attempt, err)
		}
		msg := apiErr.Message
		if apiErr.HTTPStatusCode != 502 || !strings.Contains(msg, "first cause") || !strings.Contains(msg, ln.Addr().String()) || !strings.Contains(msg, "connection refused") {
			t.Errorf("%s: %d %q, want 502 naming %s and the refused connection", attempt, apiErr.HTTPStatusCode, msg, ln.Addr())
		}
	}
}
