package slack

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/slack-go/slack"

	"github.com/orchestrator-dev/orchestrator/questions"
)

// Slack's Block Kit limits, in characters.
const (
	maxBlocks       = 50
	maxSectionText  = 3000
	maxHeaderText   = 150
	maxButtonText   = 75
	maxOptionText   = 75
	maxOptions      = 100 // a static select's options
	maxButtons      = 5   // above this, a static select
	maxBlockID      = 255
	maxFallbackText = 3000
	maxModalTitle   = 24
	maxInputLabel   = 2000
	maxAnswerText   = 3000
)

// Block and action IDs. A question's actions block is "oq|SET|INDEX": a
// click on a message posted before a restart names its set, which the
// store finds.
const (
	blockPrefix = "oq|"
	actButton   = "b" // "b|INDEX": an option's button
	actSelect   = "s" // the static or multi-static select
	actOther    = "o" // "Other…": opens the modal
	actAll      = "a" // "a|INDEX": "All N runs: option" (group.go)
	callbackID  = "oq-other"
	inputBlock  = "answer"
	inputAction = "text"
)

func blockID(setID string, idx int) string {
	return blockPrefix + setID + "|" + strconv.Itoa(idx)
}

// parseBlockID reads a block ID made by blockID.
func parseBlockID(s string) (setID string, idx int, ok bool) {
	rest, found := strings.CutPrefix(s, blockPrefix)
	if !found {
		return "", 0, false
	}
	i := strings.LastIndexByte(rest, '|')
	if i <= 0 {
		return "", 0, false
	}
	n, err := strconv.Atoi(rest[i+1:])
	if err != nil || n < 0 || strconv.Itoa(n) != rest[i+1:] {
		return "", 0, false
	}
	return rest[:i], n, true
}

// answered is an answer taken for one question, as the message shows it.
type answered struct {
	Answer questions.Answer `json:"answer"`
	By     string           `json:"by"`   // as Response.By says it
	Name   string           `json:"name"` // how the message names them
	Via    string           `json:"via,omitempty"`
}

// escape makes untrusted text safe in mrkdwn: no mentions, links or
// markup control characters, clipped to max characters.
func escape(s string, max int) string {
	s = questions.Redact(s)
	s = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' {
			return r
		}
		if r < 0x20 || r == 0x7f || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) {
			return -1
		}
		return r
	}, s)
	s = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
	return clip(s, max)
}

// plain makes untrusted text safe in plain_text: one line, clipped.
func plain(s string, max int) string {
	s = questions.Redact(s)
	s = strings.Join(strings.Fields(s), " ")
	return clip(s, max)
}

func clip(s string, max int) string {
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	r := []rune(s)
	return string(r[:max-1]) + "…"
}

// render builds the message of set: a header, then a block per question
// with its options (buttons, a select beyond five, a multi-select for a
// multi-select question, "Other…" where free text is allowed). A question
// with an answer in ans shows it instead of its controls; closed, if set,
// replaces every control with why the set closed.
func render(set questions.Set, ans map[string]*answered, closed string) (text string, blocks []slack.Block) {
	title := set.Title
	if strings.TrimSpace(title) == "" {
		title = "A question from the agent"
	}
	blocks = append(blocks, slack.NewHeaderBlock(slack.NewTextBlockObject(slack.PlainTextType, plain("❓ "+title, maxHeaderText), true, false)))
	if c := strings.TrimSpace(set.Context); c != "" {
		blocks = append(blocks, slack.NewContextBlock("", slack.NewTextBlockObject(slack.MarkdownType, escape(c, 1500), false, false)))
	}
	if note := questions.GroupNote(set); note != "" && len(ans) == 0 && closed == "" {
		blocks = append(blocks, slack.NewContextBlock("", slack.NewTextBlockObject(slack.MarkdownType, escape(note, 1500), false, false)))
	}
	var fallback []string
	for i, q := range set.Questions {
		header := q.Header
		if header == "" {
			header = "Question"
		}
		if len(set.Questions) > 1 {
			header = fmt.Sprintf("%s (%d/%d)", header, i+1, len(set.Questions))
		}
		body := "*" + escape(header, 200) + "*\n" + escape(q.Text, 2500)
		var desc []string
		for _, o := range q.Options {
			if o.Description != "" {
				desc = append(desc, "• *"+escape(o.Label, 100)+"*: "+escape(o.Description, 300))
			}
		}
		if len(desc) > 0 && ans[q.ID] == nil && closed == "" {
			body += "\n" + strings.Join(desc, "\n")
		}
		fallback = append(fallback, plain(q.Text, 500))
		blocks = append(blocks, slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, clip(body, maxSectionText), false, false), nil, nil))
		switch a := ans[q.ID]; {
		case a != nil:
			blocks = append(blocks, slack.NewContextBlock("", slack.NewTextBlockObject(slack.MarkdownType, answeredLine(a), false, false)))
		case closed != "":
			blocks = append(blocks, slack.NewContextBlock("", slack.NewTextBlockObject(slack.MarkdownType, "🔒 "+escape(closed, 500), false, false)))
		default:
			blocks = append(blocks, groupButtons(controls(set.ID, i, q), set, q)) // group.go
		}
	}
	text = clip(plain(title, 200)+": "+strings.Join(fallback, " · "), maxFallbackText)
	return text, blocks
}

