package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	"chainproxy/antiloop"
	"chainproxy/chain"
	"chainproxy/chain/node"
	"chainproxy/config"
	"chainproxy/internal/fakeollama"
	"chainproxy/internal/fakeopenai"
	"chainproxy/internal/nodetest"
	"chainproxy/store"
	"chainproxy/tools"
)

// wireProxy starts the proxy over real backends for nodes pointing at
// protocol fakes, and returns a go-openai client for it.
func wireProxy(t *testing.T, nodes []config.Node, chainYAML string) (*goopenai.Client, *httptest.Server) {
	c, srv, _ := wireProxyAdmission(t, nodes, chainYAML, 50*time.Millisecond)
	return c, srv
}

func wireProxyAdmission(t *testing.T, nodes []config.Node, chainYAML string, keepalive time.Duration) (*goopenai.Client, *httptest.Server, *node.Admission) {
	t.Helper()
	var y strings.Builder
	y.WriteString("nodes:\n")
	for _, n := range nodes {
		if n.Timeout == 0 {
			n.Timeout = 10 * time.Second
		}
		fmt.Fprintf(&y, "  - {name: %s, provider: %s, base_url: %q, model: %s, timeout: %s, max_queue: %d}\n", n.Name, n.Provider, n.BaseURL, n.Model, n.Timeout, n.MaxQueue)
	}
	cfg, err := config.Parse([]byte(y.String() + chainYAML))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Tools.Root = t.TempDir()
	if err := os.WriteFile(filepath.Join(cfg.Tools.Root, "notes.md"), []byte("the notes say 42\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	reg, err := tools.New(cfg.Tools, nil)
	if err != nil {
		t.Fatal(err)
	}
	set := nodetest.Build(t, cfg, nil)
	mem := store.NewMemory(1000, 10)
	adm := node.NewAdmission(cfg.Nodes)
	eng, err := chain.New(cfg, chain.Deps{Nodes: set, Tools: reg, Admission: adm, Guard: antiloop.NewGuard(mem, cfg.Antiloop.SignatureTTL, cfg.Antiloop.CallIDTTL)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(New(Options{Config: cfg, Engine: eng, Traces: mem, Keepalive: keepalive}))
	t.Cleanup(srv.Close)
	cc := goopenai.DefaultConfig("unused")
	cc.BaseURL = srv.URL + "/v1"
	return goopenai.NewClientWithConfig(cc), srv, adm
}

// tracedResponse is a chat completion with its "chain" member decoded.
type tracedResponse struct {
	chatResponse
	Chain *chain.Trace `json:"chain"`
}

func ollamaNode(name, url string) config.Node {
	return config.Node{Name: name, Provider: config.ProviderOllama, BaseURL: url, Model: strings.ToLower(name) + "-model", MaxQueue: 8}
}

func openaiNode(name, url string) config.Node {
	return config.Node{Name: name, Provider: config.ProviderOpenAI, BaseURL: url, Model: strings.ToLower(name) + "-model", MaxQueue: 8}
}

const oneStage = "chain:\n  stages: [{node: A, max_turns: 2}]\n  simple_node: A\n"

func TestOpenAIClientBothBackends(t *testing.T) {
	type backend struct {
		name string
		node func(t *testing.T) config.Node
	}
	backends := []backend{
		{"ollama", func(t *testing.T) config.Node {
			f := fakeollama.New(t, fakeollama.Reply{Thinking: []string{"hmm "}, Content: []string{"Hel", "lo ", "world"}, PromptEvalCount: 7, EvalCount: 3})
			return ollamaNode("A", f.URL)
		}},
		{"openai", func(t *testing.T) config.Node {
			f := fakeopenai.New(t, fakeopenai.Reply{Reasoning: []string{"hmm "}, Content: []string{"Hel", "lo ", "world"}, PromptTokens: 7, CompletionTokens: 3})
			return openaiNode("A", f.BaseURL())
		}},
	}
	for _, b := range backends {
		t.Run(b.name+"/non-stream", func(t *testing.T) {
			client, _ := wireProxy(t, []config.Node{b.node(t)}, oneStage)
			resp, err := client.CreateChatCompletion(context.Background(), goopenai.ChatCompletionRequest{
				Model: "chain/simple", Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: "hi"}},
			})
			if err != nil {
				t.Fatal(err)
			}
			m := resp.Choices[0].Message
			if m.Content != "Hello world" || m.ReasoningContent != "hmm " || resp.Choices[0].FinishReason != "stop" {
				t.Errorf("message = %+v", m)
			}
			if resp.Usage.PromptTokens != 7 || resp.Usage.CompletionTokens != 3 || !strings.HasPrefix(resp.ID, "chatcmpl-") {
				t.Errorf("usage %+v id %s", resp.Usage, resp.ID)
			}
		})
		t.Run(b.name+"/stream", func(t *testing.T) {
			client, _ := wireProxy(t, []config.Node{b.node(t)}, oneStage)
			stream, err := client.CreateChatCompletionStream(context.Background(), goopenai.ChatCompletionRequest{
				Model: "A", Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: "hi"}},
				StreamOptions: &goopenai.StreamOptions{IncludeUsage: true},
			})
			if err != nil {
				t.Fatal(err)
			}
			defer stream.Close()
			var content, reasoning strings.Builder
			var usage *goopenai.Usage
			for {
				ch, err := stream.Recv()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if len(ch.Choices) > 0 {
					content.WriteString(ch.Choices[0].Delta.Content)
					reasoning.WriteString(ch.Choices[0].Delta.ReasoningContent)
				}
				if ch.Usage != nil {
					usage = ch.Usage
				}
			}
			if content.String() != "Hello world" || reasoning.String() != "hmm " || usage == nil || usage.TotalTokens != 10 {
				t.Errorf("content %q reasoning %q usage %+v", content.String(), reasoning.String(), usage)
			}
		})
	}
}

