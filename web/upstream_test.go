package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	goopenai "github.com/sashabaranov/go-openai"

	"chainproxy/config"
	"chainproxy/internal/fakeollama"
)

// postJSON posts body to the proxy's chat endpoint and returns the status
// and the raw answer.
func postJSON(t *testing.T, url, body string) (int, []byte) {
	t.Helper()
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return resp.StatusCode, readAll(t, resp.Body)
}

// TestNoToolsNodeEndToEnd: a simple node whose model cannot take tools
// answers a plain "hi" (Ollama would 400 on the server tools), and a
// client's tools for it get a 400 that blames neither Ollama nor the
// wording of the request.
func TestNoToolsNodeEndToEnd(t *testing.T) {
	f := fakeollama.New(t, fakeollama.Reply{Content: []string{"hello"}})
	f.SetModel("a-model", "completion")
	_, srv := wireProxy(t, []config.Node{ollamaNode("A", f.URL)}, oneStage)

	status, body := postJSON(t, srv.URL, `{"model":"chain/simple","messages":[{"role":"user","content":"hi"}]}`)
	if status != http.StatusOK {
		t.Fatalf("chain/simple: %d %s", status, body)
	}
	if n := len(f.Requests()[0].Tools); n != 0 {
		t.Errorf("the node got %d tools, want none", n)
	}
	if !bytes.Contains(body, []byte("node A: model a-model cannot take tools: stage 0 runs without them")) {
		t.Errorf("trace lacks the reason: %s", body)
	}

	status, body = postJSON(t, srv.URL, `{"model":"A","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]}`)
	var e struct{ Error errorObject }
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatal(err)
	}
	if status != http.StatusBadRequest || e.Error.Code == nil || *e.Error.Code != "tools_unsupported" || !strings.Contains(e.Error.Message, `node A: model "a-model"`) {
		t.Errorf("client tools: %d %s, want 400 tools_unsupported naming node A and a-model", status, body)
	}
	if n := len(f.Requests()); n != 1 {
		t.Errorf("Ollama got %d requests, want the refused one kept from it", n)
	}
}

func TestReadyzMissingModel(t *testing.T) {
	f := fakeollama.New(t)
	f.SetModel("a-model", "completion", "tools")
	_, srv := wireProxy(t, []config.Node{ollamaNode("A", f.URL), ollamaNode("B", f.URL)}, oneStage)
	resp, err := http.Get(srv.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Status string
		Nodes  []struct {
			Name, Status, Error string
			Capabilities        []string
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`model "b-model" not found on %s: ollama pull b-model`, f.URL)
	got := fmt.Sprint(r.Nodes)
	if resp.StatusCode != http.StatusOK || r.Status != "ready" || len(r.Nodes) != 2 ||
		r.Nodes[0].Status != "ready" || strings.Join(r.Nodes[0].Capabilities, ",") != "completion,tools" ||
		r.Nodes[1].Status != "unavailable" || r.Nodes[1].Error != want {
		t.Errorf("readyz %d %s %s, want A ready with [completion tools], B unavailable: %s", resp.StatusCode, r.Status, got, want)
	}
}

func TestKeepAliveReachesOllama(t *testing.T) {
	tests := []struct {
		model, keepAlive string
		want             any
	}{
		{"A", `"0"`, "0s"},
		{"A", `-1`, float64(-1)},
		{"chain/simple", `"10m"`, "10m0s"},
		{"A", `null`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.model+"/"+tt.keepAlive, func(t *testing.T) {
			f := fakeollama.New(t)
			_, srv := wireProxy(t, []config.Node{ollamaNode("A", f.URL)}, oneStage)
			status, body := postJSON(t, srv.URL, `{"model":"`+tt.model+`","keep_alive":`+tt.keepAlive+`,"messages":[{"role":"user","content":"hi"}]}`)
			if status != http.StatusOK {
				t.Fatalf("%d %s", status, body)
			}
			got, ok := f.Bodies()[0]["keep_alive"]
			if tt.want == nil && ok || tt.want != nil && got != tt.want {
				t.Errorf("keep_alive at Ollama = %v (present %v), want %v", got, ok, tt.want)
			}
		})
	}
	t.Run("bad", func(t *testing.T) {
		f := fakeollama.New(t)
		_, srv := wireProxy(t, []config.Node{ollamaNode("A", f.URL)}, oneStage)
		status, body := postJSON(t, srv.URL, `{"model":"A","keep_alive":"soon","messages":[{"role":"user","content":"hi"}]}`)
		if status != http.StatusBadRequest || !bytes.Contains(body, []byte(`"param":"keep_alive"`)) {
			t.Errorf("%d %s, want 400 on keep_alive", status, body)
		}
	})
}

// TestLengthEndToEnd: Ollama's done_reason "length" reaches a go-openai
// client as finish_reason "length", streamed or not.
func TestLengthEndToEnd(t *testing.T) {
	f := fakeollama.New(t, fakeollama.Reply{Content: []string{"cut ", "short"}, DoneReason: "length", PromptEvalCount: 5, EvalCount: 2})
	client, _ := wireProxy(t, []config.Node{ollamaNode("A", f.URL)}, oneStage)
	//lint:ignore SA1019 max_tokens, the field most clients still send
	req := goopenai.ChatCompletionRequest{Model: "A", MaxTokens: 2, Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: "hi"}}}
	resp, err := client.CreateChatCompletion(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Choices[0].FinishReason; got != goopenai.FinishReasonLength {
		t.Errorf("non-stream finish_reason = %q, want length", got)
	}
	stream, err := client.CreateChatCompletionStream(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	var finish goopenai.FinishReason
	for {
		c, err := stream.Recv()
		if err != nil {
			break
		}
		if len(c.Choices) > 0 && c.Choices[0].FinishReason != "" {
			finish = c.Choices[0].FinishReason
		}
	}
	if finish != goopenai.FinishReasonLength {
		t.Errorf("stream finish_reason = %q, want length", finish)
	}
}
