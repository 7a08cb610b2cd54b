package web

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"chainproxy/chain"
	"chainproxy/internal/jsonx"
)

// This file reads the content parts of the three fronts into the chain's
// text and parts: Chat Completions' text, image_url and file parts,
// Responses' input_text, input_image and input_file, and Ollama's images.
// The proxy never fetches anything a part points to: an image is its bytes
// (a data: URL, base64) or an https URL passed to a node that fetches it
// itself, and a file its bytes or an upstream file id.

// wirePart is a content part of either OpenAI API: Chat Completions nests
// an image's URL and a file's fields in objects, Responses writes them
// flat.
type wirePart struct {
	Type string `json:"type"`
	Text string `json:"text"`
	// ImageURL is Chat Completions' {"url", "detail"} or Responses' URL
	// string.
	ImageURL json.RawMessage `json:"image_url"`
	Detail   string          `json:"detail"`
	File     *wireFile       `json:"file"`
	wireFile
	FileURL string `json:"file_url"`
}

type wireFile struct {
	FileData string `json:"file_data"`
	FileID   string `json:"file_id"`
	Filename string `json:"filename"`
}

// errContentShape is the refusal of a content that is neither a string
// nor an array of parts.
var errContentShape = errors.New("want a string or an array of content parts")

// place is where a content is in a request, "messages[2].content" for
// list "messages", index 2 and field "content" (no index when negative):
// made into a string only for an error or a part, so that reading a text
// message formats nothing.
type place struct {
	list  string
	index int
	field string
}

func (p place) String() string {
	s := p.list
	if p.index >= 0 {
		s += "[" + strconv.Itoa(p.index) + "]"
	}
	if p.field != "" {
		s += "." + p.field
	}
	return s
}

