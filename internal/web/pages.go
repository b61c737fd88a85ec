package web

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/yuin/goldmark"

	"github.com/orchestrator-dev/orchestrator/questions"
)

// pageData is what every page template gets.
type pageData struct {
	Title     string
	User      string
	CSRF      string
	Error     string
	Flash     string
	FlashAsk  string     // the set the flash is about, as askRef names it
	Start     *startData // the "Start a run" form; nil for who may not
	Next      string
	Pending   []Pending
	Runs      []Run
	Run       *RunDetail
	Status    string // the runs filter
	Spec      string
	Specs     []string
	Statuses  []string
	Now       time.Time
	LivePath  string
	CancelURL string
	ResumeURL string // empty when runs cannot be resumed here
	// Schedules are the scheduled specs (schedules.go); SchedulesNav
	// links their page.
	Schedules    []Schedule
	SchedulesNav bool
}

// md renders markdown without raw HTML (goldmark's default: raw HTML is
// omitted and dangerous link schemes dropped), after making the text
// printable. The model's text and people's text are untrusted alike.
var md = goldmark.New()

// maxMarkdown is the longest text rendered as markdown; a longer one is
// shown as preformatted text.
const maxMarkdown = 256 << 10

// A live run page renders the same texts twice a second: rendered markdown
// is kept, by the text's hash, up to mdCacheSize texts.
const mdCacheSize = 1024

var (
	mdMu    sync.Mutex
	mdCache = map[[32]byte]template.HTML{}
)

func markdown(s string) template.HTML {
	key := sha256.Sum256([]byte(s))
	mdMu.Lock()
	h, ok := mdCache[key]
	mdMu.Unlock()
	if ok {
		return h
	}
	text := questions.Printable(s)
	var b bytes.Buffer
	if len(text) > maxMarkdown || md.Convert([]byte(text), &b) != nil {
		h = template.HTML("<pre>" + template.HTMLEscapeString(text) + "</pre>")
	} else {
		h = template.HTML(b.String()) // goldmark without WithUnsafe omits raw HTML and drops dangerous links
	}
	mdMu.Lock()
	if len(mdCache) >= mdCacheSize {
		clear(mdCache)
	}
	mdCache[key] = h
	mdMu.Unlock()
	return h
}

func (s *Server) funcs() template.FuncMap {
	return template.FuncMap{
		"markdown":  markdown,
		"printable": questions.Printable,
		"ago":       func(t time.Time) string { return ago(s.cfg.Now(), t) },
		"when":      func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
		"iso":       jsonTime,
		"cost":      func(c float64) string { return fmt.Sprintf("$%.4f", c) },
		"status":    statusLabel,
		"join":      func(l []string) string { return strings.Join(l, ", ") },
		"buttons": func(set questions.Set) bool {
			return len(set.Questions) == 1 && !set.Questions[0].MultiSelect && len(set.Questions[0].Options) > 0
		},
		"given": func(r questions.Response, qid string) string {
			if a, ok := r.Answer(qid); ok {
				return answerText(a)
			}
			return ""
		},
		"answerText": answerText,
		"duration": func(r Run) string {
			end := s.cfg.Now()
			if final(r.Status) {
				end = r.UpdatedAt
			}
			return end.Sub(r.CreatedAt).Round(time.Second).String()
		},
		"final":      final,
		"ask":        askRef,
		"transcript": transcriptPath,
	}
}

// askRef names a question set on the web pages by its run and its first
// question (the IDs people see on every surface), never by the store's
// internal set ID: "r1-qa1". The inbox's anchors and forms use it.
func askRef(set questions.Set) string {
	if len(set.Questions) == 0 {
		return set.RunID
	}
	return set.RunID + "-" + set.Questions[0].ID
}

func final(status string) bool {
	return status == "done" || status == "failed" || status == "cancelled" || status == "stopped"
}

func answerText(a questions.Answer) string {
	parts := append([]string{}, a.Labels...)
	if a.Text != "" {
		parts = append(parts, a.Text)
	}
	return strings.Join(parts, ", ")
}

func statusLabel(st string) string {
	if st == "waiting" {
		return "waiting on you"
	}
	return st
}