func TestClientToolRoundTripBothBackends(t *testing.T) {
	weather := goopenai.Tool{Type: "function", Function: &goopenai.FunctionDefinition{
		Name: "get_weather", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
	}}
	nodes := map[string]func(t *testing.T) (config.Node, func() []map[string]any){
		"ollama": func(t *testing.T) (config.Node, func() []map[string]any) {
			f := fakeollama.New(t,
				fakeollama.Reply{ToolCalls: []fakeollama.ToolCall{{Name: "get_weather", Args: map[string]any{"city": "Paris"}}}},
				fakeollama.Reply{Content: []string{"Sunny in Paris."}})
			return ollamaNode("A", f.URL), f.Bodies
		},
		"openai": func(t *testing.T) (config.Node, func() []map[string]any) {
			f := fakeopenai.New(t,
				fakeopenai.Reply{ToolCalls: []fakeopenai.ToolCall{{ID: "call_w", Name: "get_weather", Arguments: `{"city":"Paris"}`}}},
				fakeopenai.Reply{Content: []string{"Sunny in Paris."}})
			return openaiNode("A", f.BaseURL()), f.Bodies
		},
	}
	for name, mk := range nodes {
		t.Run(name, func(t *testing.T) {
			node, bodies := mk(t)
			client, _ := wireProxy(t, []config.Node{node}, oneStage)
			msgs := []goopenai.ChatCompletionMessage{{Role: "user", Content: "weather in Paris?"}}
			resp, err := client.CreateChatCompletion(context.Background(), goopenai.ChatCompletionRequest{Model: "chain/auto", Messages: msgs, Tools: []goopenai.Tool{weather}})
			if err != nil {
				t.Fatal(err)
			}
			ch := resp.Choices[0]
			if ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) != 1 {
				t.Fatalf("choice = %+v", ch)
			}
			call := ch.Message.ToolCalls[0]
			if call.Function.Name != "get_weather" || call.ID == "" {
				t.Errorf("call = %+v", call)
			}
			var args map[string]string
			if err := json.Unmarshal([]byte(call.Function.Arguments), &args); err != nil || args["city"] != "Paris" {
				t.Errorf("arguments %q", call.Function.Arguments)
			}
			msgs = append(msgs, ch.Message, goopenai.ChatCompletionMessage{Role: "tool", ToolCallID: call.ID, Content: "sunny, 24°C"})
			resp, err = client.CreateChatCompletion(context.Background(), goopenai.ChatCompletionRequest{Model: "chain/auto", Messages: msgs, Tools: []goopenai.Tool{weather}})
			if err != nil {
				t.Fatal(err)
			}
			if got := resp.Choices[0].Message.Content; got != "Sunny in Paris." {
				t.Errorf("final = %q", got)
			}
			// The upstream saw the tool result tied to its call.
			second, _ := json.Marshal(bodies()[1]["messages"])
			if !strings.Contains(string(second), "sunny, 24°C") || !strings.Contains(string(second), "get_weather") {
				t.Errorf("second upstream messages = %s", second)
			}
		})
	}
}

