package executor

import (
	"bytes"
	"encoding/binary"
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// This file holds the lean JSON path of the stream parser: one validating pass
// that accepts exactly what encoding/json accepts (json.Valid, including its
// nesting limit) and records the members of the top-level object, then cheap
// non-validating walks over the parts an event needs. String values are
// decoded the way encoding/json decodes them (invalid UTF-8 and lone
// surrogates become U+FFFD), so ParseLine and ParseJSON agree field by field.

// maxNestingDepth is encoding/json's limit on nested arrays and objects.
const maxNestingDepth = 10000

// syntaxError says where a line stops being JSON. It never holds line content.
type syntaxError struct {
	off int
	msg string
}

// member is one key/value pair of an object: key is the decoded key (it
// aliases the input when the key has no escapes), val the raw value.
type member struct {
	key []byte
	val []byte
}

// scanner validates JSON documents. Its stack is reused between calls.
type scanner struct {
	stack []byte
}

func isWS(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipWS(b []byte, i int) int {
	for i < len(b) && isWS(b[i]) {
		i++
	}
	return i
}

// topObject validates b as one JSON document. When it is an object, members
// gets its top-level members in order (later duplicates after earlier ones)
// and isObject is true.
func (s *scanner) topObject(b []byte, members []member) (_ []member, isObject bool, serr *syntaxError) {
	i := skipWS(b, 0)
	if i >= len(b) {
		return members, false, &syntaxError{i, "unexpected end of input"}
	}
	if b[i] != '{' {
		end, err := s.value(b, i, 0)
		if err != nil {
			return members, false, err
		}
		if end = skipWS(b, end); end != len(b) {
			return members, false, &syntaxError{end, "unexpected data after the JSON value"}
		}
		return members, false, nil
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		if end := skipWS(b, i+1); end != len(b) {
			return members, false, &syntaxError{end, "unexpected data after the JSON value"}
		}
		return members, true, nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return members, false, &syntaxError{i, "expected an object key"}
		}
		ks := i
		ke, esc, err := scanString(b, i)
		if err != nil {
			return members, false, err
		}
		i = skipWS(b, ke)
		if i >= len(b) || b[i] != ':' {
			return members, false, &syntaxError{i, "expected ':' after an object key"}
		}
		i = skipWS(b, i+1)
		vs := i
		ve, verr := s.value(b, i, 1)
		if verr != nil {
			return members, false, verr
		}
		key := b[ks+1 : ke-1]
		if esc {
			key = unquote(b[ks:ke])
		}
		members = append(members, member{key: key, val: b[vs:ve]})
		i = skipWS(b, ve)
		if i >= len(b) {
			return members, false, &syntaxError{i, "unexpected end of input in an object"}
		}
		switch b[i] {
		case ',':
			i = skipWS(b, i+1)
		case '}':
			if end := skipWS(b, i+1); end != len(b) {
				return members, false, &syntaxError{end, "unexpected data after the JSON value"}
			}
			return members, true, nil
		default:
			return members, false, &syntaxError{i, "expected ',' or '}' in an object"}
		}
	}
}

// value validates the JSON value starting at b[i] (no leading whitespace)
// and returns the offset just after it. depth is the number of containers
// already open around it.
func (s *scanner) value(b []byte, i, depth int) (int, *syntaxError) {
	stack := s.stack[:0]
	defer func() { s.stack = stack[:0] }()
	for {
		// A value starts at b[i].
		if i >= len(b) {
			return i, &syntaxError{i, "unexpected end of input"}
		}
		switch c := b[i]; {
		case c == '{' || c == '[':
			if depth+len(stack)+1 > maxNestingDepth {
				return i, &syntaxError{i, "exceeded max nesting depth"}
			}
			i = skipWS(b, i+1)
			if c == '{' {
				if i < len(b) && b[i] == '}' {
					i++
					break
				}
				stack = append(stack, '{')
				var err *syntaxError
				if i, err = scanKeyColon(b, i); err != nil {
					return i, err
				}
			} else {
				if i < len(b) && b[i] == ']' {
					i++
					break
				}
				stack = append(stack, '[')
			}
			continue
		case c == '"':
			end, _, err := scanString(b, i)
			if err != nil {
				return end, err
			}
			i = end
		case c == '-' || (c >= '0' && c <= '9'):
			end, err := scanNumber(b, i)
			if err != nil {
				return end, err
			}
			i = end
		case c == 't':
			if !bytes.HasPrefix(b[i:], []byte("true")) {
				return i, &syntaxError{i, "invalid literal"}
			}
			i += 4
		case c == 'f':
			if !bytes.HasPrefix(b[i:], []byte("false")) {
				return i, &syntaxError{i, "invalid literal"}
			}
			i += 5
		case c == 'n':
			if !bytes.HasPrefix(b[i:], []byte("null")) {
				return i, &syntaxError{i, "invalid literal"}
			}
			i += 4
		default:
			return i, &syntaxError{i, "invalid character looking for a value"}
		}
		// A value ended at i: close containers until one wants another value.
		for {
			if len(stack) == 0 {
				return i, nil
			}
			i = skipWS(b, i)
			if i >= len(b) {
				return i, &syntaxError{i, "unexpected end of input in a container"}
			}
			top := stack[len(stack)-1]
			c := b[i]
			if c == ',' {
				i = skipWS(b, i+1)
				if top == '{' {
					var err *syntaxError
					if i, err = scanKeyColon(b, i); err != nil {
						return i, err
					}
				}
				break
			}
			if (top == '{' && c == '}') || (top == '[' && c == ']') {
				stack = stack[:len(stack)-1]
				i++
				continue
			}
			if top == '{' {
				return i, &syntaxError{i, "expected ',' or '}' in an object"}
			}
			return i, &syntaxError{i, "expected ',' or ']' in an array"}
		}
	}
}

// scanKeyColon scans `"key" :` and the whitespace after it.
func scanKeyColon(b []byte, i int) (int, *syntaxError) {
	if i >= len(b) || b[i] != '"' {
		return i, &syntaxError{i, "expected an object key"}
	}
	end, _, err := scanString(b, i)
	if err != nil {
		return end, err
	}
	i = skipWS(b, end)
	if i >= len(b) || b[i] != ':' {
		return i, &syntaxError{i, "expected ':' after an object key"}
	}
	return skipWS(b, i+1), nil
}

const (
	swarLo = 0x0101010101010101
	swarHi = 0x8080808080808080
)

// scanString validates the string starting at b[i] == '"' and returns the
// offset after its closing quote and whether it holds escapes. It jumps to
// the next '"' (bytes.IndexByte is vectorised) and then checks the bytes
// before it for '\\' and control bytes, eight at a time.
func scanString(b []byte, i int) (end int, escaped bool, err *syntaxError) {
	i++
	for {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return len(b), escaped, &syntaxError{len(b), "unterminated string"}
		}
		seg := b[i : i+j]
		k := 0
		for k+8 <= len(seg) {
			if special(binary.LittleEndian.Uint64(seg[k:k+8])) != 0 {
				break
			}
			k += 8
		}
		for k < len(seg) && seg[k] != '\\' && seg[k] >= 0x20 {
			k++
		}
		if k == len(seg) {
			return i + j + 1, escaped, nil
		}
		i += k
		if b[i] < 0x20 {
			return i, escaped, &syntaxError{i, "control character in a string"}
		}
		// An escape; it may hide the quote found above, so search again
		// after it.
		escaped = true
		if i+1 >= len(b) {
			return i, escaped, &syntaxError{i, "unterminated string"}
		}
		switch b[i+1] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			i += 2
		case 'u':
			if i+6 > len(b) {
				return i, escaped, &syntaxError{i, "invalid \\u escape"}
			}
			for _, h := range b[i+2 : i+6] {
				if !isHex(h) {
					return i, escaped, &syntaxError{i, "invalid \\u escape"}
				}
			}
			i += 6
		default:
			return i, escaped, &syntaxError{i, "invalid escape in a string"}
		}
	}
}

