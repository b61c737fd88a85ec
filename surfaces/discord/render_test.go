package discord

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"

	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces/discord/discordtest"
	"github.com/orchestrator-dev/orchestrator/surfaces/surfacetest"
)

func TestCustomID(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("s", 120)
	tests := []struct {
		set, q  string
		hashed  bool
		comment string
	}{
		{"s0551c3bb4f0", "q320c", false, "real IDs"},
		{long, "q1", true, "long set ID"},
		{"a|b", "q1", true, "separator in the set ID"},
		{"s1", "q|1", true, "separator in the question ID"},
		{"#s1", "q1", true, "hash-like set ID"},
		{"", "q1", true, "empty set ID"},
	}
	for _, tt := range tests {
		t.Run(tt.comment, func(t *testing.T) {
			r := ref(tt.set, tt.q)
			if strings.HasPrefix(r, "#") != tt.hashed {
				t.Errorf("ref(%q, %q) = %q, hashed = %v", tt.set, tt.q, r, !tt.hashed)
			}
			for _, id := range []string{customID(r, actButton, "24"), customID(r, actSelect), customID(r, actText), customID(r, actModal)} {
				if len(id) > maxCustomID {
					t.Errorf("custom ID %q is %d long", id, len(id))
				}
				p, ok := parseCustomID(id)
				if !ok || p.ref != r {
					t.Errorf("parseCustomID(%q) = %+v, %v; want ref %q", id, p, ok, r)
				}
			}
		})
	}
	for _, bad := range []string{"", "oq|", "oq|s|q", "oq|s|q|b", "oq|s|q|b|x", "oq|s|q|b|-1", "oq|s|q|b|01", "oq|s|q|b|25",
		"oq|s|q|z", "oq|s|q|s|1", "oq||q|b|1", "xx|s|q|b|1", "oq|#h|q|b|1", "oq|" + strings.Repeat("x", 100) + "|q|t"} {
		if p, ok := parseCustomID(bad); ok {
			t.Errorf("parseCustomID(%q) = %+v, want rejected", bad, p)
		}
	}
}

func FuzzParseCustomID(f *testing.F) {
	for _, s := range []string{"oq|s1|q1|b|0", "oq|#abc|t", "oq|s|q|s", "oq|s|q|m", "oq||", "oq|s|q|b|99", "oq|0|0|a|0", "oq|s1|q1|r"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, ok := parseCustomID(s)
		if !ok {
			return
		}
		var again string
		if p.action == actButton || p.action == actAll { // the actions that carry an option's index
			again = customID(p.ref, p.action, fmt.Sprint(p.index))
		} else {
			again = customID(p.ref, p.action)
		}
		if again != s {
			t.Errorf("parseCustomID(%q) = %+v, which formats as %q", s, p, again)
		}
	})
}

// checkLimits fails when a rendered message breaks one of Discord's limits.
func checkLimits(t *testing.T, content string, embeds []*discordgo.MessageEmbed, comps []discordgo.MessageComponent) {
	t.Helper()
	n := utf8.RuneCountInString
	if n(content) > maxContent {
		t.Errorf("content is %d characters", n(content))
	}
	for _, e := range embeds {
		total := n(e.Title) + n(e.Description)
		if n(e.Title) > maxEmbedTitle || n(e.Description) > maxEmbedDesc || len(e.Fields) > 25 {
			t.Errorf("embed title %d, description %d, %d fields", n(e.Title), n(e.Description), len(e.Fields))
		}
		for _, f := range e.Fields {
			total += n(f.Name) + n(f.Value)
			if f.Name == "" || f.Value == "" || n(f.Name) > maxFieldName || n(f.Value) > maxFieldValue {
				t.Errorf("field %q = %q breaks the limits", f.Name, f.Value)
			}
		}
		if e.Footer != nil {
			total += n(e.Footer.Text)
		}
		if e.Author != nil {
			total += n(e.Author.Name)
		}
		if total > maxEmbedTotal {
			t.Errorf("embed is %d characters in total", total)
		}
	}
	if len(comps) > 5 {
		t.Errorf("%d rows", len(comps))
	}
	for _, row := range comps {
		r := row.(discordgo.ActionsRow)
		if len(r.Components) == 0 || len(r.Components) > 5 {
			t.Errorf("row of %d components", len(r.Components))
		}
		for _, c := range r.Components {
			switch c := c.(type) {
			case discordgo.Button:
				if c.Label == "" || n(c.Label) > maxButtonLabel || len(c.CustomID) > maxCustomID {
					t.Errorf("button %q (%q) breaks the limits", c.Label, c.CustomID)
				}
			case discordgo.SelectMenu:
				if len(c.Options) == 0 || len(c.Options) > maxOptions || c.MaxValues > len(c.Options) || len(c.CustomID) > maxCustomID {
					t.Errorf("select menu %+v breaks the limits", c)
				}
				for _, o := range c.Options {
					if n(o.Label) > maxSelectText || n(o.Description) > maxSelectText || o.Value == "" {
						t.Errorf("select option %+v breaks the limits", o)
					}
				}
			}
		}
	}
}