func answeredLine(a *answered) string {
	what := strings.Join(a.Answer.Labels, ", ")
	if a.Answer.Text != "" {
		if what != "" {
			what += ": "
		}
		what += a.Answer.Text
	}
	line := "✅ Answered by *" + escape(a.Name, 100) + "*"
	if a.Via != "" && a.Via != name {
		line += " (on " + escape(a.Via, 40) + ")"
	}
	return line + ": " + escape(what, 2000)
}

func controls(setID string, idx int, q questions.Question) *slack.ActionBlock {
	var els []slack.BlockElement
	opts := func() []*slack.OptionBlockObject {
		var out []*slack.OptionBlockObject
		for i, o := range q.Options {
			out = append(out, slack.NewOptionBlockObject(strconv.Itoa(i), slack.NewTextBlockObject(slack.PlainTextType, plain(o.Label, maxOptionText), false, false), nil))
		}
		return out
	}
	switch {
	case len(q.Options) == 0:
	case q.MultiSelect:
		els = append(els, slack.NewOptionsMultiSelectBlockElement(slack.MultiOptTypeStatic,
			slack.NewTextBlockObject(slack.PlainTextType, "Choose one or more", false, false), actSelect, opts()...))
	case len(q.Options) > maxButtons:
		els = append(els, slack.NewOptionsSelectBlockElement(slack.OptTypeStatic,
			slack.NewTextBlockObject(slack.PlainTextType, "Choose an option", false, false), actSelect, opts()...))
	default:
		for i, o := range q.Options {
			els = append(els, slack.NewButtonBlockElement(actButton+"|"+strconv.Itoa(i), strconv.Itoa(i),
				slack.NewTextBlockObject(slack.PlainTextType, plain(o.Label, maxButtonText), false, false)))
		}
	}
	if q.AcceptsFreeText() {
		label := "Other…"
		if len(q.Options) == 0 {
			label = "Answer…"
		}
		els = append(els, slack.NewButtonBlockElement(actOther, "other", slack.NewTextBlockObject(slack.PlainTextType, label, false, false)))
	}
	return slack.NewActionBlock(blockID(setID, idx), els...)
}

// modal is the "Other…" form of question idx of set; metadata tells the
// submission where the question's message is.
func modal(set questions.Set, idx int, metadata string) slack.ModalViewRequest {
	q := set.Questions[idx]
	title := q.Header
	if title == "" {
		title = "Your answer"
	}
	input := slack.NewPlainTextInputBlockElement(slack.NewTextBlockObject(slack.PlainTextType, "Type your answer", false, false), inputAction)
	input.Multiline = true
	input.MaxLength = maxAnswerText
	return slack.ModalViewRequest{
		Type:            slack.VTModal,
		Title:           slack.NewTextBlockObject(slack.PlainTextType, plain(title, maxModalTitle), false, false),
		Submit:          slack.NewTextBlockObject(slack.PlainTextType, "Answer", false, false),
		Close:           slack.NewTextBlockObject(slack.PlainTextType, "Cancel", false, false),
		CallbackID:      callbackID,
		PrivateMetadata: metadata,
		Blocks: slack.Blocks{BlockSet: []slack.Block{
			slack.NewInputBlock(inputBlock, slack.NewTextBlockObject(slack.PlainTextType, plain(q.Text, maxInputLabel), false, false), nil, input),
		}},
	}
}