// special is non-zero when one of the eight bytes in x is '\\' or below
// 0x20 (it may flag other bytes too: the caller looks at them one by one).
func special(x uint64) uint64 {
	bs := x ^ (swarLo * '\\')
	return ((x - swarLo*0x20) | (bs - swarLo)) &^ x & swarHi
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// scanNumber validates a JSON number starting at b[i].
func scanNumber(b []byte, i int) (int, *syntaxError) {
	start := i
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	default:
		return i, &syntaxError{start, "invalid number"}
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || !isDigit(b[i]) {
			return i, &syntaxError{start, "invalid number"}
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return i, &syntaxError{start, "invalid number"}
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	return i, nil
}

// The functions below walk JSON that has already been validated.

// skipString returns the offset after the string starting at b[i] == '"'.
func skipString(b []byte, i int) int {
	i++
	for {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return len(b)
		}
		i += j
		// Count the backslashes before the quote: odd means escaped.
		n := 0
		for k := i - 1; k >= 0 && b[k] == '\\'; k-- {
			n++
		}
		i++
		if n%2 == 0 {
			return i
		}
	}
}

// skipValue returns the offset after the valid value starting at b[i].
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = skipString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	default:
		for i < len(b) {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i
			}
			i++
		}
		return i
	}
}

// eachMember calls fn for each member of the valid object obj, in order,
// until fn returns false. It does nothing when obj is not an object.
func eachMember(obj []byte, fn func(key, val []byte) bool) {
	if len(obj) == 0 || obj[0] != '{' {
		return
	}
	i := skipWS(obj, 1)
	for i < len(obj) && obj[i] == '"' {
		ks := i
		i = skipString(obj, i)
		key := obj[ks+1 : i-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			key = unquote(obj[ks:i])
		}
		i = skipWS(obj, i)
		i = skipWS(obj, i+1) // ':'
		vs := i
		i = skipValue(obj, i)
		if !fn(key, obj[vs:i]) {
			return
		}
		i = skipWS(obj, i)
		if i < len(obj) && obj[i] == ',' {
			i = skipWS(obj, i+1)
		}
	}
}

