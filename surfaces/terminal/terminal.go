// Package terminal is the surface of the person at the terminal that started
// the orchestrator: questions are printed with numbered options and answered
// by typing a line.
//
// Whoever holds the terminal is the operator: every line read is an answer
// from someone allowed to answer. What the model wrote is untrusted and is
// cleaned before it is printed.
package terminal

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/tty"
	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
)

// Name is the surface's name, in logs, the store and responses.
const Name = "terminal"

// MaxLine bounds one line of input; the rest of a longer line is dropped.
const MaxLine = 64 << 10

// Options configures a Surface. The zero value prints plain text.
type Options struct {
	// Logger receives the surface's diagnostics; nil discards them.
	Logger *slog.Logger

	// Pretty prints for a person at a terminal: bold headers, dim
	// descriptions, spacing. Off, the output is plain text fit for a pipe or
	// a log. The caller sets it when out is a terminal (internal/tty).
	Pretty bool

	// Echo writes each line read after its prompt, for input that is not a
	// terminal echoing what is typed (a pipe), so that the output reads as a
	// transcript. The caller sets it when in is not a terminal.
	Echo bool

	// Command is the program name shown in how to answer later
	// ("orchestrator answer q7f3a 2"); default "orchestrator".
	Command string

	// By names who answers in responses; default "terminal" (the caller
	// may pass the operating system's user name).
	By string

	// Ephemeral says the store goes when the command ends (rehearse): when
	// the input closes, no command to answer later is suggested, since it
	// would find nothing.
	Ephemeral bool

	// Passive never prompts and never reads: each set is logged once, at
	// Info, with the command that answers it, and Ask waits until ctx ends
	// (the answer reaches the store through that command, and the caller's
	// wait sees it). For a daemon, whose output is its log: `serve`.
	Passive bool
}

// Surface asks questions on a terminal. It is safe for concurrent use: Asks
// are served one at a time, so that one question is on screen at a time.
type Surface struct {
	in   io.Reader
	out  io.Writer
	opts Options
	log  *slog.Logger

	startReader sync.Once
	lines       chan string   // lines read; the reader blocks until an Ask takes one
	eof         chan struct{} // closed once in has no more lines
	readErr     error         // why; written before eof is closed
	quit        chan struct{} // closed by Close
	closeOnce   sync.Once

	turn chan struct{} // holds one token while an Ask is on screen

	mu       sync.Mutex                    // guards the fields below and writes to out
	atPrompt bool                          // out ends with a prompt
	typed    map[string]questions.Response // complete answers typed: offered again by the next Ask of the set
	partial  map[string][]questions.Answer // answers to the first questions of a set
	resolved map[string]bool               // sets shown as answered or closed
	later    map[string]bool               // sets whose how-to-answer-later was printed
}

var (
	_ surfaces.Surface  = (*Surface)(nil)
	_ surfaces.Resolver = (*Surface)(nil)
	_ surfaces.Watcher  = (*Surface)(nil)
)

// New returns a surface reading answers from in and printing to out. It
// reads in from one goroutine, started by the first Ask, until in ends.
func New(in io.Reader, out io.Writer, opts Options) *Surface {
	if opts.Command == "" {
		opts.Command = "orchestrator"
	}
	if opts.By == "" {
		opts.By = Name
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Surface{
		in:       in,
		out:      out,
		opts:     opts,
		log:      log.With("surface", Name),
		lines:    make(chan string),
		eof:      make(chan struct{}),
		quit:     make(chan struct{}),
		turn:     make(chan struct{}, 1),
		typed:    map[string]questions.Response{},
		partial:  map[string][]questions.Answer{},
		resolved: map[string]bool{},
		later:    map[string]bool{},
	}
}

// Name returns "terminal".
func (s *Surface) Name() string { return Name }

// Close stops the surface: Asks return an error wrapping
// surfaces.ErrUnavailable and the reading goroutine ends once its read of in
// returns (a read blocked on a terminal ends with the next line or the end).
func (s *Surface) Close() error {
	s.closeOnce.Do(func() { close(s.quit) })
	return nil
}

// Ask prints set's questions one by one, reads an answer to each (a bad
// answer is asked again with the valid choices) and offers the whole to
// answers, printing what became of it: nothing more when taken, the reason
// when refused (the set is then asked again), "answered elsewhere by …" when
// too late. It returns nil once the set is closed, ctx.Err() when ctx ends
// (answers already given to the first questions are kept for the next Ask
// of set, and a line typed meanwhile for the next question asked), and an
// error wrapping surfaces.ErrUnavailable once the input has ended, after
// printing how to answer later.
func (s *Surface) Ask(ctx context.Context, set questions.Set, answers surfaces.Answers) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(set.Questions) == 0 {
		return fmt.Errorf("ask %s on the terminal: no questions", set.ID)
	}
	// The other runs the question waits in, if the store can tell: shown
	// with the question (a failure to tell only leaves the line out).
	set, _ = surfaces.WithGroup(ctx, set, answers)
	if s.opts.Passive {
		return s.askPassive(ctx, set)
	}
	s.startReader.Do(func() { go s.read() })

	select {
	case s.turn <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	case <-s.quit:
		return errClosed(set)
	}
	defer func() { <-s.turn }()

	for {
		s.mu.Lock()
		resp, typed := s.typed[set.ID]
		s.mu.Unlock()
		if !typed {
			var err error
			if resp, err = s.read1(ctx, set); err != nil {
				return err
			}
		}
		d, err := answers.Offer(ctx, resp)
		if err != nil {
			// Kept: the next Ask offers it again.
			return fmt.Errorf("ask %s on the terminal: %w", set.ID, err)
		}
		s.mu.Lock()
		if !d.Taken {
			delete(s.typed, set.ID)
		}
		switch {
		case d.Taken:
			s.resolved[set.ID] = true
			s.log.Info("answered", "set", set.ID, "run", set.RunID)
		case d.Invalid != nil:
			s.write(s.renderRefused(d.Invalid))
		case d.Closed:
			if !s.resolved[set.ID] {
				s.resolved[set.ID] = true
				s.write(s.renderResolved(set, d.Final))
			}
		}
		s.mu.Unlock()
		if d.Taken || d.Closed {
			return nil
		}
	}
}

