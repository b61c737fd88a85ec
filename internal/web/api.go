package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/output"
	"github.com/orchestrator-dev/orchestrator/questions"
)

// ErrFinal is what Backend.Cancel returns (wrapped) for a run that already
// ended.
var ErrFinal = errors.New("already ended")

// The JSON API follows docs/json.md: dedicated output types, "v": 1 at the
// top level, snake_case, times in RFC 3339 UTC, model and human text made
// printable, nothing of a run's options.

// A question set and a run have the shapes of internal/output, as in every
// --json output of the CLI; the inbox adds what it shows beside them.

type apiResponse = output.Response

type apiSet struct {
	output.Set
	Spec      string `json:"spec,omitempty"`
	RunTitle  string `json:"run_title,omitempty"`
	Title     string `json:"title,omitempty"`
	Context   string `json:"context,omitempty"`
	Reminders int    `json:"reminders"`
	// Group lists other runs the same question waits in (at most 10;
	// group_more: there are more): "all" in POST /api/answer answers them.
	Group     []apiGroupRun `json:"group,omitempty"`
	GroupMore bool          `json:"group_more,omitempty"`
}

// apiGroupRun is another run a question waits in.
type apiGroupRun struct {
	SetID string `json:"set_id"`
	RunID string `json:"run_id"`
	Spec  string `json:"spec,omitempty"`
}

type apiRun struct {
	output.Run
	Turns int `json:"turns"`
}

type apiItem struct {
	Kind     string       `json:"kind"`
	Turn     int          `json:"turn"`
	At       string       `json:"at,omitempty"`
	Text     string       `json:"text,omitempty"`
	Tool     string       `json:"tool,omitempty"`
	CostUSD  float64      `json:"cost_usd,omitempty"`
	SetID    string       `json:"set_id,omitempty"`
	Response *apiResponse `json:"response,omitempty"`
	// Transcript is the path of the turn's transcript download.
	Transcript string `json:"transcript,omitempty"`
}

type apiDecision struct {
	SetID    string `json:"set_id"`
	Header   string `json:"header,omitempty"`
	Question string `json:"question"`
	State    string `json:"state"`
	Answer   string `json:"answer,omitempty"`
	By       string `json:"by,omitempty"`
	Surface  string `json:"surface,omitempty"`
	At       string `json:"at,omitempty"`
}

type apiLink struct {
	Label string `json:"label"`
	URL   string `json:"url"`
}

func jsonTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

func p(s string) string { return questions.Printable(s) }

func toAPIResponse(r questions.Response) *apiResponse {
	return output.NewSet(questions.Set{}, &r).Response
}

func toAPISet(pd Pending) apiSet {
	out := apiSet{Set: output.NewSet(pd.Set, &pd.Given), Spec: p(pd.Spec), RunTitle: p(pd.RunTitle),
		Title: p(pd.Set.Title), Context: p(pd.Set.Context), Reminders: pd.Reminders}
	out.State = "pending"
	out.Surfaces = append([]string{}, pd.Surfaces...)
	for _, g := range pd.Set.Group {
		out.Group = append(out.Group, apiGroupRun{SetID: g.SetID, RunID: g.RunID, Spec: p(g.Spec)})
	}
	out.GroupMore = pd.Set.GroupMore
	if !pd.AskedAt.IsZero() {
		asked := pd.AskedAt.UTC()
		out.CreatedAt = &asked
	}
	return out
}

func toAPIRun(r Run) apiRun {
	return apiRun{Run: output.Run{ID: r.ID, Spec: p(r.Spec), Title: p(r.Title), Status: r.Status, WorkDir: r.WorkDir,
		Surfaces: append([]string{}, r.Surfaces...), SessionID: r.SessionID, CostUSD: output.USD(r.CostUSD), Error: p(r.Error),
		FinalText: p(r.FinalText), CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC()}, Turns: r.Turns}
}

func (s *Server) writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(true)
	if err := enc.Encode(v); err != nil {
		s.log.Debug("web: write json", "err", err)
	}
}

type apiError struct {
	V      int          `json:"v"`
	Error  string       `json:"error"`
	Closed bool         `json:"closed,omitempty"`
	Final  *apiResponse `json:"final,omitempty"`
}

// apiGroupResult is what became of a shared answer in another run.
type apiGroupResult struct {
	SetID string `json:"set_id"`
	RunID string `json:"run_id"`
	Spec  string `json:"spec,omitempty"`
	Taken bool   `json:"taken"`
	Error string `json:"error,omitempty"`
}

// fail answers an error: JSON on the API (and to scripts), a page otherwise.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	if isAPI(r) || r.Method != http.MethodGet {
		if !isAPI(r) && strings.Contains(r.Header.Get("Accept"), "text/html") {
			s.render(w, r, status, "error", pageData{Title: http.StatusText(status), Error: msg})
			return
		}
		s.writeJSON(w, status, apiError{V: 1, Error: p(msg)})
		return
	}
	s.render(w, r, status, "error", pageData{Title: http.StatusText(status), Error: msg})
}

