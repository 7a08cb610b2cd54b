package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ollama/ollama/api"

	"chainproxy/internal/fakeollama"
)

// TestResumedChainUsageCountsEachCallOnce: a chain that pauses for the
// client's tool and resumes answers each request with the tokens of that
// request's own calls, on every front (Chat Completions whole and
// streamed, Ollama, Anthropic, Responses), so that a client adding up the
// usage of its answers (an agent showing its spend) counts every model
// call once. Every
// call of the fake uses 100 prompt and 7 answer tokens: the paused answer
// (OL1's tool call) is one call, the resumed one three (OL1 again, M1, M2).
func TestResumedChainUsageCountsEachCallOnce(t *testing.T) {
	fake := fakeollama.NewFunc(t, func(_ int, req *api.ChatRequest) fakeollama.Reply {
		toolResult := slices.ContainsFunc(req.Messages, func(m api.Message) bool { return m.Role == "tool" })
		if req.Model == "o" && len(req.Tools) > 0 && !toolResult {
			return fakeollama.Reply{ToolCalls: []fakeollama.ToolCall{{ID: "call_w", Name: "get_weather", Args: map[string]any{"city": "Paris"}}}, PromptEvalCount: 100, EvalCount: 7}
		}
		return fakeollama.Reply{Content: []string{"Sunny."}, PromptEvalCount: 100, EvalCount: 7}
	})
	base := startWired(t, fmt.Sprintf(`
nodes:
  - {name: OL1, provider: ollama, base_url: %[1]q, model: o}
  - {name: M1, provider: ollama, base_url: %[1]q, model: m1}
  - {name: M2, provider: ollama, base_url: %[1]q, model: m2}
chain:
  stages: [{node: OL1, max_turns: 2, tools: true}, {node: M1, max_turns: 1}, {node: M2, max_turns: 1}]
  simple_node: OL1
  max_total_turns: 4
`, fake.URL))
	const tool = `"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]`
	type usage struct{ prompt, completion int }
	post := func(t *testing.T, path, body string) []byte { return postOK(t, base+path, body) }
	// chatStyle runs the pause and the resumption on a front whose
	// conversation is a list of messages with the tool's result in a
	// "tool" message; ask sends the messages (JSON) and returns the
	// answer's message (JSON, to send back) and its usage.
	chatStyle := func(ask func(t *testing.T, messages string) (json.RawMessage, usage)) func(*testing.T, string) (usage, usage) {
		return func(t *testing.T, question string) (usage, usage) {
			user := fmt.Sprintf(`{"role":"user","content":%q}`, question)
			paused, first := ask(t, user)
			var call struct {
				ToolCalls []struct{ ID string } `json:"tool_calls"`
			}
			if err := json.Unmarshal(paused, &call); err != nil || len(call.ToolCalls) != 1 {
				t.Fatalf("paused answer's message = %s, want one tool call", paused)
			}
			result := fmt.Sprintf(`{"role":"tool","tool_call_id":%q,"content":"sunny"}`, call.ToolCalls[0].ID)
			if call.ToolCalls[0].ID == "" { // the Ollama front names no call ids
				result = `{"role":"tool","tool_name":"get_weather","content":"sunny"}`
			}
			_, second := ask(t, user+","+string(paused)+","+result)
			return first, second
		}
	}
	for _, tc := range []struct {
		name string
		// run asks question, answers the tool call of the paused answer
		// and returns the usage of both answers.
		run func(t *testing.T, question string) (first, second usage)
	}{
		{"chat completions", chatStyle(func(t *testing.T, messages string) (json.RawMessage, usage) {
			var out struct {
				Choices []struct{ Message json.RawMessage } `json:"choices"`
				Usage   struct {
					PromptTokens     int `json:"prompt_tokens"`
					CompletionTokens int `json:"completion_tokens"`
				}
			}
			body := post(t, "/v1/chat/completions", `{"model":"chain/reflexive","messages":[`+messages+`],`+tool+`}`)
			if err := json.Unmarshal(body, &out); err != nil || len(out.Choices) != 1 {
				t.Fatalf("answer %s: %v", body, err)
			}
			return out.Choices[0].Message, usage{out.Usage.PromptTokens, out.Usage.CompletionTokens}
		})},
		{"chat completions streamed", chatStyle(func(t *testing.T, messages string) (json.RawMessage, usage) {
			body := post(t, "/v1/chat/completions", `{"model":"chain/reflexive","stream":true,"stream_options":{"include_usage":true},"messages":[`+messages+`],`+tool+`}`)
			var u usage
			var content strings.Builder
			var calls []map[string]any
			for line := range strings.Lines(string(body)) {
				data, ok := strings.CutPrefix(strings.TrimSpace(line), "data: ")
				if !ok || data == "[DONE]" {
					continue
				}
				var chunk struct {
					Choices []struct {
						Delta struct {
							Content   string
							ToolCalls []map[string]any `json:"tool_calls"`
						}
					}
					Usage *struct {
						PromptTokens     int `json:"prompt_tokens"`
						CompletionTokens int `json:"completion_tokens"`
					}
				}
				if err := json.Unmarshal([]byte(data), &chunk); err != nil {
					t.Fatalf("chunk %s: %v", data, err)
				}
				if chunk.Usage != nil {
					u = usage{chunk.Usage.PromptTokens, chunk.Usage.CompletionTokens}
				}
				for _, c := range chunk.Choices {
					content.WriteString(c.Delta.Content)
					calls = append(calls, c.Delta.ToolCalls...)
				}
			}
			msg := map[string]any{"role": "assistant", "content": content.String()}
			if len(calls) > 0 {
				msg["tool_calls"] = calls
			}
			b, _ := json.Marshal(msg)
			return b, u
		})},
		{"ollama", chatStyle(func(t *testing.T, messages string) (json.RawMessage, usage) {
			var out struct {
				Message         json.RawMessage
				PromptEvalCount int `json:"prompt_eval_count"`
				EvalCount       int `json:"eval_count"`
			}
			body := post(t, "/api/chat", `{"model":"chain/reflexive","stream":false,"messages":[`+messages+`],`+tool+`}`)
			if err := json.Unmarshal(body, &out); err != nil {
				t.Fatalf("answer %s: %v", body, err)
			}
			return out.Message, usage{out.PromptEvalCount, out.EvalCount}
		})},
		{"anthropic", func(t *testing.T, question string) (usage, usage) {
			const tool = `"tools":[{"name":"get_weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}]`
			type answer struct {
				Content json.RawMessage
				Usage   struct {
					InputTokens  int `json:"input_tokens"`
					OutputTokens int `json:"output_tokens"`
				}
			}
			ask := func(messages string) answer {
				var out answer
				body := post(t, "/v1/messages", `{"model":"chain/reflexive","max_tokens":200,"messages":[`+messages+`],`+tool+`}`)
				if err := json.Unmarshal(body, &out); err != nil {
					t.Fatalf("answer %s: %v", body, err)
				}
				return out
			}
			user := fmt.Sprintf(`{"role":"user","content":%q}`, question)
			paused := ask(user)
			var blocks []struct{ Type, ID string }
			if err := json.Unmarshal(paused.Content, &blocks); err != nil || !slices.ContainsFunc(blocks, func(b struct{ Type, ID string }) bool { return b.Type == "tool_use" }) {
				t.Fatalf("paused answer's content = %s, want a tool_use", paused.Content)
			}
			id := blocks[slices.IndexFunc(blocks, func(b struct{ Type, ID string }) bool { return b.Type == "tool_use" })].ID
			resumed := ask(user + `,{"role":"assistant","content":` + string(paused.Content) + `},` +
				fmt.Sprintf(`{"role":"user","content":[{"type":"tool_result","tool_use_id":%q,"content":"sunny"}]}`, id))
			return usage{paused.Usage.InputTokens, paused.Usage.OutputTokens}, usage{resumed.Usage.InputTokens, resumed.Usage.OutputTokens}
		}},
		{"responses", func(t *testing.T, question string) (usage, usage) {
			const tool = `"tools":[{"type":"function","name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}]`
			type answer struct {
				Output []json.RawMessage
				Usage  struct {
					InputTokens  int `json:"input_tokens"`
					OutputTokens int `json:"output_tokens"`
				}
			}
			ask := func(input string) answer {
				var out answer
				body := post(t, "/v1/responses", `{"model":"chain/reflexive","input":[`+input+`],`+tool+`}`)
				if err := json.Unmarshal(body, &out); err != nil {
					t.Fatalf("answer %s: %v", body, err)
				}
				return out
			}
			user := fmt.Sprintf(`{"role":"user","content":%q}`, question)
			paused := ask(user)
			var call json.RawMessage
			var callID string
			for _, item := range paused.Output {
				var it struct {
					Type   string
					CallID string `json:"call_id"`
				}
				if json.Unmarshal(item, &it) == nil && it.Type == "function_call" {
					call, callID = item, it.CallID
				}
			}
			if call == nil {
				t.Fatalf("paused answer's output = %s, want a function_call", paused.Output)
			}
			resumed := ask(user + "," + string(call) + fmt.Sprintf(`,{"type":"function_call_output","call_id":%q,"output":"sunny"}`, callID))
			return usage{paused.Usage.InputTokens, paused.Usage.OutputTokens}, usage{resumed.Usage.InputTokens, resumed.Usage.OutputTokens}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first, second := tc.run(t, fmt.Sprintf("Review this plan against the weather in Paris (%s).", tc.name))
			if want := (usage{100, 7}); first != want {
				t.Errorf("paused answer's usage = %+v, want %+v (OL1's tool call)", first, want)
			}
			if want := (usage{300, 21}); second != want {
				t.Errorf("resumed answer's usage = %+v, want %+v (OL1, M1, M2 after the client's result)", second, want)
			}
		})
	}
}
