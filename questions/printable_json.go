package questions

import (
	"bytes"
	"encoding/json"
)

// PrintableJSON is a JSON value (a tool call's input, untrusted) with every
// string in it, keys too, made Printable: a terminal escape sequence a
// consumer would decode and print is gone, numbers stay as written. nil
// when raw is not JSON.
func PrintableJSON(raw json.RawMessage) json.RawMessage {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil || d.More() {
		return nil
	}
	b, err := json.Marshal(printableValue(v))
	if err != nil {
		return nil
	}
	return b
}

func printableValue(v any) any {
	switch v := v.(type) {
	case string:
		return Printable(v)
	case []any:
		for i := range v {
			v[i] = printableValue(v[i])
		}
		return v
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[Printable(k)] = printableValue(x)
		}
		return out
	}
	return v
}