func (s *Server) backendError(w http.ResponseWriter, r *http.Request, what string, err error) {
	switch {
	case errors.Is(err, ErrNotFound):
		s.fail(w, r, http.StatusNotFound, what+": not found")
	case errors.Is(err, ErrFinal), errors.Is(err, ErrNotResumable):
		s.fail(w, r, http.StatusConflict, err.Error())
	default:
		s.log.Error("web: "+what, "err", err)
		s.fail(w, r, http.StatusInternalServerError, what+": the store could not be read; see the server's log")
	}
}

func (s *Server) apiPending(w http.ResponseWriter, r *http.Request) {
	list, err := s.pendingNewestFirst(r)
	if err != nil {
		s.backendError(w, r, "pending questions", err)
		return
	}
	out := struct {
		V       int      `json:"v"`
		Pending []apiSet `json:"pending"`
	}{V: 1, Pending: []apiSet{}}
	for _, pd := range list {
		out.Pending = append(out.Pending, toAPISet(pd))
	}
	s.writeJSON(w, http.StatusOK, out)
}

func (s *Server) apiRuns(w http.ResponseWriter, r *http.Request) {
	runs, err := s.filteredRuns(r)
	if err != nil {
		s.backendError(w, r, "runs", err)
		return
	}
	out := struct {
		V    int      `json:"v"`
		Runs []apiRun `json:"runs"`
	}{V: 1, Runs: []apiRun{}}
	for _, run := range runs {
		out.Runs = append(out.Runs, toAPIRun(run))
	}
	s.writeJSON(w, http.StatusOK, out)
}

func (s *Server) apiRun(w http.ResponseWriter, r *http.Request) {
	d, err := s.cfg.Backend.Run(r.Context(), r.PathValue("id"))
	if err != nil {
		s.backendError(w, r, "run "+r.PathValue("id"), err)
		return
	}
	out := struct {
		V         int           `json:"v"`
		Run       apiRun        `json:"run"`
		FinalText string        `json:"final_text,omitempty"`
		Timeline  []apiItem     `json:"timeline"`
		Decisions []apiDecision `json:"decisions"`
		Links     []apiLink     `json:"links"`
	}{V: 1, Run: toAPIRun(d.Run), FinalText: p(d.FinalText), Timeline: []apiItem{}, Decisions: []apiDecision{}, Links: []apiLink{}}
	for _, it := range d.Items {
		ai := apiItem{Kind: it.Kind, Turn: it.Turn, At: jsonTime(it.At), Text: p(it.Text), Tool: p(it.Tool), CostUSD: it.CostUSD}
		if it.Set != nil {
			ai.SetID = it.Set.ID
		}
		if it.Response != nil {
			ai.Response = toAPIResponse(*it.Response)
		}
		if it.Transcript {
			ai.Transcript = transcriptPath(d.ID, it.Turn)
		}
		out.Timeline = append(out.Timeline, ai)
	}
	for _, dc := range d.Decisions {
		out.Decisions = append(out.Decisions, apiDecision{SetID: dc.SetID, Header: p(dc.Header), Question: p(dc.Question),
			State: dc.State, Answer: p(dc.Answer), By: p(dc.By), Surface: p(dc.Surface), At: jsonTime(dc.At)})
	}
	for _, l := range d.Links {
		out.Links = append(out.Links, apiLink{Label: p(l.Label), URL: l.URL})
	}
	s.writeJSON(w, http.StatusOK, out)
}

func transcriptPath(runID string, seq int) string {
	return fmt.Sprintf("/runs/%s/transcripts/%d", runID, seq)
}

// apiAnswerRequest is the body of POST /api/answer.
type apiAnswerRequest struct {
	SetID   string          `json:"set_id"`
	Answers []output.Answer `json:"answers"`
	// All answers the same question in the other runs it waits in too.
	All bool `json:"all,omitempty"`
}

func (s *Server) apiAnswer(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	var req apiAnswerRequest
	if err := dec.Decode(&req); err != nil {
		s.fail(w, r, http.StatusBadRequest, "body: want {\"set_id\": ..., \"answers\": [{\"question_id\": ..., \"labels\": [...], \"text\": ...}]}: "+err.Error())
		return
	}
	resp := questions.Response{SetID: strings.TrimSpace(req.SetID)}
	for _, a := range req.Answers {
		resp.Answers = append(resp.Answers, questions.Answer{QuestionID: a.QuestionID, Labels: a.Labels, Text: a.Text})
	}
	status, res := s.offer(r, resp, "question set "+resp.SetID, req.All)
	s.writeJSON(w, status, res)
}

// answerResult is what POST /api/answer returns, and what the inbox shows.
type answerResult struct {
	V      int          `json:"v"`
	SetID  string       `json:"set_id"`
	Taken  bool         `json:"taken"`
	Closed bool         `json:"closed"`
	Error  string       `json:"error,omitempty"`
	Final  *apiResponse `json:"final,omitempty"`
	// Shared names the shared decision of an answer given for every run
	// waiting on the question ("all"), and Others what became of it in
	// the other runs.
	Shared string           `json:"shared,omitempty"`
	Others []apiGroupResult `json:"others,omitempty"`
}

