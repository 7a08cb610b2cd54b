package redact

import (
	"context"
	"fmt"
	"log/slog"
)

// Handler returns a slog.Handler that masks r's secrets in every record's
// message and string-like attributes (strings, errors, Stringers, string
// slices, byte slices, and any other value whose text holds a secret, in
// groups too) before passing it to next. Wrapping the process's one
// handler with it means no log call site can leak a configured secret, at
// any level.
func (r Redactor) Handler(next slog.Handler) slog.Handler {
	return &handler{r: r, next: next}
}

type handler struct {
	r    Redactor
	next slog.Handler
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *handler) Handle(ctx context.Context, rec slog.Record) error {
	msg := h.r.String(rec.Message)
	changed := msg != rec.Message
	if !changed {
		// Most lines hold no secret: pass them on as they are, without
		// building a second record.
		rec.Attrs(func(a slog.Attr) bool {
			_, changed = h.attr(a)
			return !changed
		})
		if !changed {
			return h.next.Handle(ctx, rec)
		}
	}
	out := slog.NewRecord(rec.Time, rec.Level, msg, rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		clean, _ := h.attr(a)
		out.AddAttrs(clean)
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	clean := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		clean[i], _ = h.attr(a)
	}
	return &handler{r: h.r, next: h.next.WithAttrs(clean)}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{r: h.r, next: h.next.WithGroup(name)}
}

// attr masks one attribute and reports whether that changed it; values
// that cannot hold text pass as they are.
func (h *handler) attr(a slog.Attr) (slog.Attr, bool) {
	v := a.Value.Resolve()
	text := func(s string) (slog.Attr, bool) {
		clean := h.r.String(s)
		return slog.String(a.Key, clean), clean != s
	}
	switch v.Kind() {
	case slog.KindString:
		if clean := h.r.String(v.String()); clean != v.String() {
			return slog.String(a.Key, clean), true
		}
	case slog.KindGroup:
		g := v.Group()
		clean := make([]any, len(g))
		changed := false
		for i, ga := range g {
			c, ch := h.attr(ga)
			clean[i], changed = c, changed || ch
		}
		if changed {
			return slog.Group(a.Key, clean...), true
		}
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			return text(x.Error())
		case fmt.Stringer:
			return text(x.String())
		case []byte:
			return text(string(x))
		case []string:
			clean := make([]string, len(x))
			changed := false
			for i, s := range x {
				clean[i] = h.r.String(s)
				changed = changed || clean[i] != s
			}
			if changed {
				return slog.Any(a.Key, clean), true
			}
		case nil:
		default:
			// A struct, a map: kept as it is unless its text holds a
			// secret, then logged as that text, masked.
			s := fmt.Sprintf("%+v", x)
			if clean := h.r.String(s); clean != s {
				return slog.String(a.Key, clean), true
			}
		}
	}
	return slog.Attr{Key: a.Key, Value: v}, false
}
