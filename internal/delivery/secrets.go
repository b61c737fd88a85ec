package delivery

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"

	"github.com/orchestrator-dev/orchestrator/internal/secretscan"
	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// Before the run's work is committed (Deliver's commit, and Park's work in
// progress), everything the commit would add to what is already on the
// run's branch is screened: every changed file's new content is scanned for
// secrets (internal/secretscan), and every file over the size limit
// (Options.MaxFileSize) is held back whatever it holds. Deliver with a
// finding commits and pushes nothing and returns a *secretscan.Error: the
// run then asks a person whether to deliver without those files
// (DeliverWithout) or to stop. Park never asks (the run is about to wait on
// a question of the model's): it leaves the files out of the
// work-in-progress commit, and the final delivery asks about them.
//
// What is screened is the change from the run's last pushed commit (the
// work parked so far, else the base) to the index after `git add --all`,
// so a commit the agent made itself in the worktree is screened too. A
// file left out keeps its content in the worktree; the commit holds the
// file as it was at that pushed commit (or not at all). When the agent had
// committed in the worktree, its commits are folded into the run's commit,
// so that no commit that is pushed holds what was left out.

// DefaultMaxFileSize is Options.MaxFileSize when not set: 50 MiB, where
// GitHub starts warning (it refuses files over 100 MiB).
const DefaultMaxFileSize = 50 << 20

// DeliverWithout delivers as Deliver does, leaving out of the commit every
// file the screen holds back: the answer "deliver without those files" to
// the question a *secretscan.Error from Deliver makes the run ask.
func (d *Deliverer) DeliverWithout(ctx context.Context, run store.Run, o Options, failpoint func(string)) (Result, error) {
	o.leaveOut = true
	return d.Deliver(ctx, run, o, failpoint)
}

// screen stages the worktree's changes (git add --all) and screens them
// (see above). With findings, it returns a *secretscan.Error, unless
// leaveOut: then the files found are taken out of the index and the
// findings logged. staged reports whether the index then differs from HEAD
// (there is something to commit). env is the worktree's (wtEnv).
func (d *Deliverer) screen(ctx context.Context, run store.Run, dl store.Delivery, o Options, env []string, leaveOut bool) (staged bool, err error) {
	g := d.cfg.Git
	wt := dl.Worktree
	if _, err := g.run(ctx, wt, env, "", "add", "--all"); err != nil {
		return false, err
	}
	from := dl.BaseCommit
	if parked(dl) {
		from = dl.CommitSHA
	}
	findings, err := d.scan(ctx, wt, env, from, o.maxFileSize())
	if err != nil {
		return false, fmt.Errorf("screen the run's work for secrets: %w", err)
	}
	if len(findings) > 0 && !leaveOut {
		for _, f := range findings {
			d.log.Warn("held back from delivery", "run", run.ID, "finding", f.String())
		}
		return false, &secretscan.Error{Findings: findings}
	}
	if len(findings) > 0 {
		if head, _ := g.resolveWith(ctx, wt, env, "HEAD"); head != from {
			// The agent's own commits may hold a file left out: the run's
			// commit replaces them.
			if _, err := g.run(ctx, wt, env, "", "reset", "--quiet", "--soft", from); err != nil {
				return false, fmt.Errorf("fold the agent's commits into the run's: %w", err)
			}
		}
		paths := secretscan.Paths(findings)
		if _, err := g.run(ctx, wt, append(env[:len(env):len(env)], "GIT_LITERAL_PATHSPECS=1"), strings.Join(paths, "\x00"),
			"reset", "--quiet", "--pathspec-from-file=-", "--pathspec-file-nul", from); err != nil {
			return false, fmt.Errorf("leave %d file(s) out of the commit: %w", len(paths), err)
		}
		for _, f := range findings {
			d.log.Warn("left out of the commit", "run", run.ID, "finding", f.String())
		}
	}
	_, err = g.run(ctx, wt, env, "", "diff", "--cached", "--quiet", "HEAD", "--")
	var exit *exec.ExitError
	switch {
	case err == nil:
		return false, nil
	case errors.As(err, &exit) && exit.ExitCode() == 1:
		return true, nil // the index differs
	default:
		return false, err
	}
}

func (o Options) maxFileSize() int64 {
	if o.MaxFileSize > 0 {
		return o.MaxFileSize
	}
	return DefaultMaxFileSize
}

// change is one file the index adds or changes relative to the base.
type change struct {
	path     string
	old, new string // blob IDs; old is empty for a new file
	size     int64
}