func ago(now, t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d/time.Hour))
	}
	return fmt.Sprintf("%dd ago", int(d/(24*time.Hour)))
}

func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, name string, d pageData) {
	if id := who(r); id.Name != "" {
		d.User, d.CSRF = id.Name, id.csrf
	}
	d.Now = s.cfg.Now()
	d.SchedulesNav = s.cfg.Schedules != nil
	var b bytes.Buffer
	if err := s.tmpl.ExecuteTemplate(&b, name, d); err != nil {
		s.log.Error("web: render", "page", name, "err", err)
		http.Error(w, "the page could not be rendered; see the server's log", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(b.Bytes())
}

func (s *Server) pendingNewestFirst(r *http.Request) ([]Pending, error) {
	list, err := s.cfg.Backend.Pending(r.Context())
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(list, func(a, b Pending) int { return b.AskedAt.Compare(a.AskedAt) })
	return list, nil
}

func (s *Server) inbox(w http.ResponseWriter, r *http.Request) {
	s.inboxWith(w, r, http.StatusOK, "", "", "")
}

func (s *Server) inboxWith(w http.ResponseWriter, r *http.Request, status int, flash, flashAsk, errMsg string) {
	list, err := s.pendingNewestFirst(r)
	if err != nil {
		s.backendError(w, r, "pending questions", err)
		return
	}
	s.render(w, r, status, "inbox", pageData{Title: "Inbox", Pending: list, Flash: flash, FlashAsk: flashAsk, Error: errMsg, Start: s.startFor(r)})
}

// answerForm reads the inbox form: run and question (the run's ID and the
// first question's ID: the set, named as people see it), then for each
// question "a:ID" (the chosen labels: a button, radio buttons or
// checkboxes) and "t:ID" (free text).
func (s *Server) answerForm(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		s.fail(w, r, http.StatusBadRequest, "the form could not be read")
		return
	}
	runID, qid := strings.TrimSpace(r.PostForm.Get("run")), strings.TrimSpace(r.PostForm.Get("question"))
	if runID == "" || qid == "" {
		s.inboxWith(w, r, http.StatusBadRequest, "", "", "the form names no question: run and question are required")
		return
	}
	what := fmt.Sprintf("run %s, question %s", runID, qid)
	set, err := s.askedSet(r, runID, qid)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			s.inboxWith(w, r, http.StatusNotFound, "", "", what+": not found")
			return
		}
		s.backendError(w, r, what, err)
		return
	}
	ref := askRef(set)
	resp := questions.Response{SetID: set.ID}
	var order []string
	answers := map[string]*questions.Answer{}
	for key, vals := range r.PostForm {
		kind, qid, ok := strings.Cut(key, ":")
		if !ok || (kind != "a" && kind != "t") || qid == "" {
			continue
		}
		a := answers[qid]
		if a == nil {
			a = &questions.Answer{QuestionID: qid}
			answers[qid] = a
			order = append(order, qid)
		}
		for _, v := range vals {
			if kind == "a" && v != "" {
				a.Labels = append(a.Labels, v)
			} else if kind == "t" {
				a.Text = strings.TrimSpace(v)
			}
		}
	}
	// Answers in the order of the form's fields; the backend puts them in
	// the set's order. An empty answer is kept, so that the reason comes
	// back ("answer to question X is empty").
	slices.Sort(order)
	for _, qid := range order {
		resp.Answers = append(resp.Answers, *answers[qid])
	}
	status, res := s.offer(r, resp, what, r.PostForm.Get("all") == "1")
	switch {
	case res.Taken && res.Closed && res.Shared != "":
		s.inboxWith(w, r, status, groupFlash(res), resp.SetID, "")
	case res.Taken && res.Closed:
		s.inboxWith(w, r, status, "Answer recorded: the run resumes.", ref, "")
	case res.Taken:
		s.inboxWith(w, r, status, "Answer recorded; the other questions of this set still wait for an answer.", ref, "")
	default:
		s.inboxWith(w, r, status, "", ref, res.Error)
	}
}

