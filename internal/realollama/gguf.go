package realollama

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
)

// GGUF value types (ggml docs/gguf.md, enum gguf_metadata_value_type).
const (
	ggufUint32  = 4
	ggufFloat32 = 6
	ggufBool    = 7
	ggufString  = 8
	ggufArray   = 9
)

// ggmlF32 is GGML_TYPE_F32, the tensor type of every weight written here.
const ggmlF32 = 0

// ggufAlignment is the default general.alignment.
const ggufAlignment = 32

// The tiny model's shape: 2 layers of 64 dimensions with 4 heads. Small
// enough to load in a fraction of a second on one core, large enough that
// llama.cpp takes it as an ordinary llama model.
const (
	tinyLayers = 2
	tinyEmbd   = 64
	tinyHeads  = 4
	tinyFF     = 128
	tinyCtx    = 2048
)

// Special tokens of the tiny vocabulary, in the ChatML style the qwen2.5
// template writes.
var tinySpecials = []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>"}

// tinyMerges are a few byte-pair merges: llama.cpp refuses a gpt2 tokenizer
// without merges, and each merge's result is a token of the vocabulary.
var tinyMerges = [][2]string{
	{"Ġ", "t"}, {"h", "e"}, {"i", "n"}, {"e", "r"}, {"a", "n"}, {"o", "n"},
	{"Ġ", "a"}, {"r", "e"}, {"Ġ", "s"}, {"o", "r"}, {"e", "n"}, {"Ġt", "he"},
}

// WriteTinyGGUF writes a llama-architecture GGUF v3 model with random
// weights and a byte-level BPE vocabulary of a few hundred tokens to path.
// It talks garbage; it exists so that a real Ollama has a model to load,
// template and sample from in well under a second.
func WriteTinyGGUF(path string, seed uint64) error {
	vocab := tinyVocab()
	kv := []ggufKV{
		{"general.architecture", "llama"},
		{"general.name", "chainproxy-tiny"},
		{"general.alignment", uint32(ggufAlignment)},
		{"llama.context_length", uint32(tinyCtx)},
		{"llama.embedding_length", uint32(tinyEmbd)},
		{"llama.block_count", uint32(tinyLayers)},
		{"llama.feed_forward_length", uint32(tinyFF)},
		{"llama.attention.head_count", uint32(tinyHeads)},
		{"llama.attention.head_count_kv", uint32(tinyHeads)},
		{"llama.rope.dimension_count", uint32(tinyEmbd / tinyHeads)},
		{"llama.attention.layer_norm_rms_epsilon", float32(1e-5)},
		{"llama.vocab_size", uint32(len(vocab))},
		{"tokenizer.ggml.model", "gpt2"},
		{"tokenizer.ggml.pre", "default"},
		{"tokenizer.ggml.tokens", vocab},
		{"tokenizer.ggml.token_type", tokenTypes(len(vocab))},
		{"tokenizer.ggml.merges", mergeStrings()},
		{"tokenizer.ggml.bos_token_id", uint32(len(vocab) - len(tinySpecials))},
		{"tokenizer.ggml.eos_token_id", uint32(len(vocab) - 1)}, // <|im_end|>
		{"tokenizer.ggml.padding_token_id", uint32(len(vocab) - len(tinySpecials))},
		{"tokenizer.ggml.add_bos_token", false},
	}
	type tensor struct {
		name string
		dims []uint64 // ne[0] first: the row length
		norm bool     // a norm weight: ones, not noise
	}
	e, ff, nv := uint64(tinyEmbd), uint64(tinyFF), uint64(len(vocab))
	tensors := []tensor{
		{"token_embd.weight", []uint64{e, nv}, false},
		{"output_norm.weight", []uint64{e}, true},
		{"output.weight", []uint64{e, nv}, false},
	}
	for i := range tinyLayers {
		p := fmt.Sprintf("blk.%d.", i)
		tensors = append(tensors,
			tensor{p + "attn_norm.weight", []uint64{e}, true},
			tensor{p + "attn_q.weight", []uint64{e, e}, false},
			tensor{p + "attn_k.weight", []uint64{e, e}, false},
			tensor{p + "attn_v.weight", []uint64{e, e}, false},
			tensor{p + "attn_output.weight", []uint64{e, e}, false},
			tensor{p + "ffn_norm.weight", []uint64{e}, true},
			tensor{p + "ffn_gate.weight", []uint64{e, ff}, false},
			tensor{p + "ffn_down.weight", []uint64{ff, e}, false},
			tensor{p + "ffn_up.weight", []uint64{e, ff}, false},
		)
	}

	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	w := &ggufWriter{w: bufio.NewWriter(f)}
	w.raw([]byte("GGUF"))
	w.u32(3)
	w.u64(uint64(len(tensors)))
	w.u64(uint64(len(kv)))
	for _, p := range kv {
		w.str(p.key)
		w.value(p.val)
	}
	var offset uint64
	for _, t := range tensors {
		w.str(t.name)
		w.u32(uint32(len(t.dims)))
		n := uint64(1)
		for _, d := range t.dims {
			w.u64(d)
			n *= d
		}
		w.u32(ggmlF32)
		w.u64(offset)
		offset = align(offset + 4*n)
	}
	w.pad()
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	for _, t := range tensors {
		n := uint64(1)
		for _, d := range t.dims {
			n *= d
		}
		for range n {
			v := float32(1)
			if !t.norm {
				v = float32(rng.NormFloat64() * 0.1)
			}
			w.u32(math.Float32bits(v))
		}
		w.pad()
	}
	if w.err != nil {
		return w.err
	}
	if err := w.w.Flush(); err != nil {
		return err
	}
	return f.Close()
}

