package node

import (
	"context"
	"strings"
	"sync"
	"time"

	"chainproxy/internal/redact"
)

// LoadedModel is a model a runner (an Ollama server) holds in memory, as
// its GET /api/ps lists it: what the proxy's own /api/ps shows of each
// runner. (The load scheduling reads the same list, reduced to the memory
// each model takes, through ModelLoader.Resident.)
type LoadedModel struct {
	// Name is the model as Ollama names it ("qwen3:1.7b").
	Name string
	// Size is the memory the model takes; VRAM is the part of it on the
	// GPU (less than Size when Ollama offloaded layers to the CPU).
	Size, VRAM int64
	// ExpiresAt is when Ollama unloads the model if no call comes; while
	// a call uses it, now plus its keep-alive (Ollama's PsHandler).
	ExpiresAt time.Time
	// ContextLength is the window the model runs with.
	ContextLength int
}

// LoadReader is the optional capability of a backend whose server tells
// what it holds in memory (Ollama's /api/ps). OpenAI-compatible servers
// cannot tell.
type LoadReader interface {
	LoadedModels(ctx context.Context) ([]LoadedModel, error)
}

// Runner is one server behind the nodes that can tell what it holds: a
// host of one node or of several (nodes on one base URL share it).
type Runner struct {
	// URL is its base URL, credentials masked.
	URL string
	// Nodes are the nodes it serves, in configuration order.
	Nodes []string
	// Models are what it holds now; nil when it did not answer.
	Models []LoadedModel
	// Err is why it did not answer, masked.
	Err string
}

// hostBackends are the hosts of node name with their backends: each of a
// node of several, else its one host.
func (s *Set) hostBackends(name string) (urls []string, backends []Backend) {
	b, ok := s.Backend(name)
	if !ok {
		return nil, nil
	}
	if h, ok := b.(*Hosts); ok {
		for _, x := range h.hosts {
			urls, backends = append(urls, x.url), append(backends, x.b)
		}
		return urls, backends
	}
	n, _ := s.node(name)
	return []string{n.BaseURL}, []Backend{b}
}

// Runners asks every server behind the nodes that can tell (LoadReader),
// all at once, what it holds now: each server once, in the order the
// configuration first names it. A server that does not answer within ctx
// is reported with its error; the others are listed all the same.
func (s *Set) Runners(ctx context.Context) []Runner {
	var out []Runner
	var readers []LoadReader
	at := map[string]int{}
	for _, n := range s.order {
		urls, bs := s.hostBackends(n.Name)
		for i, b := range bs {
			lr, ok := b.(LoadReader)
			if !ok {
				continue
			}
			key := strings.TrimRight(urls[i], "/")
			j, seen := at[key]
			if !seen {
				j = len(out)
				at[key] = j
				out = append(out, Runner{URL: redact.URL(urls[i])})
				readers = append(readers, lr)
			}
			out[j].Nodes = append(out[j].Nodes, n.Name)
		}
	}
	var wg sync.WaitGroup
	for i, lr := range readers {
		wg.Go(func() { // exits when the server answers or ctx ends
			models, err := lr.LoadedModels(ctx)
			if err != nil {
				out[i].Err = s.redact.String(err.Error())
				return
			}
			out[i].Models = models
		})
	}
	wg.Wait()
	return out
}