// askedSet finds the question set of run runID whose first question is
// qid (the latest, if question IDs repeat across turns), waiting or not: a
// set answered elsewhere in the meantime is still found, so the answer is
// told it came too late. An unknown run or question wraps ErrNotFound.
func (s *Server) askedSet(r *http.Request, runID, qid string) (questions.Set, error) {
	// The waiting sets first (the inbox lists them anyway); the run's
	// timeline, which reads its transcripts, only for a set that is not.
	pending, err := s.cfg.Backend.Pending(r.Context())
	if err != nil {
		return questions.Set{}, err
	}
	for _, pd := range pending {
		if pd.Set.RunID == runID && len(pd.Set.Questions) > 0 && pd.Set.Questions[0].ID == qid {
			return pd.Set, nil
		}
	}
	d, err := s.cfg.Backend.Run(r.Context(), runID)
	if err != nil {
		return questions.Set{}, err
	}
	for i := len(d.Items) - 1; i >= 0; i-- {
		it := d.Items[i]
		if it.Kind == ItemQuestion && it.Set != nil && len(it.Set.Questions) > 0 && it.Set.Questions[0].ID == qid {
			return *it.Set, nil
		}
	}
	return questions.Set{}, fmt.Errorf("run %s: question %s: %w", runID, qid, ErrNotFound)
}

// groupFlash says what an answer given for every run waiting on the
// question did.
func groupFlash(res answerResult) string {
	taken := 1
	var skipped []string
	for _, o := range res.Others {
		if o.Taken {
			taken++
		} else {
			skipped = append(skipped, "run "+o.RunID+" ("+o.Error+")")
		}
	}
	msg := fmt.Sprintf("Answer recorded in %d runs (shared decision %s): they resume.", taken, res.Shared)
	if len(skipped) > 0 {
		msg += " Skipped: " + strings.Join(skipped, ", ") + "."
	}
	return msg
}

var runStatuses = []string{"queued", "running", "waiting", "interrupted", "done", "failed", "cancelled", "stopped"}

func (s *Server) filteredRuns(r *http.Request) ([]Run, error) {
	runs, err := s.cfg.Backend.Runs(r.Context())
	if err != nil {
		return nil, err
	}
	st, spec := r.URL.Query().Get("status"), r.URL.Query().Get("spec")
	out := runs[:0:0]
	for _, run := range runs {
		if (st == "" || run.Status == st) && (spec == "" || run.Spec == spec) {
			out = append(out, run)
		}
	}
	return out, nil
}

func (s *Server) runsPage(w http.ResponseWriter, r *http.Request) {
	all, err := s.cfg.Backend.Runs(r.Context())
	if err != nil {
		s.backendError(w, r, "runs", err)
		return
	}
	var specs []string
	for _, run := range all {
		if run.Spec != "" && !slices.Contains(specs, run.Spec) {
			specs = append(specs, run.Spec)
		}
	}
	slices.Sort(specs)
	runs, _ := s.filteredRuns(r)
	s.render(w, r, http.StatusOK, "runs", pageData{Title: "Runs", Runs: runs, Status: r.URL.Query().Get("status"),
		Spec: r.URL.Query().Get("spec"), Specs: specs, Statuses: runStatuses})
}

func (s *Server) runPage(w http.ResponseWriter, r *http.Request) {
	s.runPageWith(w, r, http.StatusOK, "", "")
}

func (s *Server) runPageWith(w http.ResponseWriter, r *http.Request, status int, flash, errMsg string) {
	id := r.PathValue("id")
	d, err := s.cfg.Backend.Run(r.Context(), id)
	if err != nil {
		s.backendError(w, r, "run "+id, err)
		return
	}
	pd := pageData{Title: "Run " + d.ID, Run: &d, Flash: flash, Error: errMsg,
		LivePath: "/runs/" + d.ID + "/events", CancelURL: "/runs/" + d.ID + "/cancel"}
	if s.cfg.Resume != nil {
		pd.ResumeURL = "/runs/" + d.ID + "/resume"
	}
	s.render(w, r, status, "run", pd)
}

func (s *Server) resumeForm(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := s.cfg.Resume.Resume(r.Context(), id, who(r).Name); err != nil {
		if errors.Is(err, ErrNotResumable) {
			s.runPageWith(w, r, http.StatusConflict, "", err.Error())
			return
		}
		s.backendError(w, r, "run "+id, err)
		return
	}
	s.log.Info("run resumed on the web", "run", id, "by", who(r).Name)
	s.runPageWith(w, r, http.StatusOK, "Run resumed.", "")
}