// read1 prints set and reads an answer to each of its questions, keeping
// the answers given so far for the next Ask when ctx ends. The complete
// answer is kept for the next Ask of set unless refused.
func (s *Surface) read1(ctx context.Context, set questions.Set) (questions.Response, error) {
	s.mu.Lock()
	answers := append([]questions.Answer(nil), s.partial[set.ID]...)
	s.mu.Unlock()
	select {
	case <-s.quit:
		return questions.Response{}, errClosed(set)
	case <-s.eof:
		// Nobody can type an answer here, but the person reading this
		// output is shown what is asked before how to answer it later.
		s.mu.Lock()
		shown := s.later[set.ID]
		s.mu.Unlock()
		if !shown {
			s.print(s.renderSet(set))
			for i := len(answers); i < len(set.Questions); i++ {
				s.print(s.renderQuestion(set, i))
			}
		}
		return questions.Response{}, s.unavailable(set)
	default:
	}

	s.print(s.renderSet(set))
	for i := len(answers); i < len(set.Questions); i++ {
		q := set.Questions[i]
		s.print(s.renderQuestion(set, i))
		for {
			s.prompt(q)
			var line string
			select {
			case line = <-s.lines:
			case <-s.eof:
				return questions.Response{}, s.unavailable(set)
			case <-ctx.Done():
				return questions.Response{}, ctx.Err()
			case <-s.quit:
				return questions.Response{}, errClosed(set)
			}
			s.echo(line)
			a, err := questions.ParseQuestionAnswer(q, line)
			if err != nil {
				s.log.Debug("bad answer", "set", set.ID, "question", q.ID, "err", err)
				s.print(s.renderInvalid(q, err))
				continue
			}
			a.QuestionID = q.ID
			answers = append(answers, a)
			s.mu.Lock()
			s.partial[set.ID] = answers
			s.mu.Unlock()
			break
		}
	}

	resp := questions.Response{
		SetID:   set.ID,
		Answers: answers,
		By:      s.opts.By,
		Surface: Name,
		At:      time.Now(),
	}
	s.mu.Lock()
	s.typed[set.ID] = resp
	delete(s.partial, set.ID)
	s.mu.Unlock()
	return resp, nil
}

// Resolve prints that set was answered elsewhere. It prints once per set,
// and not for a set answered here. A Passive terminal logs it instead and
// keeps nothing of the set.
func (s *Surface) Resolve(_ context.Context, set questions.Set, resp questions.Response) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.partial, set.ID)
	delete(s.typed, set.ID)
	if s.opts.Passive {
		// serve's terminal keeps nothing of a settled set: thousands go by.
		delete(s.later, set.ID)
		if resp.Surface != Name {
			s.log.Info("question answered", "run", set.RunID, "set", set.ID, "by", resp.By, "on", resp.Surface)
		}
		return nil
	}
	if s.resolved[set.ID] {
		return nil
	}
	s.resolved[set.ID] = true
	if resp.Surface == Name {
		return nil
	}
	s.write(s.renderResolved(set, &resp))
	return nil
}

// read is the one goroutine reading in: it hands each line to an Ask,
// waiting as long as it takes for one to come, and closes eof at the end.
func (s *Surface) read() {
	r := bufio.NewReaderSize(s.in, 4096)
	for {
		line, err := readLine(r)
		if err == nil || line != "" {
			select {
			case s.lines <- line:
			case <-s.quit:
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				s.log.Warn("read input", "err", err)
			}
			s.readErr = err
			close(s.eof)
			return
		}
	}
}

