package web

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"chainproxy/chain"
	"chainproxy/chain/node"
	"chainproxy/chain/trace"
)

// StatusClientClosed is nginx's 499: the client went away before the answer.
// It is only logged; nobody is left to read it.
const StatusClientClosed = 499

// errorBody is OpenAI's error shape, plus the chain trace when a run failed.
type errorBody struct {
	Error errorObject `json:"error"`
}

type errorObject struct {
	Message string       `json:"message"`
	Type    string       `json:"type"`
	Param   *string      `json:"param"`
	Code    *string      `json:"code"`
	Chain   *chain.Trace `json:"chain,omitempty"`
}

// ollamaErrorBody is Ollama's error shape, which its clients read on every
// /api/ path: {"error": "…"}.
type ollamaErrorBody struct {
	Error string `json:"error"`
}

// ollamaPath reports whether path is one of Ollama's API, whose errors take
// Ollama's shape.
func ollamaPath(path string) bool { return strings.HasPrefix(path, "/api/") }

// httpError is an error the HTTP layer produced itself with a fixed answer.
type httpError struct {
	status  int
	typ     string
	code    string
	message string
}

func (e *httpError) Error() string { return e.message }

var (
	errUnauthorized = &httpError{http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "invalid API key: send it as 'Authorization: Bearer <key>' (or 'x-api-key: <key>')"}
	errTooLarge     = &httpError{http.StatusRequestEntityTooLarge, "invalid_request_error", "request_too_large", "request body too large"}
	errNotFound     = &httpError{http.StatusNotFound, "invalid_request_error", "not_found", "no such endpoint"}
	errMethod       = &httpError{http.StatusMethodNotAllowed, "invalid_request_error", "method_not_allowed", "method not allowed"}
)

// notServed is the 404 for path: for an endpoint of the APIs the proxy
// speaks that it does not serve, one that says so and where to send the
// request instead. Clients configured with one base URL for everything
// (Open WebUI's embeddings for documents, an editor's completions) read
// that rather than "no such endpoint".
func notServed(path string) error {
	var why string
	switch path {
	case "/v1/embeddings", "/api/embed", "/api/embeddings":
		why = "the proxy does not serve embeddings (" + path + "): it answers chat through the chain; send embedding requests to the model server itself"
	case "/v1/completions":
		why = "the proxy does not serve the legacy completions API (/v1/completions): use /v1/chat/completions, or Ollama's /api/generate"
	case "/api/create", "/api/delete", "/api/copy", "/api/push":
		why = "the proxy does not manage models (" + path + "): do it on the Ollama server itself"
	case "/chat/completions", "/responses", "/messages", "/messages/count_tokens", "/models":
		// A base URL without /v1: OpenAI's SDKs add only the endpoint's
		// own path to it.
		why = "no such endpoint " + path + ": the OpenAI and Anthropic APIs are under /v1: add /v1 to the client's base URL (http://host:port/v1), so that it sends /v1" + path
	default:
		if !strings.HasPrefix(path, "/api/blobs/") {
			return errNotFound
		}
		why = "the proxy does not manage models (/api/blobs): do it on the Ollama server itself"
	}
	return &httpError{errNotFound.status, errNotFound.typ, errNotFound.code, why}
}

