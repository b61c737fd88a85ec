package executor

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// spawn starts the CLI at path with env, its stdout on a pipe the Process
// reads and, with the control protocol, its stdin on a pipe whose write end
// it returns (nil without it). On success r.cmd, r.pid and r.pr are set.
// A CLI that cannot be started sets r.notStarted (CategoryCLINotFound) and
// returns no error; the error is for a failure of this process (a pipe, an
// unexpected start error). Either way, what spawn opened is closed and r's
// resources released when the CLI did not start.
func (r *Process) spawn(path string, env []string) (stdinW *os.File, err error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		r.cleanup()
		return nil, fmt.Errorf("start agent CLI: stdout pipe: %w", err)
	}
	cmd := r.e.command(r.req, path, env, r.mcpTemp)
	if r.e.cfg.ControlProtocol {
		// Stdin stays open for the turn: the prompt and the answers to
		// the CLI's control requests go there (control.go).
		inR, inW, err := os.Pipe()
		if err != nil {
			pr.Close()
			pw.Close()
			r.cleanup()
			return nil, fmt.Errorf("start agent CLI: stdin pipe: %w", err)
		}
		cmd.Stdin, stdinW = inR, inW
		defer inR.Close() // the child has its own copy once started
	}
	cmd.Stdout = pw
	cmd.Stderr = r.stderr
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		if stdinW != nil {
			stdinW.Close()
		}
		r.cleanup()
		if !startable(err) {
			r.notStarted = &Exit{Stop: CategoryCLINotFound, StopDetail: fmt.Sprintf("agent CLI cannot be started: %v", err)}
			return nil, nil
		}
		return nil, fmt.Errorf("start agent CLI: %w", err)
	}
	pw.Close()
	r.cmd, r.pid, r.pr = cmd, cmd.Process.Pid, pr
	return stdinW, nil
}

// command is the CLI's command for req, run from req.WorkDir in its own
// process group with env: its arguments (with the MCP config file mcpTemp),
// and stdin as /dev/null or the prompt. spawn wires stdout, stderr and a
// control protocol's stdin.
func (e *Executor) command(req Request, path string, env []string, mcpTemp string) *exec.Cmd {
	cmd := exec.Command(path, e.args(req, mcpTemp)...)
	cmd.Dir = req.WorkDir
	cmd.Env = env
	cmd.Stdin = nil // /dev/null: an open stdin makes the CLI wait for it
	if promptOnStdin(&e.cfg, req) {
		// The CLI reads its prompt from stdin up to EOF (exec closes the
		// pipe once the prompt is written).
		cmd.Stdin = strings.NewReader(req.Prompt)
	}
	cmd.SysProcAttr = sysProcAttr()
	cmd.WaitDelay = max(e.cfg.KillGrace, time.Second)
	return cmd
}

// writeMCPConfig writes {"mcpServers": servers} to a new 0600 file.
func writeMCPConfig(servers map[string]any) (string, error) {
	b, err := json.Marshal(map[string]any{"mcpServers": servers})
	if err != nil {
		return "", fmt.Errorf("write MCP config: %w", err)
	}
	f, err := os.CreateTemp("", "orchestrator-mcp-*.json") // mode 0600
	if err != nil {
		return "", fmt.Errorf("write MCP config: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		os.Remove(f.Name())
		return "", fmt.Errorf("write MCP config: %w", err)
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("write MCP config: %w", err)
	}
	return f.Name(), nil
}

// resolveCommand finds Config.Command (LookCommand).
func (e *Executor) resolveCommand(env []string) (string, error) {
	return LookCommand(e.cfg.Command, env)
}

// LookCommand finds the agent CLI name as a run does: a path is made
// absolute (it would otherwise be taken relative to the work dir); a bare
// name is looked up in the PATH of env (the child's environment), else of
// this process, in absolute directories only. `validate` uses it too.
func LookCommand(name string, env []string) (string, error) {
	if strings.ContainsRune(name, filepath.Separator) {
		abs, err := filepath.Abs(name)
		if err != nil {
			return "", err
		}
		if err := executable(abs); err != nil {
			return "", err
		}
		return abs, nil
	}
	path, ok := envValue(env, "PATH")
	if !ok {
		path = os.Getenv("PATH")
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue // never run a program found relative to the current dir
		}
		p := filepath.Join(dir, name)
		if executable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%q not in PATH: %w", name, exec.ErrNotFound)
}

func executable(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file: %w", path, os.ErrPermission)
	}
	return nil
}
