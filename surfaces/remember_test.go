package surfaces

import "testing"

func TestCutRemember(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, answer, value, pattern string
		ok                         bool
	}{
		{in: "2", answer: "2", ok: true},
		{in: "q7f3a: 2 --remember spec:7d", answer: "q7f3a: 2", value: "spec:7d", ok: true},
		{in: "Allow once --remember spec --rule Bash(go test:*)", answer: "Allow once", value: "spec", pattern: "Bash(go test:*)", ok: true},
		{in: "2 --remember", answer: "2"},
		{in: "2 --remember spec:7d extra", answer: "2"},
		{in: "2 --remember --rule Bash", answer: "2"},
	} {
		answer, value, pattern, ok := CutRemember(tc.in)
		if answer != tc.answer || value != tc.value || pattern != tc.pattern || ok != tc.ok {
			t.Errorf("CutRemember(%q) = %q, %q, %q, %v", tc.in, answer, value, pattern, ok)
		}
	}
}

// FuzzCutRemember: any text splits without a panic, and the answer is
// never longer than the text.
func FuzzCutRemember(f *testing.F) {
	for _, s := range []string{"2", "q1: 2 --remember spec:7d", "Allow once --remember spec --rule Bash(go test:*)", "--remember", "--remember --rule"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		answer, value, pattern, ok := CutRemember(s)
		if len(answer) > len(s) || (!ok && (value != "" || pattern != "")) {
			t.Fatalf("CutRemember(%q) = %q, %q, %q, %v", s, answer, value, pattern, ok)
		}
	})
}
