package memory

import (
	"context"
	"math"
	"strconv"
	"sync"
	"time"
)

// MessageOverhead is the characters counted for each message beyond its
// text: the chat template's role markers and separators (about four
// tokens in the templates Ollama ships).
const MessageOverhead = 16

// DefaultRatio is the characters per token assumed for a model until a
// call has reported its prompt tokens: English prose runs near four with the
// tokenizers of current models.
const DefaultRatio = 4.0

// minRatio and maxRatio bound the calibrated ratio: a report that says
// otherwise is an upstream that counts differently (a cached prompt, a
// template that adds a long system text), not a tokenizer. minRatio is a
// byte a token, the densest a tokenizer packs text (a byte-level one
// without merges).
const (
	minRatio = 1.0
	maxRatio = 8.0
)

// ImageTokens is what one image is counted for in a prompt, whatever its
// size: the vision models Ollama runs encode an image to a fixed number of
// tokens (LLaVA 576, Gemma 3 256, Llama 3.2 Vision and Qwen 2.5 VL up to
// about a thousand for a large picture), and OpenAI counts a 1024×1024
// picture at high detail as 765. The proxy does not decode images to
// measure them; 768 errs on the side of the larger encoders.
const ImageTokens = 768

// ImageChars is ImageTokens in Chars' unit, at DefaultRatio.
const ImageChars = ImageTokens * int(DefaultRatio)

// Chars counts what msgs weigh in a prompt, in characters: their text, tool
// calls and names, images (ImageChars each), files (their bytes, or
// ImageChars for a file id) and MessageOverhead each. It allocates nothing, so that
// measuring a prompt that fits costs only this loop.
func Chars(msgs []Message) int {
	n := 0
	for i := range msgs {
		n += messageChars(&msgs[i])
	}
	return n
}

func messageChars(m *Message) int {
	n := MessageOverhead + len(m.Content) + len(m.Name)
	for _, c := range m.ToolCalls {
		n += len(c.Name) + len(c.Arguments) + MessageOverhead
	}
	for i := range m.Parts {
		n += partChars(&m.Parts[i])
	}
	return n
}

// partChars is what an image or a file weighs: a file sent as bytes is
// counted as text of its size (base64 carries 3 bytes in 4 characters).
func partChars(p *Part) int {
	if p.Kind == PartFile && p.Data != "" {
		return len(p.Data) / 4 * 3
	}
	return ImageChars
}

// Tokens converts chars to tokens at ratio characters a token, rounding up.
func Tokens(chars int, ratio float64) int {
	if ratio <= 0 {
		ratio = DefaultRatio
	}
	return int(math.Ceil(float64(chars) / ratio))
}

// KV is the shared key-value state memory keeps its calibration and
// summaries in: the process's store, or Redis so that replicas share them.
// store.Store satisfies it.
type KV interface {
	Get(ctx context.Context, key string) ([]byte, bool, error)
	Set(ctx context.Context, key string, val []byte, ttl time.Duration) error
}

// Key prefixes in the KV.
const (
	ratioPrefix   = "chainproxy:memory:ratio:"
	summaryPrefix = "chainproxy:memory:summary:"
)

// ratioTTL is how long a calibration outlives the last call that moved it.
const ratioTTL = 7 * 24 * time.Hour

// ratioRefresh is how often a replica reads the shared ratio again: often
// enough to follow the others, rarely enough to cost nothing per call.
const ratioRefresh = time.Minute

// Calibration keeps each model's characters-per-token ratio, learned from
// the prompt tokens its calls report and from the prompts it refuses. It is
// kept per model, not per node: the tokenizer is the model's, and every
// node that runs the model (two stages on one small model, the simple node
// and a stage) learns from each one's calls. It is safe for concurrent use.
type Calibration struct {
	kv  KV // nil: this process only
	now func() time.Time

	mu     sync.Mutex
	models map[string]*ratio
}