// TestChainAcrossProtocols runs OL1 on Ollama and M1, M2 on OpenAI servers,
// and checks what each upstream was sent.
func TestChainAcrossProtocols(t *testing.T) {
	ol1 := fakeollama.New(t,
		fakeollama.Reply{ToolCalls: []fakeollama.ToolCall{{Name: "read_file", Args: map[string]any{"path": "notes.md"}}}},
		fakeollama.Reply{Content: []string{"OL1: the notes mention 42."}})
	m1 := fakeopenai.New(t, fakeopenai.Reply{Reasoning: []string{"secret plan"}, Content: []string{"M1: the answer is 42 because the notes say so."}})
	m2 := fakeopenai.New(t, fakeopenai.Reply{Content: []string{"Final: ", "42."}})
	client, _ := wireProxy(t, []config.Node{ollamaNode("OL1", ol1.URL), openaiNode("M1", m1.BaseURL()), openaiNode("M2", m2.BaseURL())}, "chain:\n  simple_node: OL1\n")
	resp, err := client.CreateChatCompletion(context.Background(), goopenai.ChatCompletionRequest{
		Model: "chain/auto", Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: "Analyse the notes and explain why"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Choices[0].Message.Content; got != "Final: 42." {
		t.Errorf("reply %q", got)
	}
	// OL1 was offered the tools; its second call carried the tool result.
	reqs := ol1.Requests()
	if len(reqs) != 2 || len(reqs[0].Tools) != 3 {
		t.Fatalf("OL1 calls %d, tools %d", len(reqs), len(reqs[0].Tools))
	}
	last := reqs[1].Messages[len(reqs[1].Messages)-1]
	if last.Role != "tool" || !strings.Contains(last.Content, "the notes say 42") {
		t.Errorf("OL1's tool message = %+v", last)
	}
	// M1 (OpenAI wire) received OL1's call, its result and notes, and no tools.
	m1Body, _ := json.Marshal(m1.Bodies()[0])
	for _, want := range []string{`read_file {\"path\":\"notes.md\"}`, "the notes say 42", "OL1: the notes mention 42."} {
		if !strings.Contains(string(m1Body), want) {
			t.Errorf("M1 body lacks %q: %s", want, m1Body)
		}
	}
	if _, ok := m1.Bodies()[0]["tools"]; ok {
		t.Error("M1 was offered tools")
	}
	// M2 received M1's synthesis, without M1's hidden reasoning.
	m2Body, _ := json.Marshal(m2.Bodies()[0])
	if !strings.Contains(string(m2Body), "the answer is 42 because") || strings.Contains(string(m2Body), "secret plan") {
		t.Errorf("M2 body = %s", m2Body)
	}
}

func TestClientDisconnectCancelsUpstream(t *testing.T) {
	for _, name := range []string{"ollama", "openai"} {
		t.Run(name, func(t *testing.T) {
			var node config.Node
			var canceled <-chan struct{}
			if name == "ollama" {
				f := fakeollama.New(t, fakeollama.Reply{Content: []string{"partial "}, Hang: true})
				node, canceled = ollamaNode("A", f.URL), f.Canceled()
			} else {
				f := fakeopenai.New(t, fakeopenai.Reply{Content: []string{"partial "}, Hang: true})
				node, canceled = openaiNode("A", f.BaseURL()), f.Canceled()
			}
			client, _ := wireProxy(t, []config.Node{node}, oneStage)
			ctx, cancel := context.WithCancel(context.Background())
			stream, err := client.CreateChatCompletionStream(ctx, goopenai.ChatCompletionRequest{
				Model: "A", Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: "hi"}},
			})
			if err != nil {
				t.Fatal(err)
			}
			ch, err := stream.Recv()
			if err != nil || ch.Choices[0].Delta.Content != "partial " && ch.Choices[0].Delta.Role != "assistant" {
				t.Fatalf("first chunk %+v %v", ch, err)
			}
			cancel()
			stream.Close()
			select {
			case <-canceled:
			case <-time.After(5 * time.Second):
				t.Fatal("the upstream never saw the client go away")
			}
		})
	}
}