// scan returns the findings in what the index of wt adds to from.
func (d *Deliverer) scan(ctx context.Context, wt string, env []string, from string, limit int64) ([]secretscan.Finding, error) {
	g := d.cfg.Git
	out, err := g.run(ctx, wt, env, "", "diff", "--cached", "--raw", "-z", "--no-abbrev", "--find-renames", "--no-ext-diff", "--no-textconv", from, "--")
	if err != nil {
		return nil, err
	}
	var changes []change
	// -z --raw: ":oldmode newmode oldsha newsha status" NUL path NUL, and
	// for a rename or copy (status R… or C…) the source path first: a
	// moved file's secrets are as old as it is.
	fields := strings.Split(out, "\x00")
	for i := 0; i+1 < len(fields); i += 2 {
		meta := strings.Fields(strings.TrimPrefix(fields[i], ":"))
		if len(meta) != 5 {
			return nil, fmt.Errorf("git diff --raw: unexpected entry %q", fields[i])
		}
		newMode, oldSHA, newSHA, status := meta[1], meta[2], meta[3], meta[4]
		if status[0] == 'R' || status[0] == 'C' {
			i++
			if i+1 >= len(fields) {
				return nil, fmt.Errorf("git diff --raw: entry %q has no destination", fields[i-2])
			}
		}
		if status == "D" || newMode == "160000" { // deleted; a submodule's commit
			continue
		}
		c := change{path: fields[i+1], new: newSHA}
		if strings.Trim(oldSHA, "0") != "" && meta[0] != "160000" {
			c.old = oldSHA
		}
		changes = append(changes, c)
	}
	if len(changes) == 0 {
		return nil, nil
	}
	var ids []string
	for _, c := range changes {
		ids = append(ids, c.new)
	}
	sizes, err := g.blobSizes(ctx, wt, env, ids)
	if err != nil {
		return nil, err
	}
	var findings []secretscan.Finding
	var batch []change
	var batchSize int64
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		var want []string
		for _, c := range batch {
			want = append(want, c.new)
			if c.old != "" {
				want = append(want, c.old)
			}
		}
		blobs, err := g.blobs(ctx, wt, env, want)
		if err != nil {
			return err
		}
		for _, c := range batch {
			for _, m := range secretscan.ScanChange(blobs[c.old], blobs[c.new]) {
				findings = append(findings, secretscan.Finding{Path: c.path, Line: m.Line, Kind: m.Kind})
			}
		}
		batch, batchSize = nil, 0
		return nil
	}
	for _, c := range changes {
		c.size = sizes[c.new]
		if c.size > limit {
			findings = append(findings, secretscan.Finding{Path: c.path, Kind: secretscan.KindOversized, Size: c.size, Limit: limit})
			continue
		}
		batch = append(batch, c)
		batchSize += 2 * c.size
		if batchSize > 64<<20 {
			if err := flush(); err != nil {
				return nil, err
			}
		}
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return findings, nil
}

// blobSizes returns the size of each blob.
func (g Git) blobSizes(ctx context.Context, dir string, env, ids []string) (map[string]int64, error) {
	out, err := g.run(ctx, dir, env, strings.Join(ids, "\n")+"\n", "cat-file", "--batch-check")
	if err != nil {
		return nil, err
	}
	sizes := map[string]int64{}
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) != 3 {
			return nil, fmt.Errorf("git cat-file --batch-check: unexpected line %q", l)
		}
		n, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("git cat-file --batch-check: unexpected line %q", l)
		}
		sizes[f[0]] = n
	}
	return sizes, nil
}

// blobs returns the content of each blob.
func (g Git) blobs(ctx context.Context, dir string, env, ids []string) (map[string][]byte, error) {
	out, err := g.run(ctx, dir, env, strings.Join(ids, "\n")+"\n", "cat-file", "--batch")
	if err != nil {
		return nil, err
	}
	// "<id> blob <size>\n<content>\n", for each; run trimmed the newlines
	// at the very end, which only the last content can miss.
	blobs := map[string][]byte{}
	for out != "" {
		head, rest, _ := strings.Cut(out, "\n")
		f := strings.Fields(head)
		if len(f) != 3 || f[1] != "blob" {
			return nil, fmt.Errorf("git cat-file --batch: unexpected header %q", head)
		}
		n, err := strconv.Atoi(f[2])
		if err != nil || n < 0 {
			return nil, fmt.Errorf("git cat-file --batch: unexpected header %q", head)
		}
		n = min(n, len(rest))
		blobs[f[0]] = []byte(rest[:n])
		out = strings.TrimPrefix(rest[n:], "\n")
	}
	return blobs, nil
}