type ratio struct {
	value float64
	// observed: a call has reported on the model; until then the value is
	// a guess (the default, or what a refusal taught), which the first
	// report replaces rather than nudges.
	observed bool
	read     time.Time // when the shared value was last read
	saved    float64   // the value last written to the KV
}

// NewCalibration returns a Calibration that shares its ratios through kv
// (nil: kept in process).
func NewCalibration(kv KV) *Calibration {
	return &Calibration{kv: kv, now: time.Now, models: map[string]*ratio{}}
}

// entry returns model's ratio, made at DefaultRatio if new; c.mu is held.
func (c *Calibration) entry(model string) *ratio {
	r, ok := c.models[model]
	if !ok {
		r = &ratio{value: DefaultRatio}
		c.models[model] = r
	}
	return r
}

// Ratio returns model's characters per token: the learned one, else
// DefaultRatio. The shared value is read at most once a minute.
func (c *Calibration) Ratio(ctx context.Context, model string) float64 {
	c.mu.Lock()
	r := c.entry(model)
	now := c.now()
	stale := c.kv != nil && now.Sub(r.read) >= ratioRefresh
	if stale {
		r.read = now
	}
	v := r.value
	c.mu.Unlock()
	if !stale {
		return v
	}
	data, ok, err := c.kv.Get(ctx, ratioPrefix+model)
	if err != nil || !ok {
		return v
	}
	f, err := strconv.ParseFloat(string(data), 64)
	if err != nil || f < minRatio || f > maxRatio {
		return v
	}
	c.mu.Lock()
	r.value, r.saved, r.observed = f, f, true
	c.mu.Unlock()
	return f
}

// Observe learns from a call to model whose prompt weighed chars characters
// and was reported as tokens tokens. The ratio moves a third of the way to
// what the call says, so one odd report does not swing it; it is shared
// when it has moved by more than 2% since last written.
func (c *Calibration) Observe(ctx context.Context, model string, chars, tokens int) {
	if chars <= 0 || tokens <= 0 {
		return
	}
	seen := min(max(float64(chars)/float64(tokens), minRatio), maxRatio)
	c.mu.Lock()
	r, ok := c.models[model]
	switch {
	case !ok:
		r = &ratio{value: seen, read: c.now()}
		c.models[model] = r
	case !r.observed:
		r.value = seen
	default:
		r.value += (seen - r.value) / 3
	}
	r.observed = true
	v := r.value
	share := c.kv != nil && math.Abs(v-r.saved) > 0.02*v
	if share {
		r.saved = v
	}
	c.mu.Unlock()
	if share {
		c.share(ctx, model, v)
	}
}

// Refused learns from a prompt of chars characters that model refused as
// longer than its window of window tokens, though the estimate said it
// fits: its tokenizer packs fewer characters a token than the ratio said,
// and fewer than chars/window (the prompt held more than window tokens).
// The ratio drops to factor (0 < factor < 1) times what it was, or to that
// bound when lower, no lower than the floor, and is shared at once: the
// refusal costs the model's first request a second call, and the next
// requests to the model, on every replica, start from what it taught
// rather than be refused in turn. The next report replaces it.
func (c *Calibration) Refused(ctx context.Context, model string, chars, window int, factor float64) {
	c.mu.Lock()
	r := c.entry(model)
	v := r.value * factor
	if chars > 0 && window > 0 {
		v = min(v, float64(chars)/float64(window))
	}
	v = min(max(v, minRatio), maxRatio)
	r.value, r.observed = v, false
	share := c.kv != nil
	if share {
		r.saved, r.read = v, c.now()
	}
	c.mu.Unlock()
	if share {
		c.share(ctx, model, v)
	}
}

// share writes model's ratio v to the KV. Best effort: a store that fails
// keeps the ratio in process. It outlives the request that learned it.
func (c *Calibration) share(ctx context.Context, model string, v float64) {
	_ = c.kv.Set(context.WithoutCancel(ctx), ratioPrefix+model, strconv.AppendFloat(nil, v, 'f', 3, 64), ratioTTL)
}