type ggufKV struct {
	key string
	val any
}

func align(n uint64) uint64 { return (n + ggufAlignment - 1) / ggufAlignment * ggufAlignment }

// tinyVocab is the 256 byte tokens in GPT-2's byte-to-unicode spelling, the
// merge results, then the special tokens.
func tinyVocab() []string {
	var v []string
	for b := range 256 {
		v = append(v, byteToken(byte(b)))
	}
	for _, m := range tinyMerges {
		v = append(v, m[0]+m[1])
	}
	return append(v, tinySpecials...)
}

// byteToken spells byte b as GPT-2's bytes_to_unicode does: printable
// Latin-1 bytes stand for themselves, the others are shifted past 255.
func byteToken(b byte) string {
	if b >= '!' && b <= '~' || b >= 0xa1 && b <= 0xac || b >= 0xae {
		return string(rune(b))
	}
	n := 0
	for c := range int(b) {
		cb := byte(c)
		if !(cb >= '!' && cb <= '~' || cb >= 0xa1 && cb <= 0xac || cb >= 0xae) {
			n++
		}
	}
	return string(rune(256 + n))
}

// tokenTypes marks the special tokens as control (3), the rest normal (1).
func tokenTypes(n int) []int32 {
	t := make([]int32, n)
	for i := range t {
		t[i] = 1
		if i >= n-len(tinySpecials) {
			t[i] = 3
		}
	}
	return t
}

func mergeStrings() []string {
	out := make([]string, len(tinyMerges))
	for i, m := range tinyMerges {
		out[i] = m[0] + " " + m[1]
	}
	return out
}

// ggufWriter writes little-endian GGUF fields, keeping the first error.
type ggufWriter struct {
	w   *bufio.Writer
	n   uint64
	err error
}

func (w *ggufWriter) raw(p []byte) {
	if w.err != nil {
		return
	}
	var n int
	n, w.err = w.w.Write(p)
	w.n += uint64(n)
}

func (w *ggufWriter) u32(v uint32) { w.raw(binary.LittleEndian.AppendUint32(nil, v)) }
func (w *ggufWriter) u64(v uint64) { w.raw(binary.LittleEndian.AppendUint64(nil, v)) }

func (w *ggufWriter) str(s string) {
	w.u64(uint64(len(s)))
	w.raw([]byte(s))
}

// pad fills with zeros up to the next alignment boundary.
func (w *ggufWriter) pad() {
	if r := w.n % ggufAlignment; r != 0 {
		w.raw(make([]byte, ggufAlignment-r))
	}
}

func (w *ggufWriter) value(v any) {
	switch v := v.(type) {
	case uint32:
		w.u32(ggufUint32)
		w.u32(v)
	case float32:
		w.u32(ggufFloat32)
		w.u32(math.Float32bits(v))
	case bool:
		w.u32(ggufBool)
		b := byte(0)
		if v {
			b = 1
		}
		w.raw([]byte{b})
	case string:
		w.u32(ggufString)
		w.str(v)
	case []string:
		w.u32(ggufArray)
		w.u32(ggufString)
		w.u64(uint64(len(v)))
		for _, s := range v {
			w.str(s)
		}
	case []int32:
		w.u32(ggufArray)
		w.u32(5) // INT32
		w.u64(uint64(len(v)))
		for _, x := range v {
			w.u32(uint32(x))
		}
	default:
		if w.err == nil {
			w.err = fmt.Errorf("gguf: unsupported value %T", v)
		}
	}
}