// cancelForm cancels a run once confirmed: the run page's "Cancel this
// run" posts without confirm and gets a page asking to confirm (no
// JavaScript needed), whose own form posts again with confirm=yes. Both
// posts carry the CSRF token, as every form.
func (s *Server) cancelForm(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if r.PostFormValue("confirm") != "yes" {
		d, err := s.cfg.Backend.Run(r.Context(), id)
		if err != nil {
			s.backendError(w, r, "run "+id, err)
			return
		}
		if final(d.Status) {
			s.runPageWith(w, r, http.StatusConflict, "", fmt.Sprintf("run %s is %s already: there is nothing to cancel", d.ID, d.Status))
			return
		}
		s.render(w, r, http.StatusOK, "cancel", pageData{Title: "Cancel run " + d.ID + "?", Run: &d, CancelURL: "/runs/" + d.ID + "/cancel"})
		return
	}
	if err := s.cfg.Backend.Cancel(r.Context(), id, who(r).Name); err != nil {
		if errors.Is(err, ErrFinal) {
			s.runPageWith(w, r, http.StatusConflict, "", err.Error())
			return
		}
		s.backendError(w, r, "run "+id, err)
		return
	}
	s.log.Info("run cancelled on the web", "run", id, "by", who(r).Name)
	s.runPageWith(w, r, http.StatusOK, "Run cancelled.", "")
}

// runEvents streams a run's live part (status, timeline, decision log) as
// server-sent events: an "update" event with the HTML each time it changes,
// and "end" once the run is final.
func (s *Server) runEvents(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	fl, ok := w.(http.Flusher)
	if !ok {
		s.fail(w, r, http.StatusInternalServerError, "streaming is not supported here")
		return
	}
	if _, err := s.cfg.Backend.Run(r.Context(), id); err != nil {
		s.backendError(w, r, "run "+id, err)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fl.Flush()
	tick := time.NewTicker(s.cfg.Poll)
	defer tick.Stop()
	var last []byte
	keepAlive := time.Now()
	for {
		d, err := s.cfg.Backend.Run(r.Context(), id)
		if err != nil {
			return
		}
		var b bytes.Buffer
		if err := s.tmpl.ExecuteTemplate(&b, "live", pageData{Run: &d, Now: s.cfg.Now()}); err != nil {
			s.log.Error("web: render live", "err", err)
			return
		}
		if !bytes.Equal(b.Bytes(), last) {
			last = b.Bytes()
			writeEvent(w, "update", last)
			fl.Flush()
			keepAlive = time.Now()
		} else if time.Since(keepAlive) > 15*time.Second {
			io.WriteString(w, ": keep-alive\n\n")
			fl.Flush()
			keepAlive = time.Now()
		}
		if final(d.Status) {
			writeEvent(w, "end", nil)
			fl.Flush()
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-s.cfg.Done:
			return
		case <-tick.C:
		}
	}
}

func writeEvent(w io.Writer, name string, data []byte) {
	fmt.Fprintf(w, "event: %s\n", name)
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), len(data)+1)
	n := 0
	for sc.Scan() {
		fmt.Fprintf(w, "data: %s\n", sc.Bytes())
		n++
	}
	if n == 0 {
		io.WriteString(w, "data: \n")
	}
	io.WriteString(w, "\n")
}

func (s *Server) transcript(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	seq, err := strconv.Atoi(r.PathValue("seq"))
	if err != nil || seq < 1 {
		s.fail(w, r, http.StatusNotFound, "no such turn")
		return
	}
	rc, err := s.cfg.Backend.Transcript(r.Context(), id, seq)
	if err != nil {
		s.backendError(w, r, fmt.Sprintf("transcript of turn %d of run %s", seq, id), err)
		return
	}
	defer rc.Close()
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s-%d.ndjson"`, safeName(id), seq))
	// Line by line, with the tokens the model may have printed redacted,
	// as on every output.
	br := bufio.NewReaderSize(rc, 64<<10)
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			io.WriteString(w, questions.Redact(line))
		}
		if err != nil {
			return
		}
	}
}

func safeName(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, s)
}