func FuzzRender(f *testing.F) {
	h := surfacetest.HostileQuestion()
	f.Add(h.Header, h.Text, h.Options[0].Label, h.Options[0].Description, "context", 2, false, true, "free")
	f.Add("", "", "", "", "", 0, false, false, "")
	f.Add(strings.Repeat("é", 300), strings.Repeat("*", 5000), strings.Repeat("@", 200), strings.Repeat("<", 2000), strings.Repeat("x\n", 3000), 25, true, true, strings.Repeat("y", 5000))
	f.Fuzz(func(t *testing.T, header, text, label, desc, context string, nOpts int, multi, freeText bool, answer string) {
		nOpts = max(0, nOpts%26)
		q := questions.Question{ID: "q1", Header: header, Text: text, MultiSelect: multi, FreeText: freeText}
		for i := range nOpts {
			q.Options = append(q.Options, questions.Option{Label: fmt.Sprintf("%d%s", i, label), Description: desc})
		}
		set := questions.Set{ID: "s1", RunID: "r", Title: header, Context: context, Questions: []questions.Question{q, q}}
		set.Questions[1].ID = "q2"
		for _, a := range []*answered{nil, {Answer: questions.Answer{QuestionID: "q1", Labels: []string{label, label}, Text: answer}, By: header, Name: label, Via: desc}} {
			for i := range set.Questions {
				content, embeds, comps := render(set, i, a)
				checkLimits(t, content, embeds, comps)
				for _, s := range append([]string{content, embeds[0].Title, embeds[0].Description}, fieldTexts(embeds[0])...) {
					if strings.ContainsAny(s, "\x1b\x00\u202e\u200b") {
						t.Errorf("unsafe character left in %q", s)
					}
				}
			}
		}
		m := modal(q, ref(set.ID, q.ID))
		if n := utf8.RuneCountInString(m.Title); n == 0 || n > maxModalTitle {
			t.Errorf("modal title %q", m.Title)
		}
	})
}

func fieldTexts(e *discordgo.MessageEmbed) []string {
	var out []string
	for _, f := range e.Fields {
		out = append(out, f.Name, f.Value)
	}
	return out
}

