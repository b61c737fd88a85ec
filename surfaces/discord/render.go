package discord

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"

	"github.com/orchestrator-dev/orchestrator/questions"
)

// Discord's limits, in characters.
const (
	maxCustomID      = 100
	maxButtonLabel   = 80
	maxSelectText    = 100
	maxModalTitle    = 45
	maxInputLabel    = 45
	maxContent       = 2000
	maxEmbedTitle    = 256
	maxEmbedDesc     = 4096
	maxFieldName     = 256
	maxFieldValue    = 1024
	maxEmbedTotal    = 6000
	maxOptions       = 25
	maxButtonsPerRow = 5
	maxAnswerText    = 4000
)

// Actions in custom IDs.
const (
	actButton = "b" // option button; arg is the option's index
	actSelect = "s" // select menu; values are option indexes
	actText   = "t" // "Other…" / "Answer…" button: opens the modal
	actModal  = "m" // the modal's submission
	actAll    = "a" // "All N runs: option" button (group.go); arg is the option's index
	actRemb   = "r" // "Remember for this spec" button (remember.go); the ref is the offer's key
)

const (
	customIDPrefix = "oq|"
	textInputID    = "text"
)

// ref identifies a question in custom IDs: "setID|questionID" when that is
// short and unambiguous, else "#" and a hash of both. It is deterministic, so
// the buttons of a message posted before a restart still find their question.
func ref(setID, questionID string) string {
	plain := setID + "|" + questionID
	if setID != "" && questionID != "" && !strings.HasPrefix(setID, "#") &&
		!strings.Contains(plain[len(setID)+1:], "|") && !strings.Contains(setID, "|") &&
		len(customIDPrefix)+len(plain)+len("|b|24") <= maxCustomID {
		return plain
	}
	sum := sha256.Sum256([]byte(setID + "\x00" + questionID))
	return "#" + hex.EncodeToString(sum[:12])
}

func customID(ref, action string, arg ...string) string {
	s := customIDPrefix + ref + "|" + action
	for _, a := range arg {
		s += "|" + a
	}
	return s
}

type parsedID struct {
	ref    string
	action string
	index  int // actButton's option index
}

// parseCustomID reads a custom ID made by customID. ok is false for any
// other string (someone else's component, a forged one).
func parseCustomID(s string) (p parsedID, ok bool) {
	rest, found := strings.CutPrefix(s, customIDPrefix)
	if !found || len(s) > maxCustomID {
		return p, false
	}
	parts := strings.Split(rest, "|")
	n := 3 // set, question, action
	if strings.HasPrefix(rest, "#") {
		n = 2 // hash, action
	}
	if len(parts) < n || len(parts) > n+1 {
		return p, false
	}
	for _, x := range parts[:n-1] {
		if x == "" {
			return p, false
		}
	}
	p.ref = strings.Join(parts[:n-1], "|")
	p.action = parts[n-1]
	args := parts[n:]
	switch p.action {
	case actButton, actAll:
		if len(args) != 1 {
			return p, false
		}
		i, err := strconv.Atoi(args[0])
		if err != nil || i < 0 || i >= maxOptions || strconv.Itoa(i) != args[0] {
			return p, false
		}
		p.index = i
	case actSelect, actText, actModal, actRemb:
		if len(args) != 0 {
			return p, false
		}
	default:
		return p, false
	}
	return p, true
}

// answered is an answer taken for one question, as shown on its message.
type answered struct {
	Answer questions.Answer `json:"answer"`
	// By is who answered, as Response.By says it.
	By string `json:"by"`
	// Name is how the message names them.
	Name string `json:"name"`
	// Via is the surface the answer came from when it was not Discord.
	Via string `json:"via,omitempty"`
}

const (
	colorPending  = 0x5865F2
	colorAnswered = 0x57F287
)