func TestOfflineNodeSkipped(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now: connections are refused
	ol1 := fakeollama.New(t, fakeollama.Reply{Content: []string{"OL1 notes."}})
	m2 := fakeollama.New(t, fakeollama.Reply{Content: []string{"M2 answer."}})
	_, srv := wireProxy(t, []config.Node{ollamaNode("OL1", ol1.URL), ollamaNode("M1", closed), ollamaNode("M2", m2.URL)}, "chain:\n  simple_node: OL1\n")
	ts := &testServer{Server: srv}
	for i, wantErr := range []string{"", "remembered"} {
		start := time.Now()
		resp := ts.post(t, "/v1/chat/completions", `{"model":"chain/reflexive","messages":[{"role":"user","content":"compare"}]}`)
		var out tracedResponse
		if err := json.Unmarshal(readAll(t, resp.Body), &out); err != nil {
			t.Fatal(err)
		}
		if el := time.Since(start); el > 2*time.Second {
			t.Errorf("request %d took %v, want under 2 s", i, el)
		}
		m1 := out.Chain.Stages[1]
		if m1.Status != chain.StageSkippedOffline || !strings.Contains(m1.Error, wantErr) {
			t.Errorf("request %d: M1 = %s %q", i, m1.Status, m1.Error)
		}
		if got := *out.Choices[0].Message.Content; got != "M2 answer." {
			t.Errorf("reply %q", got)
		}
	}
}

func TestQueueFullAndDisconnectWhileQueued(t *testing.T) {
	f := fakeollama.New(t, fakeollama.Reply{Content: []string{"busy "}, Hang: true})
	node := ollamaNode("A", f.URL) // ollama: one call at a time by default
	node.MaxQueue = 1
	_, srv, adm := wireProxyAdmission(t, []config.Node{node}, oneStage, 50*time.Millisecond)
	ts := &testServer{Server: srv}
	body := `{"model":"A","stream":true,"messages":[{"role":"user","content":"hi"}]}`

	// The first request holds the node.
	ctx1, cancel1 := context.WithCancel(context.Background())
	defer cancel1()
	req1, _ := http.NewRequestWithContext(ctx1, "POST", srv.URL+"/v1/chat/completions", strings.NewReader(body))
	resp1, err := http.DefaultClient.Do(req1)
	if err != nil {
		t.Fatal(err)
	}
	defer resp1.Body.Close()
	<-f.Hanging()

	// The second waits in the queue.
	ctx2, cancel2 := context.WithCancel(context.Background())
	done2 := make(chan struct{})
	go func() {
		defer close(done2)
		req2, _ := http.NewRequestWithContext(ctx2, "POST", srv.URL+"/v1/chat/completions", strings.NewReader(body))
		if resp, err := http.DefaultClient.Do(req2); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	waitFor(t, func() bool { return adm.Queued("A") == 1 })

	// The third finds the queue full.
	resp3 := ts.post(t, "/v1/chat/completions", body)
	b3 := readAll(t, resp3.Body)
	if resp3.StatusCode != 429 || resp3.Header.Get("Retry-After") == "" || !strings.Contains(string(b3), "rate_limit_exceeded") {
		t.Errorf("third request: %d %q %s", resp3.StatusCode, resp3.Header.Get("Retry-After"), b3)
	}
	// On Anthropic's front a full queue is its overloaded_error, 529,
	// on which its clients back off and retry.
	resp4 := ts.post(t, "/v1/messages", `{"model":"A","stream":true,"max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`)
	b4 := readAll(t, resp4.Body)
	if resp4.StatusCode != StatusOverloaded || resp4.Header.Get("Retry-After") == "" || !strings.Contains(string(b4), `"type":"overloaded_error"`) {
		t.Errorf("a full queue on /v1/messages: %d %q %s", resp4.StatusCode, resp4.Header.Get("Retry-After"), b4)
	}

	// The queued client goes away: it leaves the queue at once.
	cancel2()
	<-done2
	waitFor(t, func() bool { return adm.Queued("A") == 0 })

	// The first one ends; its slot is free again.
	cancel1()
	waitFor(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		release, err := adm.Acquire(ctx, "A", false)
		if err != nil {
			return false
		}
		release()
		return true
	})
}

// waitFor polls cond for up to 5 s: for state that another goroutine
// changes, where the test has nothing to block on.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
