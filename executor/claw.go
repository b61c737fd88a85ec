package executor

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
)

// The claw harness (docs/claude-cli.md): `claw --output-format json` prints one JSON
// envelope on stdout when the turn is over, a success envelope
//
//	{"message": "...", "model": "...", "iterations": 3, "usage": {...}, "estimated_cost": "$0.0123", ...}
//
// or an error envelope
//
//	{"type": "error", "error": "...", "kind": "snake_case_kind", "hint": "..."}
//
// ParseClawEnvelope maps either to a *Result, so that claw runs come to the
// same Outcome and categories as claude runs.

// ParseClawEnvelope parses claw's output. The envelope may be pretty-printed
// over several lines; text around it (a banner, a trailing newline) is
// ignored: the last top-level JSON object in out is the envelope.
func ParseClawEnvelope(out []byte) (*Result, error) {
	obj := lastJSONObject(out)
	if obj == nil {
		return nil, &ParseError{CodeJSONParse, "no JSON object in the claw output"}
	}
	var env struct {
		Type          string          `json:"type"`
		Error         string          `json:"error"`
		Kind          string          `json:"kind"`
		Hint          *string         `json:"hint"`
		Message       *string         `json:"message"`
		Iterations    json.Number     `json:"iterations"`
		Usage         json.RawMessage `json:"usage"`
		EstimatedCost string          `json:"estimated_cost"`
		SessionID     string          `json:"session_id"`
	}
	d := json.NewDecoder(bytes.NewReader(obj))
	d.UseNumber()
	if err := d.Decode(&env); err != nil {
		return nil, &ParseError{CodeTypedParse, "claw envelope has unexpected field types: " + redactErr(err)}
	}
	r := &Result{}
	r.setBase(env.SessionID, obj)
	r.Usage = decodeUsage(env.Usage)
	r.TotalCostUSD = parseCost(env.EstimatedCost)
	r.CostUSD = r.TotalCostUSD
	if n, err := env.Iterations.Int64(); err == nil {
		r.NumTurns = int(n)
	}
	r.IsErrorSet = true
	if env.Type == "error" {
		r.Subtype = "error"
		r.IsError = true
		r.Text, r.HasText = env.Error, env.Error != ""
		r.Kind = env.Kind
		if env.Hint != nil {
			r.Hint = *env.Hint
		}
		return r, nil
	}
	if env.Message == nil {
		return nil, &ParseError{CodeTypedParse, `claw envelope has neither "type":"error" nor "message"`}
	}
	r.Subtype = "success"
	r.Text, r.HasText = *env.Message, true
	return r, nil
}

// lastJSONObject finds the last complete top-level JSON object in out.
func lastJSONObject(out []byte) []byte {
	var last []byte
	d := json.NewDecoder(bytes.NewReader(out))
	for {
		var raw json.RawMessage
		err := d.Decode(&raw)
		if err == nil {
			if len(raw) > 0 && raw[0] == '{' {
				last = raw
			}
			continue
		}
		var se *json.SyntaxError
		if errors.As(err, &se) {
			// Skip the offending text up to the next line and go on.
			off := int(d.InputOffset())
			if i := bytes.IndexByte(out[off:], '\n'); i >= 0 {
				out = out[off+i+1:]
				d = json.NewDecoder(bytes.NewReader(out))
				continue
			}
		}
		return last
	}
}

// parseCost reads "$0.0123" (or a bare number); 0 when unreadable.
func parseCost(s string) float64 {
	s = strings.TrimPrefix(strings.TrimSpace(s), "$")
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0
	}
	return f
}

// classifyClawKind maps claw's `kind` tokens to categories; "" lets the
// error text decide.
func classifyClawKind(kind string) Category {
	k := strings.ToLower(kind)
	switch {
	case strings.Contains(k, "rate_limit"):
		return CategoryRateLimit
	case strings.Contains(k, "auth") || k == "missing_credentials":
		return CategoryAuth
	case k == "session_not_found" || k == "session_load_failed" || k == "session_path_is_directory":
		return CategorySessionNotFound
	case strings.Contains(k, "max_turns") || strings.Contains(k, "max_iterations"):
		return CategoryMaxTurns
	case strings.HasPrefix(k, "api_") || k == "model_error":
		return CategoryAPI
	}
	return ""
}
