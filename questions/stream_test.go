package questions

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestTurnCollector(t *testing.T) {
	t.Parallel()
	q1 := `<!--QUESTION:{"question":"one?"}-->`
	q2 := `<!--QUESTION:{"questions":[{"question":"two?"},{"question":"three?"}]}-->`
	t.Run("blocks in order, result ignored", func(t *testing.T) {
		t.Parallel()
		var c TurnCollector
		c.AddAssistantText("First.\n" + q1)
		c.AddAssistantText("```\n" + q1 + "\n") // an example left open in its block…
		c.AddAssistantText("Second. " + q2)     // …does not hide the next block
		c.AddResultText("First.\n" + q1 + "\n\nSecond. " + q2)
		qs, err := c.Questions()
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, q := range qs {
			got = append(got, q.Text)
		}
		if want := []string{"one?", "two?", "three?"}; !reflect.DeepEqual(got, want) {
			t.Errorf("questions = %q, want %q", got, want)
		}
		if got, want := c.Text(), "First.\n\n```\n"+q1+"\n\nSecond."; got != want {
			t.Errorf("Text() = %q, want %q", got, want)
		}
	})
	t.Run("result used when no assistant text", func(t *testing.T) {
		t.Parallel()
		var c TurnCollector
		c.AddResultText("Only result. " + q1)
		qs, err := c.Questions()
		if err != nil || len(qs) != 1 || qs[0].Text != "one?" {
			t.Fatalf("Questions() = %+v, %v", qs, err)
		}
		if c.Text() != "Only result." {
			t.Errorf("Text() = %q", c.Text())
		}
	})
	t.Run("errors joined with turn offsets", func(t *testing.T) {
		t.Parallel()
		var c TurnCollector
		c.AddAssistantText("abc")
		c.AddAssistantText(`<!--QUESTION:{"questions":[]}-->` + q1 + `<!--QUESTION:{"question":""}-->`)
		qs, err := c.Questions()
		if len(qs) != 1 {
			t.Errorf("valid questions = %+v, want one", qs)
		}
		errs := flatten(err)
		if len(errs) != 2 {
			t.Fatalf("err = %v, want two MarkerErrors", err)
		}
		var me *MarkerError
		if !errors.As(errs[0], &me) || me.Offset != 3 {
			t.Errorf("first error = %#v, want offset 3 (into the concatenated text)", errs[0])
		}
		if p := CorrectionPrompt(err); !strings.Contains(p, "no questions") || !strings.Contains(p, "questions[0].question: empty") {
			t.Errorf("CorrectionPrompt = %q", p)
		}
		// The same from the error's stored text.
		if p, q := CorrectionPrompt(err), CorrectionPrompt(errors.New(err.Error())); p != q {
			t.Errorf("CorrectionPrompt from text = %q, want %q", q, p)
		}
	})
	t.Run("too many questions across blocks", func(t *testing.T) {
		t.Parallel()
		var c TurnCollector
		six := EncodeMarker([]Question{{Text: "a"}, {Text: "b"}, {Text: "c"}, {Text: "d"}, {Text: "e"}, {Text: "f"}})
		c.AddAssistantText(six)
		c.AddAssistantText(six)
		_, err := c.Questions()
		var me *MarkerError
		if !errors.As(err, &me) || me.Field != "questions" || me.Offset != len(six) {
			t.Fatalf("err = %v, want too many questions at the second block", err)
		}
	})
	t.Run("nothing asked", func(t *testing.T) {
		t.Parallel()
		var c TurnCollector
		c.AddAssistantText("Done. The format `<!--QUESTION:{\"question\":\"x\"}-->` was not needed.")
		qs, err := c.Questions()
		if qs != nil || err != nil {
			t.Fatalf("Questions() = %+v, %v; want nothing", qs, err)
		}
	})
}

// TestFixtureTurn1 replays the real CLI's recorded output: one set, one
// question, OAuth2 / JWT, asked once although the result line repeats it.
func TestFixtureTurn1(t *testing.T) {
	t.Parallel()
	path := filepath.Join("..", "executor", "testdata", "claude-code-2.1.330", "turn1.ndjson")
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("fixture missing (%v): the recorded CLI output is expected at %s, relative to the package", err, path)
	}
	defer f.Close()
	var c TurnCollector
	sawResultMarker := false
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadString('\n')
		if strings.TrimSpace(line) != "" {
			var ev struct {
				Type    string `json:"type"`
				Result  string `json:"result"`
				Message struct {
					Content []struct {
						Type string `json:"type"`
						Text string `json:"text"`
					} `json:"content"`
				} `json:"message"`
			}
			if jerr := json.Unmarshal([]byte(line), &ev); jerr != nil {
				t.Fatalf("%s: %v", path, jerr)
			}
			switch ev.Type {
			case "assistant":
				for _, b := range ev.Message.Content {
					if b.Type == "text" {
						c.AddAssistantText(b.Text)
					}
				}
			case "result":
				sawResultMarker = len(Detect(ev.Result)) == 1
				c.AddResultText(ev.Result)
			}
		}
		if err != nil {
			break
		}
	}
	if !sawResultMarker {
		t.Fatal("the fixture's result line should repeat the marker (that is what this test guards)")
	}
	qs, err := c.Questions()
	if err != nil {
		t.Fatal(err)
	}
	set := NewSet("run-1", 1, qs)
	if err := set.Validate(); err != nil {
		t.Fatal(err)
	}
	if len(set.Questions) != 1 {
		t.Fatalf("got %d questions, want 1 (asked once): %+v", len(set.Questions), set.Questions)
	}
	q := set.Questions[0]
	if q.Text != "Which auth method?" || q.Header != "Auth" || len(q.Options) != 2 ||
		q.Options[0].Label != "OAuth2" || q.Options[1].Label != "JWT" {
		t.Errorf("question = %+v", q)
	}
	if c.Text() != "I need a decision." {
		t.Errorf("Text() = %q", c.Text())
	}
}

func ExampleTurnCollector() {
	var c TurnCollector
	c.AddAssistantText("I need a decision.\n" + EncodeMarker([]Question{authQuestion}))
	qs, err := c.Questions()
	fmt.Println(len(qs), qs[0].Options[1].Label, err, c.Text())
	// Output: 1 JWT <nil> I need a decision.
}
