package main

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/orchestrator-dev/orchestrator/internal/runner"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/internal/web"
	"github.com/orchestrator-dev/orchestrator/specs"
)

// webStarter starts runs for the web inbox and POST /api/runs as submit
// does: an ordinary queued run, which serve (any instance, on
// PostgreSQL) takes. A spec is found by name in specs.dir only, never by
// a path: a web user reads no file of this machine.
type webStarter struct {
	m  *Main
	st *store.Store

	once sync.Once
	r    *runner.Runner
	err  error
}

func (s *webStarter) runner() (*runner.Runner, error) {
	s.once.Do(func() { s.r, _, s.err = s.m.newRunner(s.st, func(runner.Event) {}) })
	return s.r, s.err
}

// Specs lists the specs of specs.dir that parse (the others cannot run).
func (s *webStarter) Specs(ctx context.Context) ([]string, error) {
	if s.m.Config.Specs.Dir == "" {
		return nil, nil
	}
	list, err := specs.LoadDir(s.m.Config.Specs.Dir)
	var names []string
	for _, sp := range list {
		names = append(names, sp.Name)
	}
	return names, err
}

func (s *webStarter) Start(ctx context.Context, req web.StartRequest) (web.Started, error) {
	var n runner.NewRun
	var err error
	if req.Spec != "" {
		n, err = s.specRun(req.Spec)
	} else {
		n, err = s.m.finishRun(runner.NewRun{Prompt: req.Prompt}, runOptions{}, runFlags{})
	}
	if err != nil {
		return web.Started{}, err
	}
	n.Queued = true
	if req.Key != "" {
		n.Request = &store.RunRequest{By: req.By, Key: req.Key, BodySHA256: req.BodySHA256}
	}
	r, err := s.runner()
	if err != nil {
		return web.Started{}, err
	}
	run, err := r.Create(ctx, n)
	switch {
	case errors.Is(err, store.ErrRequestReplayed):
		return web.Started{RunID: run.ID, Replayed: true}, nil
	case errors.Is(err, store.ErrRequestReused):
		return web.Started{}, fmt.Errorf("%w: %w", web.ErrKeyReused, err)
	case err != nil:
		return web.Started{}, err
	}
	return web.Started{RunID: run.ID}, nil
}

// specRun is the run of the spec of specs.dir called name.
func (s *webStarter) specRun(name string) (runner.NewRun, error) {
	dir := s.m.Config.Specs.Dir
	if dir == "" {
		return runner.NewRun{}, fmt.Errorf("%q: specs.dir is not set: %w", name, web.ErrUnknownSpec)
	}
	list, _ := specs.LoadDir(dir) // the good ones: another file's problem does not stop this one
	for _, sp := range list {
		if sp.Name != name {
			continue
		}
		if err := bypassRefusal(s.m.Config, sp); err != nil {
			return runner.NewRun{}, err
		}
		return s.m.newRunFromSpec(sp, nil)
	}
	return runner.NewRun{}, fmt.Errorf("%q: %w", name, web.ErrUnknownSpec)
}