// eachElem calls fn for each element of the valid array arr until fn
// returns false. It does nothing when arr is not an array.
func eachElem(arr []byte, fn func(val []byte) bool) {
	if len(arr) == 0 || arr[0] != '[' {
		return
	}
	i := skipWS(arr, 1)
	for i < len(arr) && arr[i] != ']' {
		vs := i
		i = skipValue(arr, i)
		if !fn(arr[vs:i]) {
			return
		}
		i = skipWS(arr, i)
		if i < len(arr) && arr[i] == ',' {
			i = skipWS(arr, i+1)
		}
	}
}

// field returns the value of the last member named name in the valid object
// obj (encoding/json keeps the last of duplicate keys), or nil.
func field(obj []byte, name string) []byte {
	var v []byte
	eachMember(obj, func(k, val []byte) bool {
		if string(k) == name {
			v = val
		}
		return true
	})
	return v
}

// jsonString decodes a valid JSON string value; ok is false for other kinds.
func jsonString(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	in := v[1 : len(v)-1]
	clean := true
	for _, c := range in {
		if c == '\\' || c >= utf8.RuneSelf {
			clean = false
			break
		}
	}
	if clean {
		return string(in), true
	}
	return string(unquote(v)), true
}

// jsonBool decodes true or false; ok is false for other kinds.
func jsonBool(v []byte) (val, ok bool) {
	switch string(v) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}

// jsonFloat decodes a number; ok is false for other kinds and for numbers
// out of float64 range (encoding/json cannot decode those into any either).
func jsonFloat(v []byte) (float64, bool) {
	if len(v) == 0 || !(v[0] == '-' || isDigit(v[0])) {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil {
		return 0, false
	}
	return f, true
}

// jsonInt decodes a number with an integral value in int64 range. It goes
// through float64 so that a value and its re-encoding by encoding/json (a
// float64 in an any) always decode alike.
func jsonInt(v []byte) (int64, bool) {
	f, ok := jsonFloat(v)
	if !ok || f != math.Trunc(f) || f < -9.2e18 || f > 9.2e18 {
		return 0, false
	}
	return int64(f), true
}

// unquote decodes the valid JSON string literal s (with its quotes) exactly
// as encoding/json does.
func unquote(s []byte) []byte {
	s = s[1 : len(s)-1]
	b := make([]byte, 0, len(s)+utf8.UTFMax)
	for r := 0; r < len(s); {
		c := s[r]
		switch {
		case c == '\\':
			if r+1 >= len(s) {
				return b
			}
			switch s[r+1] {
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				rr := getu4(s[r:])
				if rr < 0 {
					return b
				}
				r += 6
				if utf16.IsSurrogate(rr) {
					if rr1 := getu4(s[r:]); rr1 >= 0 {
						if dec := utf16.DecodeRune(rr, rr1); dec != utf8.RuneError {
							r += 6
							b = utf8.AppendRune(b, dec)
							continue
						}
					}
					rr = utf8.RuneError
				}
				b = utf8.AppendRune(b, rr)
				continue
			default: // '"', '\\', '/'
				b = append(b, s[r+1])
			}
			r += 2
		case c < utf8.RuneSelf:
			b = append(b, c)
			r++
		default:
			rr, size := utf8.DecodeRune(s[r:])
			r += size
			b = utf8.AppendRune(b, rr)
		}
	}
	return b
}

// getu4 decodes \uXXXX at the start of s, or returns -1.
func getu4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range s[2:6] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}
