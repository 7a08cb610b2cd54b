package chain

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"chainproxy/chain/trace"
	"chainproxy/config"
	"chainproxy/memory"
)

// CapVision is the capability of a model that takes images, as Ollama's
// /api/show names it.
const CapVision = "vision"

// ErrPartUnsupported is wrapped by the error of a request with an image or
// a file that no node answering it can take: the client's to fix.
var ErrPartUnsupported = errors.New("no node answering the request can take its image or file")

// PartError is an image or a file that no node answering the request can
// take, with why each cannot.
type PartError struct {
	// Param is where the client put the part ("messages[1].content[0]");
	// "" when not known (a conversation read back from the store).
	Param string
	// Kind is the part's kind; URL is set for an image sent as an https URL.
	Kind string
	URL  bool
	// Why says, node by node, why it cannot take the part.
	Why []string
}

func (e *PartError) Error() string {
	what := "an image"
	switch {
	case e.Kind == PartFile:
		what = "a file"
	case e.URL:
		what = "an image given by an https URL"
	}
	at := "the request"
	if e.Param != "" {
		at = e.Param
	}
	return fmt.Sprintf("%s is %s, which no node answering the request can take: %s", at, what, strings.Join(e.Why, "; "))
}

func (e *PartError) Unwrap() error { return ErrPartUnsupported }

// takesPart reports whether n can take p, and when not, why and what to do.
// An image needs a vision model (its server's capabilities, or the node's
// configured ones, say "vision"; a node nobody tells of takes none), and an
// Ollama node its bytes: Ollama cannot fetch a URL, and the proxy never
// does. A file goes to OpenAI-compatible nodes only: Ollama has no file
// parts.
func (e *Engine) takesPart(ctx context.Context, n *Node, p *Part) (bool, string) {
	ollama := n.Provider == config.ProviderOllama
	if p.Kind == PartFile {
		if ollama {
			return false, fmt.Sprintf("node %s is an Ollama node, and Ollama takes no files: send the file's text as text, or use an OpenAI-compatible node", n.Name)
		}
		return true, ""
	}
	if !e.takesVision(ctx, n) {
		caps, known := e.Capabilities(n.Name)
		said := "its server does not say it takes images"
		if known {
			said = "capabilities: " + strings.Join(caps, ", ")
		}
		return false, fmt.Sprintf("node %s: model %q cannot take images (%s): send the image to a vision model, or, if this model does take images, add vision to the node's capabilities in the configuration", n.Name, n.Model, said)
	}
	if ollama && p.URL != "" {
		return false, fmt.Sprintf("node %s is an Ollama node, which takes an image's bytes, not a URL, and the proxy fetches nothing: send the image as a data: URL", n.Name)
	}
	return true, ""
}

// takesVision reports whether n's model takes images: only when its
// server or the configuration says so.
func (e *Engine) takesVision(ctx context.Context, n *Node) bool {
	caps, _ := e.learnCaps(ctx, n)
	return slices.Contains(caps, CapVision)
}

// hasParts reports whether any message of msgs has an image or a file.
func hasParts(msgs []Message) bool {
	for i := range msgs {
		if len(msgs[i].Parts) > 0 {
			return true
		}
	}
	return false
}

// checkParts refuses a request with a part that none of nodes, those that
// may answer it, can take. A part some of them take goes to those; the
// others get a line in its place (partsFor).
func (e *Engine) checkParts(ctx context.Context, msgs []Message, nodes []*Node) error {
	for i := range msgs {
		for j := range msgs[i].Parts {
			p := &msgs[i].Parts[j]
			var why []string
			for _, n := range nodes {
				ok, w := e.takesPart(ctx, n, p)
				if ok {
					why = nil
					break
				}
				if !slices.Contains(why, w) {
					why = append(why, w)
				}
			}
			if why != nil {
				return &PartError{Param: p.Param, Kind: p.Kind, URL: p.URL != "", Why: why}
			}
		}
	}
	return nil
}

// answeringNodes are the nodes that may see a request of mode: the simple
// node, or every stage's.
func (e *Engine) answeringNodes(mode string) []*Node {
	if mode != ModeReflexive {
		return []*Node{e.nodes[e.cfg.Chain.SimpleNode]}
	}
	out := make([]*Node, 0, len(e.cfg.Chain.Stages))
	for _, sc := range e.cfg.Chain.Stages {
		out = append(out, e.nodes[sc.Node])
	}
	return out
}

// partsFor returns s's messages with the parts its node cannot take left
// out, each message that had one saying so in a line, and the trace's
// reasons saying it once for the stage. Messages with parts it takes, and
// requests without parts, come back as they are.
func (r *run) partsFor(ctx context.Context, s *stage, msgs []Message) []Message {
	if !r.parts {
		return msgs
	}
	var out []Message
	images, files := 0, 0
	var why string
	for i := range msgs {
		var kept []Part
		mi, mf := 0, 0 // this message's images and files left out
		for j := range msgs[i].Parts {
			p := &msgs[i].Parts[j]
			if ok, w := r.e.takesPart(ctx, s.node, p); !ok {
				if p.Kind == PartFile {
					mf++
				} else {
					mi++
				}
				why = w
				continue
			}
			kept = append(kept, *p)
		}
		if mi+mf == 0 {
			continue
		}
		images, files = images+mi, files+mf
		if out == nil {
			out = slices.Clone(msgs)
		}
		m := &out[i]
		m.Parts = kept
		m.Content = strings.TrimRight(m.Content, "\n") + "\n" + partsOmitted(mi, mf, s.node)
	}
	if out == nil {
		return msgs
	}
	r.trace.Reasons = append(r.trace.Reasons, fmt.Sprintf("stage %d (node %s) was not shown %s: %s", s.idx, s.node.Name, trace.PartsCount(images, files), why))
	return out
}

// partsOmitted is the line a message gets for the parts its node is not
// shown: the model cannot take them (no vision, or an image's URL for an
// Ollama node), and another stage of the chain can.
func partsOmitted(images, files int, n *Node) string {
	them := "them"
	if images+files == 1 {
		them = "it"
	}
	why := "model " + n.Model + " cannot take " + them + "; another stage of the chain can"
	if files == 0 {
		return memory.ImagesOmitted(images, why)
	}
	return "[" + trace.PartsCount(images, files) + " of this message not shown: " + why + ".]"
}