func TestEscape(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"plain words", "plain words"},
		{"@everyone <@&123> **bold**", `\@everyone \<\@&123\> \*\*bold\*\*`},
		{"\x1b[31mred\x1b[0m \x1b]0;title\x07ok", "red ok"},
		{"a\u202eb\u200bc\x00d", "abcd"},
		{"[link](https://x.invalid)", `\[link\]\(https://x.invalid\)`},
	}
	for _, tt := range tests {
		if got := escape(tt.in, 1000, false); got != tt.want {
			t.Errorf("escape(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := escape(strings.Repeat("*", 100), 11, false); utf8.RuneCountInString(got) > 11 || !strings.HasSuffix(got, "…") || strings.HasSuffix(got, "\\…") {
		t.Errorf("clipped escape = %q", got)
	}
}

// BenchmarkAckLatency measures, on the fake Discord, the time from the
// dispatch of a click to the surface's acknowledgement.
func BenchmarkAckLatency(b *testing.B) {
	srv := discordtest.NewServer(b)
	cfg := Config{Token: srv.Token(), ChannelID: discordtest.ChannelID, AllowUsers: []string{alice.ID}, APIURL: srv.URL}
	s, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var total time.Duration
	n := 0
	// Each op is a whole round (post, click, acknowledgement, answer);
	// µs/ack is the part people wait for: click to acknowledgement.
	for b.Loop() {
		set := surfacetest.SingleChoice(fmt.Sprintf("bench-%d", n))
		done := make(chan error, 1)
		answers := surfacetest.NewAnswers()
		answers.Add(set)
		go func() { done <- s.Ask(ctx, set, answers) }()
		var m *discordgo.Message
		for m == nil {
			if msgs := srv.Messages(discordtest.ChannelID); len(msgs) > 0 && hasRef(msgs[len(msgs)-1], ref(set.ID, set.Questions[0].ID)) {
				m = msgs[len(msgs)-1]
			}
			time.Sleep(time.Millisecond)
		}
		id, err := srv.ClickButton(alice, m.ID, "SQLite")
		if err != nil {
			b.Fatal(err)
		}
		r, err := srv.WaitResponse(ctx, id)
		if err != nil {
			b.Fatal(err)
		}
		total += r.Latency
		n++
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(total.Microseconds())/float64(n), "µs/ack")
}

func BenchmarkRender(b *testing.B) {
	set := surfacetest.Hostile("bench")
	for b.Loop() {
		render(set, 0, nil)
	}
}

// TestRenderApproval: an approval shows the call and green/grey/red buttons,
// and its free-text form is a refusal's reason.
func TestRenderApproval(t *testing.T) {
	set := questions.ApprovalSet("r1", 1, questions.ToolCall{ToolUseID: "t1", Tool: "Bash", Input: []byte(`{"command":"rm -rf build"}`)})
	_, embeds, comps := render(set, 0, nil)
	var ctx string
	for _, f := range embeds[0].Fields {
		if f.Name == "Context" {
			ctx = f.Value
		}
	}
	if !strings.Contains(ctx, "rm -rf build") {
		t.Errorf("context %q", ctx)
	}
	var styles []discordgo.ButtonStyle
	var other string
	for _, row := range comps {
		r, ok := row.(discordgo.ActionsRow)
		if !ok {
			continue
		}
		for _, c := range r.Components {
			if b, ok := c.(discordgo.Button); ok {
				if strings.Contains(b.Label, "reason") {
					other = b.Label
				} else {
					styles = append(styles, b.Style)
				}
			}
		}
	}
	if len(styles) != 3 || styles[0] != discordgo.SuccessButton || styles[1] != discordgo.SecondaryButton || styles[2] != discordgo.DangerButton || other == "" {
		t.Errorf("buttons %v, free text %q", styles, other)
	}
}

// TestRenderApprovalShowsHiddenFirstLine: a command whose dangerous first
// line is followed by 4 KiB of comments shows that line and its end, says
// what was cut and where the whole is (issue 21).
func TestRenderApprovalShowsHiddenFirstLine(t *testing.T) {
	set := surfacetest.HiddenApproval()
	_, embeds, _ := render(set, 0, nil)
	var ctx string
	for _, f := range embeds[0].Fields {
		if f.Name == "Context" {
			ctx = f.Value
		}
	}
	for _, want := range []string{escape(surfacetest.HiddenFirstLine, 1000, false), "echo done", "characters cut …", set.RunID} {
		if !strings.Contains(ctx, want) {
			t.Errorf("the context field does not show %q:\n%s", want, ctx)
		}
	}
	if n := utf8.RuneCountInString(ctx); n > maxFieldValue {
		t.Errorf("context field of %d characters, over Discord's %d", n, maxFieldValue)
	}
}
