package web

import "testing"

// TestMessagesThinkingOnlyWhenAsked is issue 41's item 13: a request
// without thinking got a thinking block first whenever a stage reasoned,
// and the SDKs' msg.content[0].text found no text there. As Anthropic's
// API, the front sends thinking blocks only when the request enables
// thinking (and does not omit its display), streamed or not; the trace
// keeps the reasoning either way.
func TestMessagesThinkingOnlyWhenAsked(t *testing.T) {
	s := newTestServer(t, testConfig)
	for _, tc := range []struct {
		name     string
		thinking string // the request's thinking member, "" for none
		want     bool
	}{
		{"absent", ``, false},
		{"null", `"thinking":null,`, false},
		{"disabled", `"thinking":{"type":"disabled"},`, false},
		{"adaptive, display omitted", `"thinking":{"type":"adaptive","display":"omitted"},`, false},
		{"enabled", `"thinking":{"type":"enabled","budget_tokens":1024},`, true},
		{"adaptive", `"thinking":{"type":"adaptive"},`, true},
	} {
		for _, stream := range []string{"false", "true"} {
			t.Run(tc.name+"/stream "+stream, func(t *testing.T) {
				x := messagesPost(t, s.URL, `{"model":"chain/reflexive","max_tokens":1024,"stream":`+stream+`,`+tc.thinking+`"messages":[{"role":"user","content":"compare things"}]}`)
				if x.status != 200 {
					t.Fatalf("status %d: %s", x.status, x.raw)
				}
				content := x.msg["content"].([]any)
				first := content[0].(map[string]any)
				if got := len(x.blocks("thinking")) > 0; got != tc.want {
					t.Errorf("thinking blocks %v, want %v: content %v", got, tc.want, content)
				}
				if !tc.want && (first["type"] != "text" || first["text"] != "Final answer from M2.") {
					t.Errorf("content[0] = %v, want the text block", first)
				}
				if x.trace == nil || x.trace.Stages[len(x.trace.Stages)-1].Reasoning != "hidden M2 thoughts" {
					t.Errorf("trace %+v, want the last stage's reasoning kept", x.trace)
				}
			})
		}
	}
}
