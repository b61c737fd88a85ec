package questions

import (
	"fmt"
	"strings"
	"testing"
)

// assistantText builds about size bytes of text shaped like an assistant's:
// prose, inline code, fenced code, lists, '<' and the odd HTML comment. With
// every > 0, a QUESTION block follows every every-th paragraph (and an
// example block sits in a code fence now and then).
func assistantText(size, every int) string {
	paras := []string{
		"I read the handler and the router. The login flow calls `auth.Check(ctx, req)` before it renders the page, so a < b holds for every request we saw.\n\n",
		"Here is the change:\n\n```go\nfunc Check(ctx context.Context, r *http.Request) error {\n\tif r.Header.Get(\"Authorization\") == \"\" {\n\t\treturn ErrNoAuth // <- here\n\t}\n\treturn nil\n}\n```\n\n",
		"- updated `internal/auth/check.go`\n- added tests for the `<nil>` case\n- ran `go test ./...`: all green\n\n",
		"<!-- progress: 3/5 --> Next I will wire the middleware into `cmd/server/main.go` and update the README's *Setup* section.\n\n",
		"> Note: the config uses `${TOKEN}` expansion; tokens never land in the file. Use `<div class=\"x\">` for the banner.\n\n",
	}
	example := "For reference, the format is:\n\n```\n<!--QUESTION:{\"questions\":[{\"question\":\"example\"}]}-->\n```\n\n"
	var b strings.Builder
	b.Grow(size + 4096)
	for i := 0; b.Len() < size; i++ {
		b.WriteString(paras[i%len(paras)])
		if every > 0 && i%every == every-1 {
			if i%(every*4) == every-1 {
				b.WriteString(example)
			}
			fmt.Fprintf(&b, "I need a decision.\n<!--QUESTION:{\"questions\":[{\"question\":\"Which auth method for step %d?\",\"header\":\"Auth\",\"options\":[{\"label\":\"OAuth2\",\"description\":\"Use OAuth2\"},{\"label\":\"JWT\",\"description\":\"Stateless\"}]}]}-->\n\n", i)
		}
	}
	return b.String()
}

const benchSize = 10 << 20

func BenchmarkDetectNoMarker(b *testing.B) {
	text := assistantText(benchSize, 0)
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	for b.Loop() {
		if ms := Detect(text); len(ms) != 0 {
			b.Fatal("found a block")
		}
	}
}

func BenchmarkDetectWithMarkers(b *testing.B) {
	text := assistantText(benchSize, 500) // a block every ~100 KB
	want := len(Detect(text))
	if want == 0 {
		b.Fatal("no blocks")
	}
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	for b.Loop() {
		if ms := Detect(text); len(ms) != want {
			b.Fatal("wrong count")
		}
	}
	b.ReportMetric(float64(want), "markers")
}

func BenchmarkDetectDenseMarkers(b *testing.B) {
	text := assistantText(benchSize, 5) // a block every ~1 KB
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	n := 0
	for b.Loop() {
		n = len(Detect(text))
	}
	b.ReportMetric(float64(n), "markers")
}

func TestBenchTextShape(t *testing.T) {
	t.Parallel()
	text := assistantText(200<<10, 50)
	ms := Detect(text)
	if len(ms) == 0 {
		t.Fatal("no blocks")
	}
	for _, m := range ms {
		if m.Err != nil || !strings.HasPrefix(m.Questions[0].Text, "Which auth method") {
			t.Fatalf("unexpected block %+v (the fenced example must not count)", m)
		}
	}
	if n := strings.Count(text, "<!--QUESTION:"); n <= len(ms) {
		t.Fatalf("%d openers, %d blocks: the examples should be skipped", n, len(ms))
	}
}