// absent reports whether a message's content was left out or sent as
// null. OpenAI and Ollama's OpenAI endpoint refuse that for every message
// but an assistant's, whose tool calls stand in for it; an empty string
// is content.
func absent(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// contentParts reads a message content at where: a string, null, or an
// array of parts, whose texts are joined and whose images and files come
// back as parts (only when parts is set: a user message; elsewhere they
// are refused). lead is where the last of several text parts starts in
// the text (0 with one): what came before it is context a client attached
// (Continue sends each @-mention as a text part before the user's own),
// which classification sets aside.
func contentParts(raw json.RawMessage, where place, parts bool) (text string, out []chain.Part, lead int, err error) {
	if absent(raw) {
		return "", nil, 0, nil
	}
	raw = bytes.TrimSpace(raw)
	switch raw[0] {
	case '"':
		if s, ok := plainString(raw); ok {
			return s, nil, 0, nil
		}
		// Escapes: a newline or a quote is in nearly every message of a
		// real conversation.
		if s, ok := jsonx.Unquote(raw); ok {
			return s, nil, 0, nil
		}
		var s string
		if err := unmarshal(raw, &s); err != nil {
			param := where.String()
			return "", nil, 0, invalid(param, "%s: %v", param, err)
		}
		return s, nil, 0, nil
	case '[':
		param := where.String()
		var list []wirePart
		if err := json.Unmarshal(raw, &list); err != nil {
			return "", nil, 0, invalid(param, "%s: %v", param, errContentShape)
		}
		if err := checkMessageParts(len(list), param); err != nil {
			return "", nil, 0, err
		}
		var b strings.Builder
		for i, p := range list {
			at := param + "[" + strconv.Itoa(i) + "]"
			switch p.Type {
			case "text", "input_text", "output_text":
				if p.Text != "" {
					lead = b.Len()
				}
				b.WriteString(p.Text)
				continue
			case "image_url", "input_image", "file", "input_file":
			default:
				return "", nil, 0, invalid(at+".type", "%s has type %q: the proxy takes text, image and file parts", at, p.Type)
			}
			if !parts {
				return "", nil, 0, invalid(at, "%s is an image or a file: only user messages take them", at)
			}
			part, err := p.part(at)
			if err != nil {
				return "", nil, 0, err
			}
			out = append(out, part)
		}
		return b.String(), out, lead, nil
	}
	param := where.String()
	return "", nil, 0, invalid(param, "%s: %v", param, errContentShape)
}

// contentText reads a content that takes text only (a tool's output).
func contentText(raw json.RawMessage, where place) (string, error) {
	text, _, _, err := contentParts(raw, where, false)
	return text, err
}

// part reads an image or file part at param.
func (p *wirePart) part(param string) (chain.Part, error) {
	switch p.Type {
	case "image_url":
		var img struct {
			URL    string `json:"url"`
			Detail string `json:"detail"`
		}
		if err := json.Unmarshal(p.ImageURL, &img); err != nil || img.URL == "" {
			return chain.Part{}, invalid(param+".image_url", `%s.image_url must be {"url": "data:… or https://…"}`, param)
		}
		return imagePart(img.URL, img.Detail, param+".image_url.url")
	case "input_image":
		var url string
		if err := json.Unmarshal(p.ImageURL, &url); err != nil || url == "" {
			if p.FileID != "" {
				return chain.Part{}, invalid(param+".file_id", "%s names file %q: the proxy keeps no files; send the image as a data: URL in image_url", param, p.FileID)
			}
			return chain.Part{}, invalid(param+".image_url", "%s.image_url must be a data: or https URL", param)
		}
		return imagePart(url, p.Detail, param+".image_url")
	case "file":
		if p.File == nil {
			return chain.Part{}, invalid(param+".file", "%s.file must be an object with file_data or file_id", param)
		}
		return filePart(*p.File, "", param+".file")
	}
	return filePart(p.wireFile, p.FileURL, param)
}

// imagePart reads an image's URL: a base64 data: URL of an image type, or
// an https URL (kept as it is, for a node that fetches it: never by the
// proxy).
func imagePart(url, detail, param string) (chain.Part, error) {
	part := chain.Part{Kind: chain.PartImage, Detail: detail, Param: param}
	if strings.HasPrefix(url, "https://") {
		part.URL = url
		return part, nil
	}
	mt, data, ok := parseDataURL(url)
	if !ok {
		return chain.Part{}, invalid(param, "%s must be a base64 data: URL (data:image/png;base64,…) or an https URL", param)
	}
	if !strings.HasPrefix(mt, "image/") {
		return chain.Part{}, invalid(param, "%s is a data: URL of type %q, not an image", param, mt)
	}
	if !validBase64(data) {
		return chain.Part{}, invalid(param, "%s: the image's base64 is invalid", param)
	}
	part.MediaType, part.Data = mt, data
	return part, nil
}

// filePart reads a file: its bytes (a base64 data: URL, or bare base64)
// or an upstream file id, passed on as they are.
func filePart(f wireFile, fileURL, param string) (chain.Part, error) {
	part := chain.Part{Kind: chain.PartFile, FileID: f.FileID, Filename: f.Filename, Param: param}
	switch {
	case fileURL != "":
		return chain.Part{}, invalid(param+".file_url", "%s has a file_url: the proxy fetches nothing; send the file's bytes in file_data", param)
	case f.FileData != "":
		if mt, data, ok := parseDataURL(f.FileData); ok {
			part.MediaType, part.Data = mt, data
		} else {
			part.Data = f.FileData
		}
		if !validBase64(part.Data) {
			return chain.Part{}, invalid(param+".file_data", "%s.file_data is not base64", param)
		}
	case f.FileID == "":
		return chain.Part{}, invalid(param, "%s has neither file_data nor file_id", param)
	}
	return part, nil
}

// parseDataURL splits "data:<type>;base64,<data>".
func parseDataURL(s string) (mediaType, data string, ok bool) {
	rest, ok := strings.CutPrefix(s, "data:")
	if !ok {
		return "", "", false
	}
	head, data, ok := strings.Cut(rest, ",")
	if !ok {
		return "", "", false
	}
	mediaType, ok = strings.CutSuffix(head, ";base64")
	if !ok {
		return "", "", false
	}
	if i := strings.IndexByte(mediaType, ';'); i >= 0 {
		mediaType = mediaType[:i] // parameters such as charset
	}
	return strings.ToLower(mediaType), data, true
}

// validBase64 reports whether s is standard base64, padded, as every
// client writes it.
func validBase64(s string) bool {
	if s == "" || len(s)%4 != 0 {
		return false
	}
	_, err := base64.StdEncoding.DecodeString(s)
	return err == nil
}

// ollamaImages reads Ollama's images, base64 strings (api.ImageData), at
// param: their type is sniffed from their first bytes, since Ollama's
// clients do not say it.
func ollamaImages(images []json.RawMessage, param string) ([]chain.Part, error) {
	out := make([]chain.Part, 0, len(images))
	for i, raw := range images {
		at := param + "[" + strconv.Itoa(i) + "]"
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, invalid(at, "%s must be a base64 string", at)
		}
		if _, data, ok := parseDataURL(s); ok {
			// Some clients send a data: URL where Ollama wants bare base64.
			s = data
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil || len(b) == 0 {
			return nil, invalid(at, "%s is not a base64 image", at)
		}
		mt := http.DetectContentType(b)
		if !strings.HasPrefix(mt, "image/") {
			return nil, invalid(at, "%s is not an image (its bytes read as %s)", at, mt)
		}
		out = append(out, chain.Part{Kind: chain.PartImage, Data: s, MediaType: mt, Param: at})
	}
	return out, nil
}