// offer hands resp, from the signed-in user, to the backend and says what
// became of it, with the HTTP status to answer. what names the set in
// errors, as the caller named it; all answers the same question in every
// run waiting on it (GroupOfferer).
func (s *Server) offer(r *http.Request, resp questions.Response, what string, all bool) (int, answerResult) {
	res := answerResult{V: 1, SetID: resp.SetID}
	if resp.SetID == "" {
		res.Error = "set_id: required"
		return http.StatusBadRequest, res
	}
	if max := s.cfg.AnswerMaxBytes; max > 0 {
		for _, a := range resp.Answers {
			if len(a.Text) > max {
				res.Error = fmt.Sprintf("the answer is %d bytes long; at most %d are accepted (run.answer_max_bytes)", len(a.Text), max)
				return http.StatusUnprocessableEntity, res
			}
		}
	}
	id := who(r)
	resp.By, resp.Surface, resp.At = id.Name, SurfaceName, s.cfg.Now().UTC()
	var d Decision
	var err error
	if g, ok := s.cfg.Backend.(GroupOfferer); ok && all {
		d, err = s.offerGroup(r, g, resp, &res)
	} else {
		d, err = s.cfg.Backend.Offer(r.Context(), resp)
	}
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			res.Error = what + ": not found"
			return http.StatusNotFound, res
		}
		s.log.Error("web: offer", "set", resp.SetID, "err", err)
		res.Error = "the answer could not be recorded; see the server's log"
		return http.StatusInternalServerError, res
	}
	res.Taken, res.Closed = d.Taken, d.Closed
	if d.Final != nil {
		res.Final = toAPIResponse(*d.Final)
	}
	switch {
	case d.Invalid != nil:
		res.Error = p(d.Invalid.Error())
		return http.StatusUnprocessableEntity, res
	case !d.Taken && d.Final != nil:
		res.Error = fmt.Sprintf("too late: answered elsewhere by %s on %s", p(d.Final.By), p(d.Final.Surface))
		return http.StatusConflict, res
	case !d.Taken:
		res.Error = "too late: the question was closed (expired, or its run was cancelled)"
		return http.StatusConflict, res
	}
	s.log.Info("answered on the web", "set", resp.SetID, "by", id.Name)
	return http.StatusOK, res
}

// offerGroup offers resp to its set and the same question in the other
// runs it waits in; res gets the shared decision and the other runs'
// outcomes. It returns the decision about resp's set.
func (s *Server) offerGroup(r *http.Request, g GroupOfferer, resp questions.Response, res *answerResult) (Decision, error) {
	gd, err := g.OfferGroup(r.Context(), resp)
	if err != nil {
		return Decision{}, err
	}
	if len(gd.Sets) == 0 {
		return Decision{}, fmt.Errorf("the group answer to %s decided nothing", resp.SetID)
	}
	res.Shared = gd.ID
	for _, o := range gd.Sets[1:] {
		gr := apiGroupResult{SetID: o.SetID, RunID: o.RunID, Spec: p(o.Spec), Taken: o.Decision.Taken}
		switch d := o.Decision; {
		case d.Invalid != nil:
			gr.Error = p(d.Invalid.Error())
		case !d.Taken && d.Final != nil:
			gr.Error = fmt.Sprintf("answered before by %s on %s", p(d.Final.By), p(d.Final.Surface))
		case !d.Taken:
			gr.Error = "closed"
		}
		res.Others = append(res.Others, gr)
	}
	d := gd.Sets[0].Decision
	return Decision{Taken: d.Taken, Invalid: d.Invalid, Final: d.Final, Closed: d.Closed}, nil
}

func (s *Server) apiCancel(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := s.cfg.Backend.Cancel(r.Context(), id, who(r).Name); err != nil {
		s.backendError(w, r, "run "+id, err)
		return
	}
	d, err := s.cfg.Backend.Run(r.Context(), id)
	if err != nil {
		s.backendError(w, r, "run "+id, err)
		return
	}
	s.writeJSON(w, http.StatusOK, struct {
		V   int    `json:"v"`
		Run apiRun `json:"run"`
	}{1, toAPIRun(d.Run)})
}

func (s *Server) apiResume(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := s.cfg.Resume.Resume(r.Context(), id, who(r).Name); err != nil {
		s.backendError(w, r, "run "+id, err)
		return
	}
	d, err := s.cfg.Backend.Run(r.Context(), id)
	if err != nil {
		s.backendError(w, r, "run "+id, err)
		return
	}
	s.writeJSON(w, http.StatusOK, struct {
		V   int    `json:"v"`
		Run apiRun `json:"run"`
	}{1, toAPIRun(d.Run)})
}
