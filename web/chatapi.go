package web

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"chainproxy/chain"
	"chainproxy/chain/trace"
)

// chatRequestBody is design 002's /chat request.
type chatRequestBody struct {
	Message string `json:"message"`
	History []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"history"`
	Mode   string `json:"mode"`
	Stream bool   `json:"stream"`
}

// chatResponseBody is design 002's /chat response, plus the trace id,
// reasons and usage the cockpit shows.
type chatResponseBody struct {
	TraceID   string             `json:"trace_id"`
	Reply     string             `json:"reply"`
	Mode      string             `json:"mode"`
	Reasons   []string           `json:"reasons"`
	Turns     int                `json:"turns"`
	Chain     []chain.StageTrace `json:"chain"`
	ToolsUsed []chain.ToolUse    `json:"tools_used"`
	Usage     chain.Usage        `json:"usage"`
}

func toChatResponse(traceID string, res *chain.Result) *chatResponseBody {
	capped, _ := res.Trace.Capped(trace.OutputCap)
	return &chatResponseBody{
		TraceID: traceID, Reply: res.Message.Content, Mode: res.Trace.Mode, Reasons: res.Trace.Reasons,
		Turns: res.Trace.Turns, Chain: capped.Stages, ToolsUsed: res.Trace.ToolsUsed(), Usage: res.Usage(),
	}
}

// chat serves POST /chat, the cockpit's endpoint: a message and its history
// in, the reply with its chain out; as a live event stream when asked.
func (s *Server) chat(c *gin.Context) {
	start := time.Now()
	traceID := s.begin(c, "/chat")
	body, err := s.readBody(c)
	if err != nil {
		s.reject(c, "invalid request", err)
		return
	}
	var in chatRequestBody
	if err := json.Unmarshal(body, &in); err != nil {
		s.reject(c, "invalid request", invalid("", "invalid JSON in request body: %v", err))
		return
	}
	if strings.TrimSpace(in.Message) == "" {
		s.reject(c, "invalid request", invalid("message", "message must be a non-empty string"))
		return
	}
	model := chain.ModelAuto
	switch in.Mode {
	case "", "auto":
	case chain.ModeSimple:
		model = chain.ModelSimple
	case chain.ModeReflexive:
		model = chain.ModelReflexive
	default:
		s.reject(c, "invalid request", invalid("mode", "mode %q is not one of auto, simple, reflexive", in.Mode))
		return
	}
	if err := checkHistory(len(in.History), s.cfg.Server.MaxMessages); err != nil {
		s.reject(c, "invalid request", err)
		return
	}
	req := &chain.RunRequest{TraceID: traceID, Model: model}
	for i, h := range in.History {
		if h.Role != "user" && h.Role != "assistant" && h.Role != "system" {
			s.reject(c, "invalid request", invalid("history["+itoa(i)+"].role", "history[%d].role %q is not one of user, assistant, system", i, h.Role))
			return
		}
		req.Messages = append(req.Messages, chain.Message{Role: h.Role, Content: h.Content})
	}
	req.Messages = append(req.Messages, chain.Message{Role: "user", Content: in.Message})
	req.Conversation = conversationKey(c, "", req.Messages)
	if err := applyHeaders(c, req); err != nil {
		s.reject(c, "invalid request", err)
		return
	}
	c.Header("X-Chain-Trace-Id", traceID)
	if in.Stream || strings.Contains(c.GetHeader("Accept"), "text/event-stream") {
		res, err := s.streamChat(c, req)
		s.finish(c, "/chat", traceID, start, res, nil, err)
		return
	}
	s.answer(c, &front{path: "/chat", start: start, traceID: traceID}, req, nil, nil, func(res *chain.Result, _ []byte) ([]byte, error) {
		return json.Marshal(toChatResponse(req.TraceID, res))
	})
}

// streamChat emits the run's events as named SSE events for the cockpit.
func (s *Server) streamChat(c *gin.Context, req *chain.RunRequest) (*chain.Result, error) {
	sse := newSSE(c.Writer)
	id := req.TraceID // as classified (chainID), for the keep-alive's headers too
	sse.header = func(h http.Header) { h.Set("X-Chain-Trace-Id", id) }
	emit := func(name string, v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		sse.start()
		return sse.event(name, b)
	}
	onEvent := func(ev chain.Event) error {
		switch ev.Kind {
		case chain.EventClassified:
			id = req.TraceID
			return emit(ev.Kind, gin.H{"trace_id": id, "mode": ev.Mode, "reasons": ev.Reasons})
		case chain.EventStageStart:
			return emit(ev.Kind, gin.H{"index": ev.Stage, "node": ev.Node, "model": ev.Model, "max_turns": ev.MaxTurns, "tools": ev.Tools})
		case chain.EventTurn:
			return emit(ev.Kind, gin.H{"index": ev.Stage, "node": ev.Node, "turn": ev.Turn})
		case chain.EventTool:
			return emit(ev.Kind, gin.H{"index": ev.Stage, "node": ev.Node, "turn": ev.Turn, "tool": ev.ToolUse})
		case chain.EventStageEnd:
			return emit(ev.Kind, gin.H{"index": ev.Stage, "stage": cappedStage(ev.StageTrace)})
		case chain.EventDelta:
			if ev.Content == "" {
				return nil
			}
			return emit(ev.Kind, gin.H{"content": ev.Content})
		}
		return nil
	}
	onTick := func() error {
		sse.start()
		return sse.comment("keepalive")
	}
	res, err := s.drive(c.Request.Context(), req, sse, onEvent, onTick)
	chainID(c, req)
	if err != nil {
		if !sse.started {
			s.fail(c, err)
			return nil, err
		}
		_, obj := s.statusFor(err)
		_ = emit("error", errorBody{Error: obj})
		return nil, err
	}
	return res, emit("done", toChatResponse(req.TraceID, res))
}
