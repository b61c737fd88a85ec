package github

import (
	"context"
	"strconv"
	"strings"
	"sync"

	"github.com/orchestrator-dev/orchestrator/questions"
)

// Ledger keeps, durably, what became of each comment read as a possible
// answer, so that a comment is decided once, ever: live, after a restart,
// and whichever process reads it; and the number of each run's own issue,
// recorded when it is opened (runIssueKey). The store implements it.
type Ledger interface {
	// CommentDecision returns the decision recorded for the comment named
	// key, "" if none.
	CommentDecision(ctx context.Context, key string) (string, error)
	// DecideComment records decision for key unless one is recorded
	// already, and returns the one recorded (the first wins).
	DecideComment(ctx context.Context, key, decision string) (string, error)
	// SetOpen reports whether the question set still waits for an answer
	// (false for a set it does not know).
	SetOpen(ctx context.Context, setID string) (bool, error)
}

// AnswerLedger is a Ledger that also knows the answer each question set
// was closed with (the store does). A comment the store took as an answer
// whose decision was not recorded (the process stopped in between) is then
// known for what it was after a restart, and never told it was not taken.
type AnswerLedger interface {
	Ledger
	// SetAnswer returns the answer the set was closed with, and whether
	// it has one.
	SetAnswer(ctx context.Context, setID string) (questions.Response, bool, error)
}

// Decisions about a comment, as recorded in the Ledger.
const (
	decTaken      = "taken"         // offered and taken (all or some of its sets)
	decInvalid    = "invalid"       // refused: not a valid answer (the person was told why)
	decLate       = "late"          // the set was closed already (the person was told)
	decRefused    = "refused"       // its author may not answer (told once per set)
	decAmbiguous  = "ambiguous"     // several sets wait and it names none (told)
	decEdited     = "edited"        // edited before it was read: never an answer (told)
	decDiscussion = "not an answer" // does not look like an answer: discussion (no reply)
	decClosed     = "closed"        // a reply to a question closed without an answer (told once per set)
)

// commentKey names a comment in the Ledger.
func commentKey(repo string, id int64) string {
	return "github/" + strings.ToLower(repo) + "/comment/" + strconv.FormatInt(id, 10)
}

// memLedger is the Ledger of a client given none: it remembers the last
// maxMemDecisions decisions of this process (enough for the comments a poll
// lists again), and takes every set to be open (only the store knows).
type memLedger struct {
	mu    sync.Mutex
	m     map[string]string
	order []string
}

const maxMemDecisions = 4096

func newMemLedger() *memLedger { return &memLedger{m: make(map[string]string)} }

func (l *memLedger) CommentDecision(_ context.Context, key string) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.m[key], nil
}

func (l *memLedger) DecideComment(_ context.Context, key, decision string) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if d, ok := l.m[key]; ok {
		return d, nil
	}
	l.m[key] = decision
	l.order = append(l.order, key)
	if len(l.order) > maxMemDecisions {
		delete(l.m, l.order[0])
		l.order = l.order[1:]
	}
	return decision, nil
}

func (l *memLedger) SetOpen(context.Context, string) (bool, error) { return true, nil }
