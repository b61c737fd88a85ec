package discord

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
)

// discordHost is the host discordgo's endpoint variables name.
const discordHost = "discord.com"

// rewriteTransport sends the requests discordgo makes to https://discord.com
// to api instead, and answers the gateway lookup with gateway when set.
// discordgo computes its endpoints at init, so this is how a Session is
// pointed at a proxy or a fake without touching its globals.
type rewriteTransport struct {
	base    http.RoundTripper
	api     *url.URL // nil: leave the host alone
	gateway string   // "": ask the API
}

func (t *rewriteTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Host != discordHost {
		return t.base.RoundTrip(req)
	}
	if t.gateway != "" && req.Method == http.MethodGet && isGatewayPath(req.URL.Path) {
		if req.Body != nil {
			req.Body.Close()
		}
		body, _ := json.Marshal(map[string]any{"url": t.gateway, "shards": 1})
		return &http.Response{
			Status:        "200 OK",
			StatusCode:    http.StatusOK,
			Proto:         "HTTP/1.1",
			ProtoMajor:    1,
			ProtoMinor:    1,
			Header:        http.Header{"Content-Type": {"application/json"}},
			Body:          io.NopCloser(bytes.NewReader(body)),
			ContentLength: int64(len(body)),
			Request:       req,
		}, nil
	}
	if t.api == nil {
		return t.base.RoundTrip(req)
	}
	r := req.Clone(req.Context())
	r.URL.Scheme = t.api.Scheme
	r.URL.Host = t.api.Host
	r.URL.Path = strings.TrimSuffix(t.api.Path, "/") + req.URL.Path
	if req.URL.RawPath != "" {
		r.URL.RawPath = strings.TrimSuffix(t.api.Path, "/") + req.URL.RawPath
	}
	r.Host = t.api.Host
	return t.base.RoundTrip(r)
}

// isGatewayPath matches /api/v9/gateway and /api/v9/gateway/bot.
func isGatewayPath(p string) bool {
	if !strings.HasPrefix(p, "/api/") {
		return false
	}
	return strings.HasSuffix(p, "/gateway") || strings.HasSuffix(p, "/gateway/bot")
}

// newHTTPClient returns a copy of base (or a default client) whose transport
// rewrites discord.com as cfg asks.
func newHTTPClient(base *http.Client, apiURL, gatewayURL string) (*http.Client, error) {
	var c http.Client
	if base != nil {
		c = *base
	}
	if c.Timeout == 0 {
		c.Timeout = defaultHTTPTimeout
	}
	rt := c.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	if apiURL == "" && gatewayURL == "" {
		c.Transport = rt
		return &c, nil
	}
	t := &rewriteTransport{base: rt, gateway: gatewayURL}
	if apiURL != "" {
		u, err := url.Parse(apiURL)
		if err != nil {
			return nil, fmt.Errorf("parse api_url: %w", err)
		}
		t.api = u
	}
	c.Transport = t
	return &c, nil
}

// redactHandler replaces a secret with "[REDACTED]" in every message and
// attribute before handing the record on.
type redactHandler struct {
	h      slog.Handler
	secret string
}

const redacted = "[REDACTED]"

func newRedactingLogger(l *slog.Logger, secret string) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	if secret == "" {
		return l
	}
	return slog.New(&redactHandler{h: l.Handler(), secret: secret})
}

func (r *redactHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return r.h.Enabled(ctx, l)
}

func (r *redactHandler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, r.redact(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(r.attr(a))
		return true
	})
	return r.h.Handle(ctx, out)
}

func (r *redactHandler) WithAttrs(as []slog.Attr) slog.Handler {
	clean := make([]slog.Attr, len(as))
	for i, a := range as {
		clean[i] = r.attr(a)
	}
	return &redactHandler{h: r.h.WithAttrs(clean), secret: r.secret}
}

func (r *redactHandler) WithGroup(name string) slog.Handler {
	return &redactHandler{h: r.h.WithGroup(r.redact(name)), secret: r.secret}
}

func (r *redactHandler) redact(s string) string {
	return strings.ReplaceAll(s, r.secret, redacted)
}

func (r *redactHandler) attr(a slog.Attr) slog.Attr {
	a.Key = r.redact(a.Key)
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		a.Value = slog.StringValue(r.redact(v.String()))
	case slog.KindGroup:
		g := v.Group()
		clean := make([]slog.Attr, len(g))
		for i, ga := range g {
			clean[i] = r.attr(ga)
		}
		a.Value = slog.GroupValue(clean...)
	case slog.KindAny:
		// Errors, structs, byte slices: print them, then redact the text.
		a.Value = slog.StringValue(r.redact(fmt.Sprint(v.Any())))
	default:
		a.Value = v
	}
	return a
}

// redactedError hides a secret in an error's text and keeps its chain.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

func redactErr(err error, secret string) error {
	if err == nil || secret == "" || !strings.Contains(err.Error(), secret) {
		return err
	}
	return &redactedError{msg: strings.ReplaceAll(err.Error(), secret, redacted), err: err}
}
