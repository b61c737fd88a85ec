package questions

import (
	"reflect"
	"strings"
	"testing"
)

// seedTexts are the fuzzers' seeds: blocks next to code spans, fences,
// broken JSON and cut-off openers.
var seedTexts = []string{
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

func fuzzSeeds(f *testing.F) {
	for _, s := range seedTexts {
		f.Add(s, uint64(0x9e3779b97f4a7c15))
	}
	f.Add("`<!--QUESTION:{\"question\":\"x\"}-->`", uint64(3))
	f.Add("```\n<!--QUESTION:{\"question\":\"x\"}-->\n```", uint64(7))
	f.Add("<!--QUESTION:{\"questions\":[{\"question\":\"q\",\"options\":[\"a\",\"A\"]}]}-->", uint64(1))
}

// FuzzDetect: no panic; blocks in order, disjoint, well framed; valid
// blocks hold valid questions that survive an EncodeMarker round trip.
func FuzzDetect(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, text string, _ uint64) {
		ms := Detect(text)
		prev := 0
		for _, m := range ms {
			if m.Start < prev || m.End <= m.Start || m.End > len(text) {
				t.Fatalf("bad block bounds %d..%d after %d in %q", m.Start, m.End, prev, text)
			}
			prev = m.End
			if !strings.HasPrefix(text[m.Start:], "<!--") {
				t.Fatalf("block at %d does not start with <!--", m.Start)
			}
			if m.Err == nil {
				if !strings.HasSuffix(text[:m.End], "-->") {
					t.Fatalf("valid block does not end with -->: %q", text[m.Start:m.End])
				}
				if err := ValidateQuestions(m.Questions); err != nil {
					t.Fatalf("valid block with invalid questions: %v", err)
				}
				back := Detect(EncodeMarker(m.Questions))
				if len(back) != 1 || !reflect.DeepEqual(back[0].Questions, m.Questions) {
					t.Fatalf("round trip of %+v gave %+v", m.Questions, back)
				}
			} else if _, ok := m.Err.(*MarkerError); !ok {
				t.Fatalf("Err is %T", m.Err)
			}
		}
		s := Strip(text)
		if len(ms) == 0 && s != text {
			t.Fatalf("Strip changed a text without blocks")
		}
		if len(s) > len(text) {
			t.Fatalf("Strip grew the text")
		}
		c := Clean(text)
		if strings.Contains(c, "<!--") || len(Detect(c)) != 0 {
			t.Fatalf("Clean(%q) = %q holds a block", text, c)
		}
	})
}

// FuzzParseAnswer: no panic; an answer names only offered labels, in order,
// and free text only where allowed; an error lists what is valid.
func FuzzParseAnswer(f *testing.F) {
	f.Add("1", "OAuth2", "JWT", false, false)
	f.Add("oauth2, jwt", "OAuth2", "JWT", true, false)
	f.Add("other: LDAP", "OAuth2", "JWT", false, true)
	f.Add("1: 2\n2: x", "1", "2", true, true)
	f.Add("", "", "", false, false)
	f.Fuzz(func(t *testing.T, text, l1, l2 string, multi, free bool) {
		q := Question{ID: "qabcd", Text: "Pick?", MultiSelect: multi, FreeText: free}
		for _, l := range []string{l1, l2} {
			if l != "" {
				q.Options = append(q.Options, Option{Label: l})
			}
		}
		a, err := ParseQuestionAnswer(q, text)
		if err != nil {
			ie, ok := err.(*InvalidAnswerError)
			if !ok || ie.Message == "" || len(ie.Valid) == 0 {
				t.Fatalf("error %#v", err)
			}
		} else {
			if a.QuestionID != q.ID {
				t.Fatalf("QuestionID %q", a.QuestionID)
			}
			if len(a.Labels) == 0 && a.Text == "" {
				t.Fatalf("empty answer accepted for %q", text)
			}
			if a.Text != "" && !q.AcceptsFreeText() {
				t.Fatalf("free text %q for a question without freeText", a.Text)
			}
			if len(a.Labels) > 1 && !multi {
				t.Fatalf("several labels %q for a single choice", a.Labels)
			}
			k := 0
			for _, l := range a.Labels {
				for k < len(q.Options) && q.Options[k].Label != l {
					k++
				}
				if k == len(q.Options) {
					t.Fatalf("labels %q not offered in order by %+v", a.Labels, q.Options)
				}
				k++
			}
		}
		set := NewSet("r", 1, []Question{q, {Text: "Name?", Header: l1}})
		if as, err := ParseAnswer(set, text); err == nil && len(as) != 2 {
			t.Fatalf("ParseAnswer gave %d answers", len(as))
		}
		if r := FormatResponse(set, Response{Answers: []Answer{{QuestionID: set.Questions[0].ID, Text: text, Labels: []string{l1}}}, By: l2}, FormatOptions{MaxBytes: 600}); len(Detect(r)) != 0 {
			t.Fatalf("the prompt yields a block: %q", r)
		}
	})
}
