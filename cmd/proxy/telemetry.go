package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"chainproxy/config"
	"chainproxy/internal/redact"
)

// telemetry is the trace export: the provider the web layer starts request
// spans from, nil when telemetry is off (no endpoint configured), and what
// flushes the spans still batched at shutdown.
type telemetry struct {
	provider trace.TracerProvider
	sdk      *sdktrace.TracerProvider
}

// startTelemetry starts the OTLP trace export when an endpoint is set, in
// the config's telemetry section or the standard variables
// (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT); the
// config's keys win. The exporter reads the other OTEL_EXPORTER_OTLP_*
// variables the config leaves unset, and the batch processor the OTEL_BSP_*
// ones. OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none turn it off.
func startTelemetry(ctx context.Context, cfg config.Telemetry, logger *slog.Logger) (*telemetry, error) {
	endpoint := cmp.Or(cfg.TracesEndpoint, cfg.Endpoint, firstEnv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"))
	if endpoint == "" || strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") || os.Getenv("OTEL_TRACES_EXPORTER") == "none" {
		return &telemetry{}, nil
	}
	protocol := cmp.Or(cfg.Protocol, firstEnv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"), config.ProtocolHTTP)
	var (
		exp sdktrace.SpanExporter
		err error
	)
	switch protocol {
	case config.ProtocolHTTP:
		var opts []otlptracehttp.Option
		switch {
		case cfg.TracesEndpoint != "":
			opts = append(opts, otlptracehttp.WithEndpointURL(cfg.TracesEndpoint))
		case cfg.Endpoint != "":
			// A base URL, as OTEL_EXPORTER_OTLP_ENDPOINT: the signal's
			// path goes after its own.
			u, perr := url.Parse(cfg.Endpoint)
			if perr != nil {
				return nil, fmt.Errorf("telemetry.endpoint: %w", perr)
			}
			u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
			opts = append(opts, otlptracehttp.WithEndpointURL(u.String()))
		}
		if len(cfg.Headers) > 0 {
			opts = append(opts, otlptracehttp.WithHeaders(cfg.Headers))
		}
		if cfg.Timeout > 0 {
			opts = append(opts, otlptracehttp.WithTimeout(cfg.Timeout))
		}
		exp, err = otlptracehttp.New(ctx, opts...)
	case config.ProtocolGRPC:
		var opts []otlptracegrpc.Option
		if u := cmp.Or(cfg.TracesEndpoint, cfg.Endpoint); u != "" {
			opts = append(opts, otlptracegrpc.WithEndpointURL(u))
		}
		if len(cfg.Headers) > 0 {
			opts = append(opts, otlptracegrpc.WithHeaders(cfg.Headers))
		}
		if cfg.Timeout > 0 {
			opts = append(opts, otlptracegrpc.WithTimeout(cfg.Timeout))
		}
		exp, err = otlptracegrpc.New(ctx, opts...)
	default:
		return nil, fmt.Errorf("telemetry: protocol %q is not %s or %s", protocol, config.ProtocolHTTP, config.ProtocolGRPC)
	}
	if err != nil {
		return nil, fmt.Errorf("telemetry: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "chainproxy"), attribute.String("service.version", version())),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("telemetry: %w", err)
	}
	if cfg.ServiceName != "" {
		if res, err = resource.Merge(res, resource.NewSchemaless(attribute.String("service.name", cfg.ServiceName))); err != nil {
			return nil, fmt.Errorf("telemetry: %w", err)
		}
	}
	// Export failures (collector down) are logged, never in a request's way.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { logger.Warn("telemetry export", "err", err) }))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	logger.Info("telemetry on", "endpoint", redact.URL(endpoint), "protocol", protocol, "capture_content", cfg.CaptureContent)
	return &telemetry{provider: tp, sdk: tp}, nil
}

// shutdown exports the spans still batched and stops the exporter, within
// ctx.
func (t *telemetry) shutdown(ctx context.Context) error {
	if t.sdk == nil {
		return nil
	}
	return t.sdk.Shutdown(ctx)
}

// firstEnv is the first of the variables that is set.
func firstEnv(names ...string) string {
	for _, n := range names {
		if v := os.Getenv(n); v != "" {
			return v
		}
	}
	return ""
}

// telemetryFlush bounds the export of the last spans at shutdown: a
// collector that does not answer must not hold the exit for long.
const telemetryFlush = 5 * time.Second
