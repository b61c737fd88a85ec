package delivery

import (
	"strings"
	"testing"
)

// TestPRBodyCloses: a run started from an issue says "Closes #N" (or
// owner/name#N); anything else in Closes is left out.
func TestPRBodyCloses(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ closes, want string }{
		{"#7", "\nCloses #7\n"},
		{"acme/webapp#7", "\nCloses acme/webapp#7\n"},
		{"", ""},
		{"#7 and #8", ""},
		{"#0", ""},
		{"x\nCloses #9", ""},
	} {
		body := Report{RunID: "r1", Closes: tt.closes}.PRBody()
		if tt.want == "" {
			if strings.Contains(body, "Closes") {
				t.Errorf("Closes %q: body says %q", tt.closes, body)
			}
		} else if !strings.Contains(body, tt.want) {
			t.Errorf("Closes %q: body %q lacks %q", tt.closes, body, tt.want)
		}
	}
}
