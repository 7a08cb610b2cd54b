package web

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"chainproxy/antiloop"
	"chainproxy/chain"
	"chainproxy/config"
	"chainproxy/internal/nodetest"
	"chainproxy/store"
	"chainproxy/tools"
)

// floodProxy starts the proxy, wired as cmd/proxy wires it, with the
// default server limits (max_body_bytes 10 MiB) over one Ollama vision
// node whose window takes 10 MiB, as the three stages of the reflexive
// chain. The node reads each call's body and throws it away, so that the
// figures are the proxy's; received reports the bytes of its calls.
func floodProxy(t *testing.T) (url string, received *atomic.Int64) {
	t.Helper()
	received = new(atomic.Int64)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/show":
			io.WriteString(w, `{"capabilities":["completion","vision","tools"],"model_info":{"general.architecture":"llama"}}`)
		case "/api/chat":
			n, _ := io.Copy(io.Discard, r.Body)
			received.Add(n)
			io.WriteString(w, `{"model":"m","message":{"role":"assistant","content":"ok"},"done":true}`+"\n")
		default:
			io.WriteString(w, `{"version":"0.17.4"}`)
		}
	}))
	t.Cleanup(upstream.Close)
	cfg, err := config.Parse([]byte(fmt.Sprintf(`nodes:
  - {name: OV, provider: ollama, base_url: %q, model: m, context_window: 8000000}
chain:
  stages: [{node: OV, max_turns: 1}, {node: OV, max_turns: 1}, {node: OV, max_turns: 1}]
  simple_node: OV
`, upstream.URL)))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Tools.Root = t.TempDir()
	reg, err := tools.New(cfg.Tools, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := store.NewMemory(1000, 50)
	eng, err := chain.New(cfg, chain.Deps{Nodes: nodetest.Build(t, cfg, nil), Tools: reg, Resume: st,
		Guard: antiloop.NewGuard(st, cfg.Antiloop.SignatureTTL, cfg.Antiloop.CallIDTTL)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(New(Options{Config: cfg, Engine: eng, Traces: st, Keepalive: time.Hour}))
	t.Cleanup(srv.Close)
	return srv.URL, received
}

// items joins n copies of item with commas, between head and tail.
func items(head, item, tail string, n int) string {
	var b strings.Builder
	b.Grow(len(head) + n*(len(item)+1) + len(tail))
	b.WriteString(head)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(item)
	}
	b.WriteString(tail)
	return b.String()
}

// fill is items with as many copies as a body of about size bytes holds.
func fill(head, item, tail string, size int) string {
	return items(head, item, tail, (size-len(head)-len(tail))/(len(item)+1))
}

// The smallest image each front takes: "BM", the first bytes of a BMP
// file, which Ollama's front sniffs as image/bmp.
const (
	tinyImage     = `Qk0=`
	chatImagePart = `{"type":"image_url","image_url":{"url":"data:image/bmp;base64,Qk0="}}`
	respImagePart = `{"type":"input_image","image_url":"data:image/bmp;base64,Qk0="}`
	anthImageBlk  = `{"type":"image","source":{"type":"base64","media_type":"image/bmp","data":"Qk0="}}`
	textPart      = `{"type":"text","text":"a"}`
)

// TestPartFlood is issue 41's item 4: one Ollama message holding a 10 MiB
// body of tiny images was answered 200, after the proxy grew to over a
// gigabyte and sent the node a request of 100 MB. Now it is refused before
// it is decoded, and the node is never called.
func TestPartFlood(t *testing.T) {
	url, received := floodProxy(t)
	body := fill(`{"model":"OV","stream":false,"messages":[{"role":"user","content":"what is in these?","images":[`, `"`+tinyImage+`"`, `]}]}`, 10<<20-64)
	resp, err := http.Post(url+"/api/chat", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a flood of %d bytes: status %d, want 400", len(body), resp.StatusCode)
	}
	var e struct {
		Error string `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || !strings.Contains(e.Error, "JSON values") {
		t.Errorf("error %q (%v), want Ollama's {\"error\"} saying the body holds too many values", e.Error, err)
	}
	if n := received.Load(); n != 0 {
		t.Errorf("the node received %d bytes, want none", n)
	}
}

// TestPartLimits: every front bounds the parts of a message (1,000, texts
// included) and the images and files of a request (500, counted as
// decoded: an Anthropic tool result's images count with their message),
// answering 400 in its own error shape with the part named; at the limit
// the request is served.
func TestPartLimits(t *testing.T) {
	url, _ := floodProxy(t)
	const user = `{"role":"user","content":[`
	cases := []struct {
		name, path, body string
		want             int
		param            string
	}{
		{"chat 500 images", "/v1/chat/completions", `{"model":"OV","messages":[` + items(user, chatImagePart, "]}", 500) + `]}`, 200, ""},
		{"chat 501 images", "/v1/chat/completions", `{"model":"OV","messages":[` + items(user, chatImagePart, "]}", 300) + "," + items(user, chatImagePart, "]}", 201) + `]}`, 400, "messages[1].content[200].image_url.url"},
		{"chat 1001 parts", "/v1/chat/completions", `{"model":"OV","messages":[` + items(user, textPart, "]}", 1001) + `]}`, 400, "messages[0].content"},
		{"responses 501 images", "/v1/responses", `{"model":"OV","input":[` + items(user, respImagePart, "]}", 501) + `]}`, 400, "input[0].content[500].image_url"},
		{"responses 1001 parts", "/v1/responses", `{"model":"OV","input":[` + items(user, `{"type":"input_text","text":"a"}`, "]}", 1001) + `]}`, 400, "input[0].content"},
		{"anthropic 500 images", "/v1/messages", `{"model":"OV","max_tokens":9,"messages":[` + items(user, anthImageBlk, "]}", 500) + `]}`, 200, ""},
		{"anthropic 501 result images", "/v1/messages", `{"model":"OV","max_tokens":9,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"look","input":{}}]},` +
			items(`{"role":"user","content":[{"type":"text","text":"here"},{"type":"tool_result","tool_use_id":"t1","content":[`, anthImageBlk, "]}]}", 501) + `]}`, 400, "messages[1].content[1].content[500]"},
		{"anthropic 1001 system blocks", "/v1/messages", items(`{"model":"OV","max_tokens":9,"system":[`, textPart, `],"messages":[{"role":"user","content":"hi"}]}`, 1001), 400, "system"},
		{"anthropic 1001 blocks", "/v1/messages", `{"model":"OV","max_tokens":9,"messages":[` + items(user, textPart, "]}", 1001) + `]}`, 400, "messages[0].content"},
		{"ollama 500 images", "/api/chat", `{"model":"OV","stream":false,"messages":[` + items(`{"role":"user","content":"hi","images":[`, `"`+tinyImage+`"`, "]}", 500) + `]}`, 200, ""},
		{"ollama 501 images", "/api/chat", `{"model":"OV","stream":false,"messages":[` + items(`{"role":"user","content":"hi","images":[`, `"`+tinyImage+`"`, "]}", 250) + "," + items(`{"role":"user","content":"hi","images":[`, `"`+tinyImage+`"`, "]}", 251) + `]}`, 400, "messages[1].images[250]"},
		{"ollama 1001 images", "/api/chat", `{"model":"OV","stream":false,"messages":[` + items(`{"role":"user","content":"hi","images":[`, `"`+tinyImage+`"`, "]}", 1001) + `]}`, 400, "messages[0].images"},
		{"generate 501 images", "/api/generate", items(`{"model":"OV","stream":false,"prompt":"hi","images":[`, `"`+tinyImage+`"`, "]}", 501), 400, "images[500]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := http.Post(url+tc.path, "application/json", strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d, want %d: %.300s", resp.StatusCode, tc.want, b)
			}
			if tc.want == 200 {
				return
			}
			var e struct {
				Error json.RawMessage `json:"error"`
			}
			if err := json.Unmarshal(b, &e); err != nil {
				t.Fatalf("error body %s: %v", b, err)
			}
			switch {
			case strings.HasPrefix(tc.path, "/api/"):
				var msg string // Ollama's {"error": "…"}
				if json.Unmarshal(e.Error, &msg) != nil || !names(msg, tc.param) {
					t.Errorf("error %s, want Ollama's shape naming %s", e.Error, tc.param)
				}
			case tc.path == "/v1/messages":
				var obj struct{ Type, Message string }
				if json.Unmarshal(e.Error, &obj) != nil || obj.Type != "invalid_request_error" || !names(obj.Message, tc.param) {
					t.Errorf("error %s, want Anthropic's invalid_request_error naming %s", e.Error, tc.param)
				}
			default:
				var obj errorObject
				if json.Unmarshal(e.Error, &obj) != nil || obj.Param == nil || *obj.Param != tc.param {
					t.Errorf("error %s, want param %s", e.Error, tc.param)
				}
			}
		})
	}
}

// names reports whether an error message names param, as "param: …" or
// "param has …".
func names(msg, param string) bool {
	return strings.HasPrefix(msg, param+": ") || strings.HasPrefix(msg, param+" has ")
}

// TestRequestMemory bounds what one request of server.max_body_bytes (10
// MiB) allocates, whatever its shape: floods of values refused before
// decoding, and the largest requests served, through the three stages of
// the reflexive chain. Allocation (TotalAlloc) bounds the peak from above;
// docs/config.md quotes the largest figure seen.
func TestRequestMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("sends 10 MiB bodies")
	}
	url, _ := floodProxy(t)
	const size = 10<<20 - 256
	image := base64.StdEncoding.EncodeToString(append([]byte("BM"), make([]byte, 15000)...)) // 20 kB of base64
	big := strings.Repeat("a", size-200)
	bigImage := base64.StdEncoding.EncodeToString(append([]byte("BM"), make([]byte, (size-200)/4*3-3)...))
	shapes := []struct{ name, path, body string }{
		{"ollama tiny images", "/api/chat", fill(`{"model":"OV","stream":false,"messages":[{"role":"user","content":"hi","images":[`, `"`+tinyImage+`"`, `]}]}`, size)},
		{"chat empty messages", "/v1/chat/completions", fill(`{"model":"OV","messages":[`, `{}`, `]}`, size)},
		{"chat empty parts", "/v1/chat/completions", fill(`{"model":"OV","messages":[{"role":"user","content":[`, `{}`, `]}]}`, size)},
		{"chat empty tools", "/v1/chat/completions", fill(`{"model":"OV","messages":[{"role":"user","content":"a"}],"tools":[`, `{}`, `]}`, size)},
		{"anthropic empty blocks", "/v1/messages", fill(`{"model":"OV","max_tokens":9,"messages":[{"role":"user","content":[`, `{}`, `]}]}`, size)},
		{"responses empty items", "/v1/responses", fill(`{"model":"OV","input":[`, `{}`, `]}`, size)},
		{"ollama stop floods", "/api/chat", fill(`{"model":"OV","stream":false,"messages":[{"role":"user","content":"a"}],"options":{"stop":[`, `0`, `]}}`, size)},
		{"chat one text", "/v1/chat/completions", `{"model":"chain/reflexive","messages":[{"role":"user","content":"` + big + `"}]}`},
		{"chat 4096 messages", "/v1/chat/completions", items(`{"model":"chain/reflexive","messages":[`, `{"role":"user","content":"`+big[:2400]+`"}`, `]}`, 4096)},
		{"chat 60 messages of 1000 parts", "/v1/chat/completions", items(`{"model":"chain/reflexive","messages":[`, items(`{"role":"user","content":[`, `{"type":"text","text":"`+big[:140]+`"}`, `]}`, 1000), `]}`, 60)},
		{"chat 500 images", "/v1/chat/completions", items(`{"model":"chain/reflexive","messages":[{"role":"user","content":[`, `{"type":"image_url","image_url":{"url":"data:image/bmp;base64,`+image+`"}}`, `]}]}`, 500)},
		{"anthropic 500 tool result images", "/v1/messages", `{"model":"chain/reflexive","max_tokens":9,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"look","input":{}}]},` +
			items(`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[`, `{"type":"image","source":{"type":"base64","media_type":"image/bmp","data":"`+image+`"}}`, `]}]}]}`, 500)},
		{"ollama one image", "/api/chat", `{"model":"chain/reflexive","stream":false,"messages":[{"role":"user","content":"hi","images":["` + bigImage + `"]}]}`},
	}
	const limit = 400 << 20
	var most uint64
	for _, sh := range shapes {
		if len(sh.body) > 10<<20 {
			t.Fatalf("%s: the body is %d bytes, over max_body_bytes", sh.name, len(sh.body))
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		resp, err := http.Post(url+sh.path, "application/json", strings.NewReader(sh.body))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		runtime.ReadMemStats(&after)
		alloc := after.TotalAlloc - before.TotalAlloc
		most = max(most, alloc)
		t.Logf("%-35s %d bytes: status %d, %d MB allocated", sh.name, len(sh.body), resp.StatusCode, alloc>>20)
		if alloc > limit {
			t.Errorf("%s: %d MB allocated for one request, want under %d MB", sh.name, alloc>>20, limit>>20)
		}
	}
	t.Logf("at most %d MB for one request", most>>20)
}

// BenchmarkFewValues is the cost of counting a body's JSON values before
// it is decoded, on an agent's conversation of 600 messages (about 200
// kB, the size from which bodies are read) and on a body of
// max_body_bytes that is one text.
func BenchmarkFewValues(b *testing.B) {
	turn := `{"role":"user","content":"Read the file and fix the \"bug\" on line 12, please."},{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"main.go\"}"}}]},{"role":"tool","tool_call_id":"call_1","content":"package main\n\nfunc main() {\n\tprintln(\"hi\")\n}\n"}`
	for _, tc := range []struct {
		name string
		body []byte
	}{
		{"agent", []byte(items(`{"model":"m","messages":[`, turn, `]}`, 620))},
		{"10MiB-text", []byte(`{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("a", 10<<20-100) + `"}]}`)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(tc.body)))
			for b.Loop() {
				if !fewValues(tc.body, maxValues) {
					b.Fatal("refused")
				}
			}
		})
	}
}
