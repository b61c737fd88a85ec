package questions

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// streamCorpus is text the streaming detector must agree on with Detect.
var streamCorpus = []string{
	"I need a decision.\n<!--QUESTION:" + authJSON + "-->",
	"a <!--QUESTION:{\"question\":\"1?\"}--> b `c` <!--QUESTION:{\"question\":\"2 --> `x`?\"}-->",
	"```\n<!--QUESTION:{\"question\":\"no\"}-->\n```\n<!--QUESTION:{\"question\":\"yes\"}-->\n",
	"a `b <!--QUESTION:{\"question\":\"code\"}--> c` d\n<!--QUESTION:{\"question\":\"yes\"}-->",
	"a ` b <!--QUESTION:{\"question\":\"text\"}-->",
	"<!--  QUESTION :\n{\n \"questions\":[{\"question\":\"x\"}]}\n-->tail",
	"<!--QUESTION:{\"questions\":[{\"question\":\"q\",}]}--> then <!--QUESTION:{\"question\":\"ok\"}-->",
	"<!--QUESTION:{\"question\":\"q\"} junk --> <!--QUESTION:{\"question\":\"ok\"}-->",
	"<!--QUESTION:{\"question\":\"q\"",
	"<!--QUESTION:{\"question\":\"q\"}",
	"<!--QUESTION:{\"question\":\"q\"}--",
	"<!--QUESTI",
	"~~~ x\n<!--QUESTION:{\"question\":\"no\"}-->\n~~~\n",
	"````\n```\n<!--QUESTION:{\"question\":\"no\"}-->\n````\n<!--QUESTION:{\"question\":\"yes\"}-->",
	"``` a`b\n<!--QUESTION:{\"question\":\"yes\"}-->",
	"```",
	"x\n```",
	"`` ` `` <!--QUESTION:{\"question\":\"yes\"}--> ``` ` ``",
}

func checkStream(t *testing.T, text string, cuts []int) {
	t.Helper()
	want := Detect(text)
	d := newStreamDetector()
	prev := 0
	for _, c := range cuts {
		d.Write(text[prev:c])
		// What is reported early must be what Detect reports.
		got := d.Markers()
		if len(got) > len(want) || (len(got) > 0 && !reflect.DeepEqual(got, want[:len(got)])) {
			t.Fatalf("after %d bytes of %q (cuts %v): markers %+v, want a prefix of %+v", c, text, cuts, got, want)
		}
		prev = c
	}
	d.Write(text[prev:])
	d.Close()
	if got := d.Markers(); !reflect.DeepEqual(got, want) && !(len(got) == 0 && len(want) == 0) {
		t.Fatalf("stream of %q (cuts %v) = %+v, want %+v", text, cuts, got, want)
	}
	if d.Text() != text {
		t.Fatalf("Text() = %q, want %q", d.Text(), text)
	}
}

func TestStreamDetectorEveryByte(t *testing.T) {
	t.Parallel()
	for _, text := range streamCorpus {
		// One byte at a time, and every single cut.
		all := make([]int, 0, len(text))
		for i := 1; i < len(text); i++ {
			all = append(all, i)
			checkStream(t, text, []int{i})
		}
		checkStream(t, text, all)
	}
}

func TestStreamDetectorRandomChunks(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	big := strings.Join(streamCorpus, "\n\n")
	for range 200 {
		var cuts []int
		for i := 0; i < len(big); i += 1 + r.IntN(40) {
			if i > 0 {
				cuts = append(cuts, i)
			}
		}
		checkStream(t, big, cuts)
	}
}

func TestStreamDetectorReportsEarly(t *testing.T) {
	t.Parallel()
	d := newStreamDetector()
	d.Write("Text.\n<!--QUESTION:{\"question\":\"q")
	if len(d.Markers()) != 0 {
		t.Fatal("a half block was reported")
	}
	d.Write("?\"}-->")
	if ms := d.Markers(); len(ms) != 1 || ms[0].Questions[0].Text != "q?" {
		t.Fatalf("a complete block at the end was not reported before Close: %+v", ms)
	}
	d.Close()
	d.Write("<!--QUESTION:{\"question\":\"late\"}-->")
	if len(d.Markers()) != 1 {
		t.Fatal("Write after Close changed the markers")
	}
}

func TestStreamDetectorLongPendingStaysLinear(t *testing.T) {
	t.Parallel()
	// A block that never closes, fed in tiny chunks: the backoff keeps the
	// rescans bounded, and the result still equals Detect's.
	text := "<!--QUESTION:{\"question\":\"" + strings.Repeat("a", 200<<10)
	d := newStreamDetector()
	for i := 0; i < len(text); i += 7 {
		d.Write(text[i:min(i+7, len(text))])
	}
	d.Close()
	if got, want := d.Markers(), Detect(text); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

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

// TestStreamDetectorGrammar builds texts from the pieces the detector cares
// about (openers, JSON, backtick runs, fences, newlines) and checks random
// chunkings against Detect.
func TestStreamDetectorGrammar(t *testing.T) {
	t.Parallel()
	pieces := []string{
		"<!--QUESTION:", "<!-- QUESTION :", "<!--", "QUESTION", ":", "{", "}", "{\"question\":\"q\"}",
		"{\"question\":\"a`b\"}", "\"", "\\", "-->", "--", ">", "`", "``", "```", "~~~", "\n", "\n\n", " ", "x",
		"> ", "   ", "[", "]", "{\"questions\":[]}", EncodeMarker([]Question{authQuestion}),
	}
	r := rand.New(rand.NewPCG(3, 5))
	for range 3000 {
		var b strings.Builder
		for range 1 + r.IntN(25) {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		text := b.String()
		var cuts []int
		for i := 1 + r.IntN(4); i < len(text); i += 1 + r.IntN(6) {
			cuts = append(cuts, i)
		}
		checkStream(t, text, cuts)
	}
}