// render builds the message for question idx of set: pending when a is nil,
// answered (components disabled) otherwise.
func render(set questions.Set, idx int, a *answered) (string, []*discordgo.MessageEmbed, []discordgo.MessageComponent) {
	q := set.Questions[idx]
	r := ref(set.ID, q.ID)

	header := q.Header
	if header == "" {
		header = "Question"
	}
	if len(set.Questions) > 1 {
		header = fmt.Sprintf("%s (%d/%d)", header, idx+1, len(set.Questions))
	}
	e := &discordgo.MessageEmbed{
		Title:       "❓ " + escape(header, maxEmbedTitle-2, false),
		Description: escape(q.Text, 3000, true),
		Color:       colorPending,
		Footer: &discordgo.MessageEmbedFooter{
			Text: clip(sanitize("question "+q.ID+" · set "+set.ID, false), 200),
		},
	}
	if set.Title != "" {
		e.Author = &discordgo.MessageEmbedAuthor{Name: clip(sanitize(set.Title, false), 200)}
	}
	if idx == 0 && strings.TrimSpace(set.Context) != "" {
		e.Fields = append(e.Fields, &discordgo.MessageEmbedField{Name: "Context", Value: contextValue(set)})
	}
	for i, o := range q.Options {
		if len(e.Fields) >= 25 {
			break
		}
		desc := escape(o.Description, 300, true)
		if desc == "" {
			desc = "—"
		}
		e.Fields = append(e.Fields, &discordgo.MessageEmbedField{
			Name:  escape(fmt.Sprintf("%d. %s", i+1, o.Label), 200, false),
			Value: desc,
		})
	}
	content := ""
	if a != nil {
		e.Color = colorAnswered
		by := a.Name
		if by == "" {
			by = a.By
		}
		content = "✅ Answered"
		if a.Via != "" && a.Via != name {
			content += " on " + escape(a.Via, 40, false)
		}
		content += " by **" + escape(by, 100, false) + "**: " + summary(a.Answer, 1500)
		content = clip(content, maxContent)
	}
	groupField(e, set, a) // group.go
	fitEmbed(e)
	rows := components(q, r, a, questions.KindOf(set) == questions.KindApproval)
	return content, []*discordgo.MessageEmbed{e}, groupRow(rows, set, q, r, a)
}

// summary says an answer in one line, for the answered message.
func summary(a questions.Answer, limit int) string {
	var parts []string
	for _, l := range a.Labels {
		parts = append(parts, "**"+escape(l, 100, false)+"**")
	}
	if strings.TrimSpace(a.Text) != "" {
		parts = append(parts, "“"+escape(a.Text, limit/2, false)+"”")
	}
	if len(parts) == 0 {
		return "(no answer)"
	}
	return clip(strings.Join(parts, ", "), limit)
}

// components builds the buttons, select menu and "Other…" button of q,
// disabled when a is set.
// An approval's buttons are green (Allow once), grey (Allow for this run) and
// red (Deny); its "Other…" form takes a refusal's reason.
func components(q questions.Question, r string, a *answered, approval bool) []discordgo.MessageComponent {
	disabled := a != nil
	chosen := map[string]bool{}
	if a != nil {
		for _, l := range a.Answer.Labels {
			chosen[l] = true
		}
	}
	var rows []discordgo.MessageComponent
	var row []discordgo.MessageComponent
	switch {
	case len(q.Options) == 0:
	case !q.MultiSelect && len(q.Options) <= maxButtonsPerRow:
		for i, o := range q.Options {
			style := discordgo.PrimaryButton
			if approval {
				style = approvalStyle(o.Label)
			}
			if disabled {
				style = discordgo.SecondaryButton
				if chosen[o.Label] {
					style = discordgo.SuccessButton
				}
			}
			row = append(row, discordgo.Button{
				Label:    optionLabel(o, i, maxButtonLabel),
				Style:    style,
				CustomID: customID(r, actButton, strconv.Itoa(i)),
				Disabled: disabled,
			})
		}
	default:
		opts := make([]discordgo.SelectMenuOption, 0, len(q.Options))
		for i, o := range q.Options {
			if i >= maxOptions {
				break
			}
			opts = append(opts, discordgo.SelectMenuOption{
				Label:       optionLabel(o, i, maxSelectText),
				Value:       strconv.Itoa(i),
				Description: clip(sanitize(o.Description, false), maxSelectText),
				Default:     chosen[o.Label],
			})
		}
		one := 1
		menu := discordgo.SelectMenu{
			CustomID:    customID(r, actSelect),
			Placeholder: "Choose an option",
			MinValues:   &one,
			MaxValues:   1,
			Options:     opts,
			Disabled:    disabled,
		}
		if q.MultiSelect {
			menu.Placeholder = "Choose one or more options"
			menu.MaxValues = len(opts)
		}
		rows = append(rows, discordgo.ActionsRow{Components: []discordgo.MessageComponent{menu}})
	}
	if q.AcceptsFreeText() {
		label := "Other…"
		if len(q.Options) == 0 {
			label = "Answer…"
		}
		if approval {
			label = "Deny with a reason…"
		}
		b := discordgo.Button{Label: label, Style: discordgo.SecondaryButton, CustomID: customID(r, actText), Disabled: disabled}
		if disabled && a != nil && a.Answer.Text != "" {
			b.Style = discordgo.SuccessButton
		}
		if len(row) == 0 || len(row) >= maxButtonsPerRow {
			if len(row) > 0 {
				rows = append(rows, discordgo.ActionsRow{Components: row})
			}
			row = nil
		}
		row = append(row, b)
	}
	if len(row) > 0 {
		rows = append(rows, discordgo.ActionsRow{Components: row})
	}
	return rows
}

