package web

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/anthropics/anthropic-sdk-go/packages/respjson"

	"chainproxy/chain"
	"chainproxy/config"
	"chainproxy/store"
)

// strictSDK checks a value the Anthropic Go SDK decoded as strictly as the
// SDK's types allow (Anthropic publishes no schema): every field the type
// marks api:"required" was present (null where it is nullable), and no
// field had a value of the wrong type. Unions are checked as the variant
// their type names. Extra fields (the proxy's "chain") are allowed.
func strictSDK(t *testing.T, path string, v reflect.Value) {
	t.Helper()
	if !v.IsValid() {
		return
	}
	if m := v.MethodByName("AsAny"); m.IsValid() && m.Type().NumIn() == 0 {
		variant := m.Call(nil)[0]
		if variant.IsNil() {
			t.Errorf("%s: a union of no known variant", path)
			return
		}
		strictSDK(t, path, variant.Elem())
		return
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			strictSDK(t, path, v.Elem())
		}
	case reflect.Slice:
		for i := range v.Len() {
			strictSDK(t, path+"["+itoa(i)+"]", v.Index(i))
		}
	case reflect.Struct:
		meta := v.FieldByName("JSON")
		if !meta.IsValid() || meta.Kind() != reflect.Struct {
			return
		}
		typ := v.Type()
		for i := range typ.NumField() {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				continue
			}
			mf, ok := meta.FieldByName(f.Name).Interface().(respjson.Field)
			if !ok {
				continue
			}
			p := path + "." + name
			switch raw := mf.Raw(); {
			case raw == "" && f.Tag.Get("api") == "required":
				t.Errorf("%s: required by the SDK's type, missing", p)
			case raw != "" && raw != "null" && !mf.Valid():
				t.Errorf("%s: %s is not a valid %s", p, raw, f.Type)
			case raw != "" && raw != "null":
				strictSDK(t, p, v.Field(i))
			}
		}
	}
}

// sdkTrace is the proxy's trace from a decoded message's extra fields.
func sdkTrace(t *testing.T, extra map[string]respjson.Field) *chain.Trace {
	t.Helper()
	f, ok := extra["chain"]
	if !ok {
		return nil
	}
	var tr chain.Trace
	if err := json.Unmarshal([]byte(f.Raw()), &tr); err != nil {
		t.Fatalf("chain: %v", err)
	}
	return &tr
}

// TestAnthropicGoSDK runs the official Go SDK against the proxy: a client
// tool loop with Messages.New and with Messages.NewStreaming (the chain
// asks for get_weather, waits for the client, and resumes with its
// result), each answer and event decoded strictly.
func TestAnthropicGoSDK(t *testing.T) {
	for _, streaming := range []bool{false, true} {
		name := map[bool]string{false: "New", true: "NewStreaming"}[streaming]
		t.Run(name, func(t *testing.T) {
			u := newAgentUpstreams(t, weatherOnce)
			srv := agentProxy(t, u, "", store.NewMemory(0, 10))
			client := anthropic.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey("unused"), option.WithMaxRetries(0))
			params := anthropic.MessageNewParams{
				Model:     "chain/reflexive",
				MaxTokens: 1024,
				System:    []anthropic.TextBlockParam{{Text: "You are a weather assistant."}},
				Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What is the weather in Paris?"))},
				Tools: []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{
					Name: "get_weather", Description: anthropic.String("Current weather of a city"),
					InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}, Required: []string{"city"}},
				}}, {OfWebSearchTool20250305: &anthropic.WebSearchTool20250305Param{}}},
			}
			send := func() *anthropic.Message {
				t.Helper()
				ctx := context.Background()
				if !streaming {
					msg, err := client.Messages.New(ctx, params)
					if err != nil {
						t.Fatalf("Messages.New: %v", err)
					}
					strictSDK(t, "message", reflect.ValueOf(msg))
					return msg
				}
				stream := client.Messages.NewStreaming(ctx, params)
				msg := &anthropic.Message{}
				var types []string
				var deltaChain *chain.Trace
				for stream.Next() {
					ev := stream.Current()
					strictSDK(t, ev.Type, reflect.ValueOf(ev))
					if n := len(types); n == 0 || types[n-1] != ev.Type || ev.Type != "content_block_delta" {
						types = append(types, ev.Type)
					}
					if ev.Type == "message_delta" {
						deltaChain = sdkTrace(t, ev.AsMessageDelta().JSON.ExtraFields)
					}
					if err := msg.Accumulate(ev); err != nil {
						t.Fatalf("Accumulate(%s): %v", ev.Type, err)
					}
				}
				if err := stream.Err(); err != nil {
					t.Fatalf("stream: %v", err)
				}
				if types[0] != "message_start" || types[len(types)-1] != "message_stop" || types[len(types)-2] != "message_delta" {
					t.Errorf("events %v", types)
				}
				if deltaChain == nil || deltaChain.Mode != "reflexive" {
					t.Errorf("message_delta carries no trace: %+v", deltaChain)
				}
				return msg
			}
			first := send()
			if first.StopReason != anthropic.StopReasonToolUse {
				t.Fatalf("first stop_reason = %s, content %+v", first.StopReason, first.Content)
			}
			var use anthropic.ToolUseBlock
			for _, b := range first.Content {
				if b.Type == "tool_use" {
					use = b.AsToolUse()
				}
			}
			if use.Name != "get_weather" || string(use.Input) != `{"city":"Paris"}` {
				t.Fatalf("tool_use = %+v", use)
			}
			if !streaming {
				if tr := sdkTrace(t, first.JSON.ExtraFields); tr == nil || stageSummary(tr) != "OL1:awaiting_client:1[get_weather:client]" {
					t.Errorf("first trace = %+v", tr)
				}
			}
			params.Messages = append(params.Messages, first.ToParam(),
				anthropic.NewUserMessage(anthropic.NewToolResultBlock(use.ID, "sunny, 24°C", false)))
			second := send()
			var text strings.Builder
			for _, b := range second.Content {
				if b.Type == "text" {
					text.WriteString(b.AsText().Text)
				}
			}
			if second.StopReason != anthropic.StopReasonEndTurn || text.String() != "It is sunny in Paris." {
				t.Fatalf("second answer: %s %q", second.StopReason, text.String())
			}
			if !streaming {
				if tr := sdkTrace(t, second.JSON.ExtraFields); tr == nil || stageSummary(tr) != "OL1:ok:2[get_weather:ok] M1:ok:1[] M2:ok:1[]" {
					t.Errorf("resumed trace = %+v", tr)
				}
			}
			// The model never saw the server tool the client offered.
			for _, req := range u.ol1.Requests() {
				for _, tool := range req.Tools {
					if strings.Contains(tool.Function.Name, "web_search") {
						t.Errorf("OL1 was offered %s", tool.Function.Name)
					}
				}
			}
		})
	}
}

