// Command seed stores runs waiting on a question, as `orchestrator run`
// leaves them after a first turn that asked: one run, its finished first
// turn and the pending question set, through the store's API, for the
// scale benchmarks (package scale). It is built by them; it is not a part
// of the program.
//
//	seed -state DIR [-database-url URL] -n N -spec FILE -workdir DIR [-from I] [-workers W]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/orchestrator-dev/orchestrator/executor"
	"github.com/orchestrator-dev/orchestrator/internal/scale"
	"github.com/orchestrator-dev/orchestrator/internal/store"
)

func main() {
	if err := seed(); err != nil {
		fmt.Fprintln(os.Stderr, "seed:", err)
		os.Exit(1)
	}
}

func seed() error {
	state := flag.String("state", "", "the state directory (its SQLite store, unless -database-url)")
	dbURL := flag.String("database-url", "", "the PostgreSQL store")
	n := flag.Int("n", 0, "how many runs to store")
	from := flag.Int("from", 0, "the index of the first run (runs from, from+1, …, from+n-1)")
	specPath := flag.String("spec", "", "the spec file the runs were made from")
	workdir := flag.String("workdir", "", "the runs' working directory")
	workers := flag.Int("workers", 1, "how many runs are stored at once")
	flag.Parse()
	if *n <= 0 || *specPath == "" || *workdir == "" || *state == "" || *workers < 1 {
		flag.Usage()
		return errors.New("give -n > 0, -spec, -workdir and -state")
	}
	abs, err := filepath.Abs(*specPath)
	if err != nil {
		return err
	}
	text, err := os.ReadFile(abs)
	if err != nil {
		return err
	}
	// What `orchestrator run SPEC` keeps with a run (cmd/orchestrator's
	// runOptions): the spec's path and text.
	opts, err := json.Marshal(map[string]string{"spec_path": abs, "spec_text": string(text)})
	if err != nil {
		return err
	}
	ctx := context.Background()
	st, err := store.OpenDatabase(ctx, *state, *dbURL)
	if err != nil {
		return err
	}
	defer st.Close()
	start := time.Now()
	var next atomic.Int64
	next.Store(int64(*from))
	end := int64(*from + *n)
	errs := make([]error, *workers)
	var wg sync.WaitGroup
	for w := range *workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= end {
					return
				}
				if err := seedRun(ctx, st, int(i), opts, *workdir); err != nil {
					errs[w] = err
					next.Store(end)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	fmt.Printf("seeded %d waiting runs in %.3f s\n", *n, time.Since(start).Seconds())
	return st.Close()
}

// seedRun stores run i as the runner leaves it after a first turn that
// asked: Create (CreateRun), the turn begun (BeginTurn) and finished with
// the question set (FinishTurn: the run becomes waiting).
func seedRun(ctx context.Context, st *store.Store, i int, opts []byte, workdir string) error {
	id, session := scale.RunID(i), scale.SessionID(i)
	surfaces := []string{"terminal"}
	if _, err := st.CreateRun(ctx, store.Run{ID: id, Spec: "scale", Title: "scale", Prompt: "Answer the question, then stop.",
		WorkDir: workdir, Surfaces: surfaces, Options: opts, SessionID: session}); err != nil {
		return err
	}
	t, err := st.BeginTurn(ctx, store.Turn{RunID: id, Kind: store.TurnStart, Prompt: "Answer the question, then stop.", SessionID: session})
	if err != nil {
		return err
	}
	set := scale.Set(i)
	if t.Seq != set.Turn {
		return fmt.Errorf("run %s: first turn is %d, want %d", id, t.Seq, set.Turn)
	}
	return st.FinishTurn(ctx, id, t.Seq, store.TurnResult{Status: executor.StatusSuccess, SessionID: session, NumTurns: 1}, &set, surfaces)
}