// statusFor maps an error to its HTTP status and OpenAI error object. It is
// the one place where errors become HTTP.
func statusFor(err error) (int, errorObject) {
	obj := errorObject{Message: err.Error()}
	var (
		he  *httpError
		br  *badRequest
		ue  *node.UpstreamError
		fl  *chain.Failure
		qe  *node.QueueFullError
		pe  *chain.PartError
		set = func(status int, typ, code string) (int, errorObject) {
			obj.Type = typ
			if code != "" {
				obj.Code = &code
			}
			return status, obj
		}
	)
	if errors.As(err, &fl) {
		tr, _ := fl.Trace.Capped(trace.OutputCap)
		obj.Chain = &tr
	}
	switch {
	case errors.As(err, &he):
		return set(he.status, he.typ, he.code)
	case errors.As(err, &br):
		if br.param != "" {
			obj.Param = &br.param
		}
		return set(http.StatusBadRequest, "invalid_request_error", cmp.Or(br.code, "invalid_request"))
	case errors.Is(err, chain.ErrUnknownModel):
		p := "model"
		obj.Param = &p
		obj.Message = strings.TrimPrefix(err.Error(), "chain: ") + "; see GET /v1/models"
		return set(http.StatusNotFound, "invalid_request_error", "model_not_found")
	case errors.Is(err, node.ErrToolsUnsupported):
		p := "tools"
		obj.Param = &p
		obj.Message = strings.TrimPrefix(err.Error(), "chain: ")
		return set(http.StatusBadRequest, "invalid_request_error", "tools_unsupported")
	case errors.As(err, &pe):
		p := cmp.Or(pe.Param, "messages")
		obj.Param = &p
		obj.Message = strings.TrimPrefix(err.Error(), "chain: ")
		if pe.Kind == chain.PartFile {
			return set(http.StatusBadRequest, "invalid_request_error", "file_unsupported")
		}
		return set(http.StatusBadRequest, "invalid_request_error", "image_unsupported")
	case errors.Is(err, chain.ErrContextLength):
		// OpenAI's own code for a prompt longer than the model's window:
		// clients know to shorten the conversation on it.
		p := "messages"
		obj.Param = &p
		obj.Message = strings.TrimPrefix(err.Error(), "chain: ")
		return set(http.StatusBadRequest, "invalid_request_error", "context_length_exceeded")
	case errors.As(err, &qe):
		return set(http.StatusTooManyRequests, "rate_limit_exceeded", "rate_limit_exceeded")
	case errors.Is(err, context.Canceled):
		return set(StatusClientClosed, "client_closed", "client_closed")
	case errors.As(err, &ue):
		switch {
		case ue.Kind == node.KindTimeout:
			return set(http.StatusGatewayTimeout, "upstream_error", "upstream_timeout")
		case ue.Kind == node.KindStatus && ue.Status == http.StatusTooManyRequests:
			return set(http.StatusTooManyRequests, "rate_limit_exceeded", "upstream_rate_limited")
		case ue.Kind == node.KindStatus && (ue.Status == http.StatusBadRequest || ue.Status == http.StatusUnprocessableEntity || ue.Status == http.StatusRequestEntityTooLarge):
			// The upstream rejected the content (say, a context too long):
			// that is the client's to fix.
			return set(ue.Status, "invalid_request_error", "upstream_rejected")
		}
		return set(http.StatusBadGateway, "upstream_error", "upstream_error")
	case errors.Is(err, context.DeadlineExceeded):
		return set(http.StatusGatewayTimeout, "upstream_error", "upstream_timeout")
	case errors.Is(err, chain.ErrAllStagesFailed):
		// The message names the first stage's cause (chain puts it there).
		return set(http.StatusBadGateway, "upstream_error", "chain_failed")
	}
	return set(http.StatusInternalServerError, "server_error", "internal_error")
}

// anthropicErrorBody is Anthropic's error shape, which its SDKs and Claude
// Code read on /v1/messages: {"type": "error", "error": {"type", "message"}},
// plus the chain trace when a run failed.
type anthropicErrorBody struct {
	Type  string         `json:"type"`
	Error anthropicError `json:"error"`
}

type anthropicError struct {
	Type    string       `json:"type"`
	Message string       `json:"message"`
	Chain   *chain.Trace `json:"chain,omitempty"`
}

// StatusOverloaded is Anthropic's 529: its clients back off and retry on
// it, as they should when a node's queue is full.
const StatusOverloaded = 529

// anthropicPath reports whether path is the Messages API's, whose errors
// take Anthropic's shape.
func anthropicPath(path string) bool { return strings.HasPrefix(path, "/v1/messages") }

// anthropicStatus maps an error, as statusFor mapped it, to the status and
// error type Anthropic gives: a full queue is overloaded_error (529), the
// rest follows the status.
func anthropicStatus(err error, status int, obj errorObject) (int, anthropicErrorBody) {
	body := anthropicErrorBody{Type: "error", Error: anthropicError{Message: obj.Message, Chain: obj.Chain}}
	// A full queue: the error itself, or, at the end of a stream, the code
	// statusFor gives it (an upstream's 429 has another).
	var qe *node.QueueFullError
	if errors.As(err, &qe) || err == nil && obj.Code != nil && *obj.Code == "rate_limit_exceeded" {
		status = StatusOverloaded
	}
	switch {
	case status == http.StatusUnauthorized:
		body.Error.Type = "authentication_error"
	case status == http.StatusForbidden:
		body.Error.Type = "permission_error"
	case status == http.StatusNotFound:
		body.Error.Type = "not_found_error"
	case status == http.StatusRequestEntityTooLarge:
		body.Error.Type = "request_too_large"
	case status == http.StatusTooManyRequests:
		body.Error.Type = "rate_limit_error"
	case status == StatusOverloaded:
		body.Error.Type = "overloaded_error"
	case status == http.StatusGatewayTimeout:
		body.Error.Type = "timeout_error"
	case status >= 500:
		body.Error.Type = "api_error"
	default:
		body.Error.Type = "invalid_request_error"
	}
	return status, body
}

// badRequest is an invalid request, reported as 400 with the offending param.
type badRequest struct {
	param string
	msg   string
	// code, when set, is OpenAI's own code for the refusal
	// (unsupported_parameter, unsupported_value), which clients match on.
	code string
}

func (e *badRequest) Error() string { return e.msg }

func invalid(param, format string, args ...any) error {
	return &badRequest{param: param, msg: fmt.Sprintf(format, args...)}
}

func unsupported(param, code, msg string) error {
	return &badRequest{param: param, msg: msg, code: code}
}
