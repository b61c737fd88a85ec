package web

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

var (
	tagRe  = regexp.MustCompile(`<(/?)([a-zA-Z0-9!]+)([^>]*)>`)
	attrRe = regexp.MustCompile(`\s([a-zA-Z-]+)="([^"]*)"`)
)

var allowedTags = []string{"p", "em", "strong", "code", "pre", "a", "ul", "ol", "li", "h1", "h2", "h3", "h4", "h5", "h6",
	"blockquote", "hr", "br", "img", "del"}

// FuzzMarkdownIsInert: whatever the model writes, its rendered markdown
// holds only plain formatting tags, no script, no event handler, no
// javascript: or data: link.
func FuzzMarkdownIsInert(f *testing.F) {
	for _, s := range []string{"**bold** `code`", "<script>alert(1)</script>", "[x](javascript:alert(1))", "<img src=x onerror=alert(1)>",
		"![i](data:text/html;base64,PHNjcmlwdD4=)", "<a href=\"javascript:x\">y</a>", "```\n<script>\n```", "[x](JaVaScRiPt:alert(1))",
		"<!-- QUESTION: {} -->", "\x1b]8;;http://evil\x07link\x1b]8;;\x07", "<svg onload=alert(1)>", "[x]( javascript:alert(1))"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		// goldmark puts this fixed comment where it dropped raw HTML.
		out := strings.ReplaceAll(string(markdown(s)), "<!-- raw HTML omitted -->", "")
		for _, m := range tagRe.FindAllStringSubmatch(out, -1) {
			name := strings.ToLower(m[2])
			if !slices.Contains(allowedTags, name) {
				t.Fatalf("tag <%s> in %q from %q", name, out, s)
			}
			for _, a := range attrRe.FindAllStringSubmatch(m[3], -1) {
				attr, val := strings.ToLower(a[1]), strings.ToLower(strings.TrimSpace(a[2]))
				switch attr {
				case "href", "src":
					for _, bad := range []string{"javascript:", "vbscript:", "data:"} {
						if strings.HasPrefix(val, bad) {
							t.Fatalf("%s=%q in %q from %q", attr, a[2], out, s)
						}
					}
				case "alt", "title", "class", "start":
				default:
					t.Fatalf("attribute %s in %q from %q", attr, out, s)
				}
			}
			if strings.Contains(strings.ToLower(m[3]), " on") && !strings.Contains(m[3], `"`) {
				t.Fatalf("unquoted attribute in %q", out)
			}
		}
	})
}
