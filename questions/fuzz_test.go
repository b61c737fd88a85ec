package questions

import (
	"reflect"
	"strings"
	"testing"
)

func fuzzSeeds(f *testing.F) {
	for _, s := range streamCorpus {
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

// FuzzStreamDetector: the streaming detector, fed the text in chunks chosen
// by seed, reports exactly what Detect reports, never anything else early.
func FuzzStreamDetector(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, text string, seed uint64) {
		want := Detect(text)
		d := newStreamDetector()
		x := seed | 1
		for i := 0; i < len(text); {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			n := 1 + int(x%9)
			if x&0x100 != 0 {
				n = 1 + int(x%200)
			}
			j := min(len(text), i+n)
			d.Write(text[i:j])
			i = j
			got := d.Markers()
			if len(got) > len(want) || (len(got) > 0 && !reflect.DeepEqual(got, want[:len(got)])) {
				t.Fatalf("after %d bytes: %+v, want a prefix of %+v", i, got, want)
			}
		}
		d.Close()
		got := d.Markers()
		if len(got) != len(want) || (len(got) > 0 && !reflect.DeepEqual(got, want)) {
			t.Fatalf("stream = %+v, want %+v", got, want)
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