func approvalStyle(label string) discordgo.ButtonStyle {
	switch label {
	case questions.AllowOnce:
		return discordgo.SuccessButton
	case questions.Deny:
		return discordgo.DangerButton
	}
	return discordgo.SecondaryButton
}

// optionLabel is the option's label as a button or menu shows it.
func optionLabel(o questions.Option, i, limit int) string {
	if l := clip(sanitize(o.Label, false), limit); l != "" {
		return l
	}
	return fmt.Sprintf("Option %d", i+1)
}

// modal is the form that takes a free-text answer to q.
func modal(q questions.Question, r string) *discordgo.InteractionResponseData {
	title := q.Header
	if title == "" {
		title = "Your answer"
	}
	placeholder := "Your own answer"
	if len(q.Options) > 0 {
		placeholder = "An option's label, or your own answer"
	}
	return &discordgo.InteractionResponseData{
		CustomID: customID(r, actModal),
		Title:    clip(sanitize(title, false), maxModalTitle),
		Components: []discordgo.MessageComponent{discordgo.ActionsRow{Components: []discordgo.MessageComponent{
			discordgo.TextInput{
				CustomID:    textInputID,
				Label:       clip(sanitize("Answer: "+q.Text, false), maxInputLabel),
				Style:       discordgo.TextInputParagraph,
				Placeholder: placeholder,
				Required:    true,
				MaxLength:   maxAnswerText,
			},
		}}},
	}
}

// fitEmbed shortens e's fields until it fits Discord's total embed size.
func fitEmbed(e *discordgo.MessageEmbed) {
	size := func() int {
		n := utf8.RuneCountInString(e.Title) + utf8.RuneCountInString(e.Description)
		if e.Footer != nil {
			n += utf8.RuneCountInString(e.Footer.Text)
		}
		if e.Author != nil {
			n += utf8.RuneCountInString(e.Author.Name)
		}
		for _, f := range e.Fields {
			n += utf8.RuneCountInString(f.Name) + utf8.RuneCountInString(f.Value)
		}
		return n
	}
	for size() > maxEmbedTotal-100 && len(e.Fields) > 0 {
		// Shorten the longest field value first, then drop fields.
		long := e.Fields[0]
		for _, f := range e.Fields {
			if utf8.RuneCountInString(f.Value) > utf8.RuneCountInString(long.Value) {
				long = f
			}
		}
		if n := utf8.RuneCountInString(long.Value); n > 60 {
			long.Value = clip(long.Value, n/2)
			continue
		}
		e.Fields = e.Fields[:len(e.Fields)-1]
	}
	if size() > maxEmbedTotal-100 {
		e.Description = clip(e.Description, maxEmbedDesc/4)
	}
}

// sanitize removes what model text must not carry onto Discord: terminal
// escapes, control characters, bidirectional overrides and zero-width
// characters. Line breaks survive when multiline is set; otherwise all white
// space becomes single spaces.
func sanitize(s string, multiline bool) string {
	s = questions.Printable(s)
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		switch {
		case r == '\n' && multiline:
			b.WriteByte('\n')
		case unicode.IsSpace(r):
			b.WriteByte(' ')
		default:
			b.WriteRune(r)
		}
	}
	out := b.String()
	if !multiline {
		out = strings.Join(strings.Fields(out), " ")
	} else {
		out = strings.TrimSpace(out)
	}
	return out
}

// escape sanitizes s, escapes Discord markdown and mentions in it and
// clips it to limit characters.
func escape(s string, limit int, multiline bool) string {
	s = sanitize(s, multiline)
	var b strings.Builder
	n := 0
	for _, r := range s {
		w := 1
		if strings.ContainsRune("\\*_~`|<>[]()#@", r) {
			w = 2
		}
		if n+w > limit-1 {
			b.WriteString("…")
			return b.String()
		}
		if w == 2 {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
		n += w
	}
	return b.String()
}

// contextValue is a set's context as an embed field: whole when it fits,
// else its start and its end with what was cut said plainly and where the
// whole is (questions.Excerpt) — never only its start.
func contextValue(set questions.Set) string {
	c := sanitize(set.Context, true)
	for limit := contextChars; ; limit -= 100 {
		ex, cut := questions.Excerpt(c, limit)
		if cut > 0 {
			ex += "\n" + questions.WholeCallHint(set.RunID)
		}
		if v := escape(ex, maxFieldValue+1, true); utf8.RuneCountInString(v) < maxFieldValue || limit <= 200 {
			return escape(ex, maxFieldValue, true)
		}
	}
}

// contextChars is how much of a set's context an embed shows at most.
const contextChars = 900

// clip cuts s to at most limit characters, ending with "…" when cut.
func clip(s string, limit int) string {
	if utf8.RuneCountInString(s) <= limit {
		return s
	}
	rs := []rune(s)
	return string(rs[:limit-1]) + "…"
}
