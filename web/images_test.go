package web

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ollama/ollama/api"

	"chainproxy/antiloop"
	"chainproxy/chain"
	"chainproxy/config"
	"chainproxy/internal/fakeollama"
	"chainproxy/internal/fakeopenai"
	"chainproxy/internal/nodetest"
	"chainproxy/store"
	"chainproxy/tools"
)

// The image tests run the three fronts over four nodes: OV, an Ollama
// vision model (its /api/show says vision); OT, an Ollama text model; MV,
// an OpenAI-compatible node configured with capabilities [vision]; MT, an
// OpenAI-compatible node nobody says takes images. Each upstream is a fake
// speaking its wire format, which records what it received.

// pngBytes is a real 2×2 PNG picture.
func pngBytes(t testing.TB) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 2, 2))
	img.Set(0, 0, color.RGBA{R: 255, A: 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

type imageNodes struct {
	ov, ot *fakeollama.Server
	mv, mt *fakeopenai.Server
	url    string
	eng    *chain.Engine
}

// imageProxy starts the proxy over the four nodes with the given chain
// section, wired as cmd/proxy wires it.
func imageProxy(t *testing.T, chainYAML string) *imageNodes {
	t.Helper()
	u := &imageNodes{
		ov: fakeollama.New(t, fakeollama.Reply{Content: []string{"I see ", "a red pixel."}, PromptEvalCount: 12, EvalCount: 5}),
		ot: fakeollama.New(t, fakeollama.Reply{Content: []string{"text notes"}}),
		mv: fakeopenai.New(t, fakeopenai.Reply{Content: []string{"A red pixel, says MV."}}),
		mt: fakeopenai.New(t, fakeopenai.Reply{Content: []string{"MT answers."}}),
	}
	u.ov.SetModel("llava", "completion", "vision")
	u.ot.SetModel("qwen3", "completion", "tools")
	y := fmt.Sprintf(`nodes:
  - {name: OV, provider: ollama, base_url: %q, model: llava, timeout: 10s}
  - {name: OT, provider: ollama, base_url: %q, model: qwen3, timeout: 10s}
  - {name: MV, provider: openai, base_url: %q, model: gpt-vision, timeout: 10s, capabilities: [completion, tools, vision]}
  - {name: MT, provider: openai, base_url: %q, model: gpt-text, timeout: 10s}
`, u.ov.URL, u.ot.URL, u.mv.BaseURL(), u.mt.BaseURL())
	cfg, err := config.Parse([]byte(y + chainYAML))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Tools.Root = t.TempDir()
	if err := os.WriteFile(filepath.Join(cfg.Tools.Root, "notes.md"), []byte("notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	reg, err := tools.New(cfg.Tools, nil)
	if err != nil {
		t.Fatal(err)
	}
	set := nodetest.Build(t, cfg, nil)
	st := store.NewMemory(1000, 50)
	eng, err := chain.New(cfg, chain.Deps{Nodes: set, Tools: reg, Resume: st,
		Guard: antiloop.NewGuard(st, cfg.Antiloop.SignatureTTL, cfg.Antiloop.CallIDTTL)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(New(Options{Config: cfg, Engine: eng, Traces: st, Keepalive: time.Hour}))
	t.Cleanup(srv.Close)
	u.url, u.eng = srv.URL, eng
	return u
}

const imageChain = "chain:\n  stages: [{node: OV, max_turns: 1}, {node: OT, max_turns: 1}, {node: MT, max_turns: 1}]\n  simple_node: OV\n"

// imageRequest is a request of one front with one part, to model.
type imageRequest func(model, part string) (path, body string)

// The three fronts' requests with a user message of text and one part:
// part is "image" (a data: URL of pngBytes), "url" (an https URL) or
// "file" (a PDF's bytes).
func chatImage(b64 string) imageRequest {
	return func(model, part string) (string, string) {
		p := map[string]string{
			"image": `{"type":"image_url","image_url":{"url":"data:image/png;base64,` + b64 + `","detail":"low"}}`,
			"url":   `{"type":"image_url","image_url":{"url":"https://example.com/cat.png"}}`,
			"file":  `{"type":"file","file":{"file_data":"data:application/pdf;base64,JVBERi0xLjQK","filename":"a.pdf"}}`,
		}[part]
		return "/v1/chat/completions", `{"model":"` + model + `","messages":[{"role":"user","content":[{"type":"text","text":"What is this?"},` + p + `]}]}`
	}
}

func responsesImage(b64 string) imageRequest {
	return func(model, part string) (string, string) {
		p := map[string]string{
			"image": `{"type":"input_image","image_url":"data:image/png;base64,` + b64 + `","detail":"low"}`,
			"url":   `{"type":"input_image","image_url":"https://example.com/cat.png"}`,
			"file":  `{"type":"input_file","file_data":"data:application/pdf;base64,JVBERi0xLjQK","filename":"a.pdf"}`,
		}[part]
		return "/v1/responses", `{"model":"` + model + `","input":[{"role":"user","content":[{"type":"input_text","text":"What is this?"},` + p + `]}]}`
	}
}

func messagesImage(b64 string) imageRequest {
	return func(model, part string) (string, string) {
		p := map[string]string{
			"image": `{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + b64 + `"}}`,
			"url":   `{"type":"image","source":{"type":"url","url":"https://example.com/cat.png"}}`,
			"file":  `{"type":"document","title":"a.pdf","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0xLjQK"}}`,
		}[part]
		return "/v1/messages", `{"model":"` + model + `","max_tokens":100,"messages":[{"role":"user","content":[{"type":"text","text":"What is this?"},` + p + `]}]}`
	}
}

func ollamaImage(b64 string) imageRequest {
	return func(model, part string) (string, string) {
		return "/api/chat", `{"model":"` + model + `","stream":false,"messages":[{"role":"user","content":"What is this?","images":["` + b64 + `"]}]}`
	}
}

// TestImagesEachFront: an image reaches a vision node in its wire format
// (Ollama's images bytes, OpenAI's image_url part); a node that cannot
// take it is refused with 400 naming the part, in the front's own error
// shape, and is never called; an https URL goes to an OpenAI-compatible
// node as it is and is refused for an Ollama node; a file goes to an
// OpenAI-compatible node unchanged and is refused for an Ollama node.
func TestImagesEachFront(t *testing.T) {
	pic := pngBytes(t)
	b64 := base64.StdEncoding.EncodeToString(pic)
	fronts := []struct {
		name    string
		req     imageRequest
		param   string // where the image is, for the errors
		ollama  bool   // Ollama's error shape
		noParts bool   // Ollama's API has images only
	}{
		{"chat completions", chatImage(b64), "messages[0].content[1]", false, false},
		{"responses", responsesImage(b64), "input[0].content[1]", false, false},
		{"ollama", ollamaImage(b64), "messages[0].images[0]", true, true},
		{"anthropic messages", messagesImage(b64), "messages[0].content[1]", false, false},
	}
	cases := []struct {
		name, model, part string
		status            int
		// node is the fake that must have answered; want its error's
		// words otherwise.
		node string
		want []string
	}{
		{"image to an Ollama vision node", "OV", "image", 200, "OV", nil},
		{"image to an OpenAI vision node", "MV", "image", 200, "MV", nil},
		{"image to an Ollama text node", "OT", "image", 400, "", []string{"node OT", `model "qwen3" cannot take images`, "capabilities: completion, tools", "vision"}},
		{"image to an OpenAI node nobody says sees", "MT", "image", 400, "", []string{"node MT", `model "gpt-text" cannot take images`, "does not say it takes images"}},
		{"https image to an OpenAI vision node", "MV", "url", 200, "MV", nil},
		{"https image to an Ollama vision node", "OV", "url", 400, "", []string{"https URL", "node OV is an Ollama node", "fetches nothing", "data: URL"}},
		{"file to an OpenAI node", "MT", "file", 200, "MT", nil},
		{"file to an Ollama node", "OV", "file", 400, "", []string{"a file", "Ollama takes no files"}},
	}
	for _, f := range fronts {
		for _, tc := range cases {
			if f.noParts && tc.part != "image" {
				continue
			}
			t.Run(f.name+"/"+tc.name, func(t *testing.T) {
				u := imageProxy(t, imageChain)
				path, body := f.req(tc.model, tc.part)
				resp, err := httpPost(u.url+path, body)
				if err != nil {
					t.Fatal(err)
				}
				if resp.status != tc.status {
					t.Fatalf("status %d, want %d: %s", resp.status, tc.status, resp.body)
				}
				if tc.status != 200 {
					msg, param := imageError(t, resp.body, f.ollama)
					for _, w := range tc.want {
						if !strings.Contains(msg, w) {
							t.Errorf("error %q does not say %q", msg, w)
						}
					}
					if !strings.Contains(msg, f.param) {
						t.Errorf("error %q does not name the part %s", msg, f.param)
					}
					if param != "" && !strings.HasPrefix(param, f.param) {
						t.Errorf("param %q, want the part %s", param, f.param)
					}
					if n := len(u.ov.Requests()) + len(u.ot.Requests()) + len(u.mv.Requests()) + len(u.mt.Requests()); n != 0 {
						t.Errorf("%d upstream calls for a refused request", n)
					}
					return
				}
				switch tc.node {
				case "OV":
					reqs := u.ov.Requests()
					if len(reqs) != 1 || len(reqs[0].Messages) != 1 || len(reqs[0].Messages[0].Images) != 1 || !bytes.Equal(reqs[0].Messages[0].Images[0], pic) {
						t.Fatalf("OV received %+v, want the picture's bytes in images", reqs)
					}
					if reqs[0].Messages[0].Content != "What is this?" {
						t.Errorf("OV's text %q", reqs[0].Messages[0].Content)
					}
				case "MV", "MT":
					srv := map[string]*fakeopenai.Server{"MV": u.mv, "MT": u.mt}[tc.node]
					bodies := srv.Bodies()
					if len(bodies) != 1 {
						t.Fatalf("%s got %d calls", tc.node, len(bodies))
					}
					got, _ := json.Marshal(bodies[0]["messages"].([]any)[0].(map[string]any)["content"])
					want := map[string]string{
						"image": `[{"text":"What is this?","type":"text"},{"image_url":{"detail":"low","url":"data:image/png;base64,` + b64 + `"},"type":"image_url"}]`,
						"url":   `[{"text":"What is this?","type":"text"},{"image_url":{"url":"https://example.com/cat.png"},"type":"image_url"}]`,
						"file":  `[{"text":"What is this?","type":"text"},{"file":{"file_data":"data:application/pdf;base64,JVBERi0xLjQK","filename":"a.pdf"},"type":"file"}]`,
					}[tc.part]
					if f.noParts || path == "/v1/messages" {
						// Neither Ollama's images nor Anthropic's image
						// blocks have a detail.
						want = strings.Replace(want, `"detail":"low",`, "", 1)
					}
					if string(got) != want {
						t.Errorf("%s received content\n%s\nwant\n%s", tc.node, got, want)
					}
				}
			})
		}
	}
}

type postResult struct {
	status int
	body   []byte
}

func httpPost(url, body string) (postResult, error) {
	resp, err := http.DefaultClient.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return postResult{}, err
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, err = b.ReadFrom(resp.Body)
	return postResult{resp.StatusCode, b.Bytes()}, err
}

// imageError reads an error in OpenAI's shape, or Ollama's.
func imageError(t *testing.T, body []byte, ollamaShape bool) (msg, param string) {
	t.Helper()
	if ollamaShape {
		var e ollamaErrorBody
		if err := json.Unmarshal(body, &e); err != nil || e.Error == "" {
			t.Fatalf("not Ollama's error shape: %s", body)
		}
		return e.Error, ""
	}
	var e struct {
		Type  string `json:"type"`
		Error struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
			Code    *string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err == nil && e.Type == "error" {
		// Anthropic's shape: a type and a message, the part named in it.
		if e.Error.Type != "invalid_request_error" || e.Error.Message == "" {
			t.Errorf("Anthropic error %s", body)
		}
		return e.Error.Message, ""
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Error.Param == nil || e.Error.Code == nil {
		t.Fatalf("not OpenAI's error shape with param and code: %s", body)
	}
	if e.Error.Type != "invalid_request_error" || *e.Error.Code != "image_unsupported" && *e.Error.Code != "file_unsupported" {
		t.Errorf("type %q code %q", e.Error.Type, *e.Error.Code)
	}
	return e.Error.Message, *e.Error.Param
}

// TestImagesChainOneVisionStage: in a chain of one vision stage and two
// text stages, the vision stage gets the picture, the text stages the
// text and a line saying a picture was not shown to them, and the trace's
// reasons say which stages were not shown it. A chain none of whose
// stages sees is refused.
func TestImagesChainOneVisionStage(t *testing.T) {
	pic := pngBytes(t)
	b64 := base64.StdEncoding.EncodeToString(pic)
	u := imageProxy(t, imageChain)
	resp, err := httpPost(u.url+"/api/chat", `{"model":"chain/reflexive","stream":false,"messages":[{"role":"user","content":"Describe this picture step by step","images":["`+b64+`"]}]}`)
	if err != nil {
		t.Fatal(err)
	}
	if resp.status != 200 {
		t.Fatalf("status %d: %s", resp.status, resp.body)
	}
	var out struct {
		Message api.Message `json:"message"`
		Chain   chain.Trace `json:"chain"`
	}
	if err := json.Unmarshal(resp.body, &out); err != nil {
		t.Fatal(err)
	}
	if out.Message.Content != "MT answers." || len(out.Chain.Stages) != 3 {
		t.Fatalf("answer %q with %d stages", out.Message.Content, len(out.Chain.Stages))
	}
	ov := u.ov.Requests()
	if len(ov) != 1 || !bytes.Equal(lastUserMessage(ov[0].Messages).Images[0], pic) {
		t.Fatalf("the vision stage got %+v", ov)
	}
	ot := u.ot.Requests()
	if len(ot) != 1 || len(lastUserMessage(ot[0].Messages).Images) != 0 || !strings.Contains(lastUserMessage(ot[0].Messages).Content, "[1 image of this message not shown: model qwen3 cannot take it; another stage of the chain can.]") {
		t.Fatalf("the Ollama text stage got %+v", ot)
	}
	mt := u.mt.Bodies()
	msgs := mt[0]["messages"].([]any)
	content, isText := msgs[len(msgs)-1].(map[string]any)["content"].(string)
	// The earlier stages' findings head the question.
	if len(mt) != 1 || !isText || !strings.Contains(content, "Describe this picture step by step\n[1 image of this message not shown: model gpt-text cannot take it") {
		t.Fatalf("the OpenAI text stage got %v", msgs[len(msgs)-1])
	}
	reasons := strings.Join(out.Chain.Reasons, "\n")
	for _, w := range []string{"stage 1 (node OT) was not shown 1 image part", "stage 2 (node MT) was not shown 1 image part"} {
		if !strings.Contains(reasons, w) {
			t.Errorf("reasons %q do not say %q", out.Chain.Reasons, w)
		}
	}
	if strings.Contains(reasons, "stage 0") {
		t.Errorf("reasons %q name the vision stage", out.Chain.Reasons)
	}

	blind := imageProxy(t, "chain:\n  stages: [{node: OT, max_turns: 1}, {node: MT, max_turns: 1}]\n  simple_node: OT\n")
	resp, err = httpPost(blind.url+"/v1/chat/completions", `{"model":"chain/reflexive","messages":[{"role":"user","content":[{"type":"text","text":"Describe"},{"type":"image_url","image_url":{"url":"data:image/png;base64,`+b64+`"}}]}]}`)
	if err != nil {
		t.Fatal(err)
	}
	msg, param := imageError(t, resp.body, false)
	if resp.status != 400 || param != "messages[0].content[1].image_url.url" || !strings.Contains(msg, "node OT") || !strings.Contains(msg, "node MT") {
		t.Errorf("a chain that sees nothing: %d %s", resp.status, resp.body)
	}
}

func lastUserMessage(msgs []api.Message) api.Message {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" {
			return msgs[i]
		}
	}
	return api.Message{}
}

// TestImagesResumeClientTools: a chain that pauses for the client's tool
// keeps the picture: the vision stage sees it on both sides of the pause,
// the text stages after the resume get the line in its place, and the
// trace of the resumed chain says so.
func TestImagesResumeClientTools(t *testing.T) {
	pic := pngBytes(t)
	b64 := base64.StdEncoding.EncodeToString(pic)
	u := newAgentUpstreams(t, weatherOnce)
	u.ol1.SetModel("ol1-model", "completion", "tools", "vision")
	srv := agentProxy(t, u, "", store.NewMemory(1000, 50))
	msgs := []any{map[string]any{"role": "user", "content": []any{
		map[string]any{"type": "text", "text": "What is the weather where this photo was taken?"},
		map[string]any{"type": "image_url", "image_url": map[string]any{"url": "data:image/png;base64," + b64}},
	}}}
	first := agentPost(t, srv.URL, msgs, false)
	calls := first.calls()
	if first.finish != "tool_calls" || len(calls) != 1 {
		t.Fatalf("first answer %s", first.raw)
	}
	msgs = append(msgs, first.message, map[string]any{"role": "tool", "tool_call_id": calls[0]["id"], "content": "sunny"})
	second := agentPost(t, srv.URL, msgs, true)
	if second.message["content"] != "It is sunny in Paris." || second.trace == nil {
		t.Fatalf("second answer %s", second.raw)
	}
	ol1 := u.ol1.Requests()
	if len(ol1) != 2 {
		t.Fatalf("OL1 got %d calls, want 2 (before and after the pause)", len(ol1))
	}
	for i, r := range ol1 {
		if got := lastUserMessage(r.Messages); len(got.Images) != 1 || !bytes.Equal(got.Images[0], pic) {
			t.Errorf("OL1's call %d: its user message has %d images", i, len(got.Images))
		}
	}
	for name, f := range map[string]*fakeopenai.Server{"M1": u.m1, "M2": u.m2} {
		bodies := f.Bodies()
		if len(bodies) != 1 {
			t.Fatalf("%s got %d calls", name, len(bodies))
		}
		raw, _ := json.Marshal(bodies[0]["messages"])
		if bytes.Contains(raw, []byte("image_url")) || !bytes.Contains(raw, []byte("[1 image of this message not shown: model "+strings.ToLower(name)+"-model cannot take it; another stage of the chain can.]")) {
			t.Errorf("%s received %s", name, raw)
		}
	}
	reasons := strings.Join(second.trace.Reasons, "\n")
	if !strings.Contains(reasons, "resumed in stage OL1") || !strings.Contains(reasons, "(node M1) was not shown 1 image part") || !strings.Contains(reasons, "(node M2) was not shown 1 image part") {
		t.Errorf("reasons %q", second.trace.Reasons)
	}
}

// TestOllamaShowVision: /api/show says vision for a node whose server
// does, or whose configuration does, once probed; for a chain model when
// the nodes that may answer it see: chain/simple its simple node,
// chain/reflexive a stage, chain/auto both. /api/tags lists such a model
// with the family "clip", as Ollama lists its vision models.
func TestOllamaShowVision(t *testing.T) {
	for _, tc := range []struct {
		name, chain string
		vision      map[string]bool
	}{
		{"a vision simple node and stage", imageChain, map[string]bool{"OV": true, "llava": true, "OT": false, "MV": true, "MT": false, "chain/simple": true, "chain/reflexive": true, "chain/auto": true}},
		{"a text simple node", "chain:\n  stages: [{node: OV, max_turns: 1}, {node: MT, max_turns: 1}]\n  simple_node: OT\n", map[string]bool{"chain/simple": false, "chain/reflexive": true, "chain/auto": false}},
		{"no stage sees", "chain:\n  stages: [{node: OT, max_turns: 1}, {node: MT, max_turns: 1}]\n  simple_node: MV\n", map[string]bool{"chain/simple": true, "chain/reflexive": false, "chain/auto": false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := imageProxy(t, tc.chain)
			for _, n := range []string{"OV", "OT", "MV", "MT"} {
				_ = u.eng.Probe(t.Context(), n) // as the proxy does at startup
			}
			resp, err := http.Get(u.url + "/api/tags")
			if err != nil {
				t.Fatal(err)
			}
			var tags api.ListResponse
			err = json.NewDecoder(resp.Body).Decode(&tags)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			families := map[string][]string{}
			for _, m := range tags.Models {
				families[m.Name] = m.Details.Families
			}
			for model, want := range tc.vision {
				r, err := httpPost(u.url+"/api/show", `{"model":"`+model+`"}`)
				if err != nil || r.status != 200 {
					t.Fatalf("show %s: %d %s %v", model, r.status, r.body, err)
				}
				var show api.ShowResponse
				if err := json.Unmarshal(r.body, &show); err != nil {
					t.Fatal(err)
				}
				if got := slices.Contains(show.Capabilities, "vision"); got != want {
					t.Errorf("/api/show %s: capabilities %v, vision %v, want %v", model, show.Capabilities, got, want)
				}
				tagged := model
				if !strings.Contains(model, ":") {
					tagged += ":latest"
				}
				if got := slices.Contains(families[tagged], "clip"); got != want {
					t.Errorf("/api/tags %s: families %v, want clip %v", tagged, families[tagged], want)
				}
			}
		})
	}
}

// TestImagesClassified: chain/auto judges the words beside a picture, and
// says it set the picture aside; a message that is only a picture is
// passed over for the words before it.
func TestImagesClassified(t *testing.T) {
	b64 := base64.StdEncoding.EncodeToString(pngBytes(t))
	img := `{"type":"image_url","image_url":{"url":"data:image/png;base64,` + b64 + `"}}`
	for _, tc := range []struct {
		name, messages string
		mode           string
		reasons        []string
	}{
		{"a question about a picture", `[{"role":"user","content":[{"type":"text","text":"What is in this picture?"},` + img + `]}]`, "simple",
			[]string{`text judged: "What is in this picture?"`, "set aside 1 image part"}},
		{"only a picture after an analytical question", `[{"role":"user","content":"Compare the two charts I will send"},{"role":"assistant","content":"Send them."},{"role":"user","content":[` + img + `,` + img + `]}]`, "reflexive",
			[]string{"keyword: compare", `text judged: "Compare the two charts I will send"`, "skipped 1 later user message with no words of the user's (image part)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := imageProxy(t, imageChain)
			r, err := httpPost(u.url+"/v1/chat/completions", `{"model":"chain/auto","messages":`+tc.messages+`}`)
			if err != nil || r.status != 200 {
				t.Fatalf("%d %s %v", r.status, r.body, err)
			}
			var out struct {
				Chain chain.Trace `json:"chain"`
			}
			if err := json.Unmarshal(r.body, &out); err != nil {
				t.Fatal(err)
			}
			if out.Chain.Mode != tc.mode {
				t.Errorf("mode %s, want %s (reasons %q)", out.Chain.Mode, tc.mode, out.Chain.Reasons)
			}
			for _, w := range tc.reasons {
				if !slices.Contains(out.Chain.Reasons, w) {
					t.Errorf("reasons %q lack %q", out.Chain.Reasons, w)
				}
			}
		})
	}
}