// TestAnthropicGoSDKErrors: the SDK reads the proxy's errors as its own
// typed errors, with Anthropic's error types.
func TestAnthropicGoSDKErrors(t *testing.T) {
	s := newTestServer(t, testConfig)
	client := anthropic.NewClient(option.WithBaseURL(s.URL), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	for _, tc := range []struct {
		model, wantType string
		status          int
	}{
		{"gpt-9", "not_found_error", 404},
		{"chain/auto", "invalid_request_error", 400},
	} {
		msg := anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))
		if tc.status == 400 {
			msg = anthropic.NewUserMessage(anthropic.NewImageBlockBase64("image/png", "aGk="))
		}
		_, err := client.Messages.New(context.Background(), anthropic.MessageNewParams{Model: anthropic.Model(tc.model), MaxTokens: 10, Messages: []anthropic.MessageParam{msg}})
		var apiErr *anthropic.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != tc.status {
			t.Fatalf("%s: err = %v", tc.model, err)
		}
		var body struct {
			Type  string `json:"type"`
			Error struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(apiErr.RawJSON()), &body); err != nil || body.Type != "error" || body.Error.Type != tc.wantType || body.Error.Message == "" {
			t.Errorf("%s: error body %s", tc.model, apiErr.RawJSON())
		}
	}
}

// TestAnthropicGoSDKModels: the SDK's Models.List and Models.Get read
// /v1/models, aliases included, as Anthropic's model list.
func TestAnthropicGoSDKModels(t *testing.T) {
	s := newTestServer(t, testConfig, func(c *config.Config) { c.ModelAliases = map[string]string{"claude-*": "chain/auto"} })
	client := anthropic.NewClient(option.WithBaseURL(s.URL), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	page, err := client.Models.List(context.Background(), anthropic.ModelListParams{})
	if err != nil {
		t.Fatal(err)
	}
	strictSDK(t, "models", reflect.ValueOf(page))
	var ids []string
	for _, m := range page.Data {
		ids = append(ids, m.ID)
		if m.DisplayName == "" || m.CreatedAt.IsZero() {
			t.Errorf("model %+v", m)
		}
	}
	if got := strings.Join(ids, ","); got != "chain/auto,chain/simple,chain/reflexive,OL1,M1,M2,small-1,big-1,review-1" || page.HasMore {
		t.Errorf("models = %s (has_more %v)", got, page.HasMore)
	}
	m, err := client.Models.Get(context.Background(), "claude-sonnet-4-6", anthropic.ModelGetParams{})
	if err != nil || m.ID != "claude-sonnet-4-6" || m.JSON.ExtraFields["alias_for"].Raw() != `"chain/auto"` {
		t.Fatalf("Models.Get = %+v, %v", m, err)
	}
	strictSDK(t, "model", reflect.ValueOf(m))
}