// readLine reads one line without its line ending, keeping at most MaxLine
// bytes of it.
func readLine(r *bufio.Reader) (string, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if room := MaxLine - len(line); room > 0 {
			line = append(line, chunk[:min(len(chunk), room)]...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		line = bytes.TrimRight(line, "\r\n")
		return string(line), err
	}
}

// unavailable prints, once per set, how to answer set later, and returns
// the error Ask returns once the input has ended.
func (s *Surface) unavailable(set questions.Set) error {
	s.mu.Lock()
	if !s.later[set.ID] {
		s.later[set.ID] = true
		s.write(s.renderLater(set))
	}
	s.mu.Unlock()
	if s.readErr != nil && !errors.Is(s.readErr, io.EOF) {
		return fmt.Errorf("ask %s on the terminal: read input: %w: %w", set.ID, s.readErr, surfaces.ErrUnavailable)
	}
	return fmt.Errorf("ask %s on the terminal: input closed: %w", set.ID, surfaces.ErrUnavailable)
}

func errClosed(set questions.Set) error {
	return fmt.Errorf("ask %s on the terminal: closed: %w", set.ID, surfaces.ErrUnavailable)
}

// print writes text to out, starting on a new line.
func (s *Surface) print(text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.write(text)
}

// write writes text on a new line; s.mu is held.
func (s *Surface) write(text string) {
	if s.atPrompt {
		text = "\n" + text
		s.atPrompt = false
	}
	if _, err := io.WriteString(s.out, text); err != nil {
		s.log.Warn("write output", "err", err)
	}
}

// prompt writes q's prompt and leaves the cursor after it.
func (s *Surface) prompt(q questions.Question) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := q.ID + "> "
	if s.opts.Pretty {
		p = tty.Bold(p)
	}
	s.write(p)
	s.atPrompt = true
}

// echo ends the prompt's line: with the line read when echoing, or because
// the terminal echoed it and the Enter key ended it.
func (s *Surface) echo(line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.atPrompt {
		return
	}
	s.atPrompt = false
	if s.opts.Echo {
		if _, err := io.WriteString(s.out, oneLine(line)+"\n"); err != nil {
			s.log.Warn("write output", "err", err)
		}
	}
}

// Rendering. Every text the model wrote goes through clean or oneLine.

// askPassive logs set once with how to answer it, then waits for ctx: a
// daemon's terminal is its log, where a prompt would only be noise.
func (s *Surface) askPassive(ctx context.Context, set questions.Set) error {
	s.logWaiting(set)
	<-ctx.Done()
	return ctx.Err()
}

// logWaiting logs set, once until it is resolved or unwatched, with the
// commands that answer it.
func (s *Surface) logWaiting(set questions.Set) {
	s.mu.Lock()
	said := s.later[set.ID]
	s.later[set.ID] = true
	s.mu.Unlock()
	if said {
		return
	}
	cmds := make([]string, 0, len(set.Questions))
	for _, q := range set.Questions {
		cmds = append(cmds, fmt.Sprintf("%s answer %s <answer>", s.opts.Command, q.ID))
	}
	s.log.Info("question waiting: answer it with the command shown (or on another surface)",
		"run", set.RunID, "set", set.ID, "questions", len(set.Questions), "answer_with", strings.Join(cmds, "; "))
}

// ErrPrompts is what Watch returns on a terminal that is not Passive: it
// prompts, one question at a time, and is asked with Ask.
var ErrPrompts = fmt.Errorf("the terminal prompts: ask it with Ask: %w", errors.ErrUnsupported)

// Watch implements surfaces.Watcher on a Passive terminal (serve's): it
// logs set once, with the commands that answer it, and returns; the answer
// reaches the store through that command (or another surface), never
// through this surface, so nothing waits here. A terminal that prompts
// does not watch: Watch returns an error wrapping ErrPrompts (and
// errors.ErrUnsupported), and the caller asks it with Ask.
func (s *Surface) Watch(ctx context.Context, set questions.Set, _ surfaces.Answers) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(set.Questions) == 0 {
		return fmt.Errorf("watch %s on the terminal: no questions", set.ID)
	}
	if !s.opts.Passive {
		return fmt.Errorf("watch %s: %w", set.ID, ErrPrompts)
	}
	s.logWaiting(set)
	return nil
}

// Watches reports whether Watch works on this terminal (it is Passive):
// a caller holding the surface behind a wrapper asks it this way.
func (s *Surface) Watches() bool { return s.opts.Passive }

// Unwatch implements surfaces.Watcher: the set is forgotten (watched
// again, it is logged again).
func (s *Surface) Unwatch(setID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.later, setID)
}
