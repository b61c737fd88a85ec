package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
)

// The control protocol (Config.ControlProtocol; docs/claude-cli.md, "Asking
// a person natively"): the CLI runs with --input-format stream-json
// --permission-prompt-tool stdio. The executor writes the prompt as
// {"type":"user","message":{"role":"user","content":PROMPT}} on the CLI's
// stdin and keeps stdin open for the turn; the CLI asks on stdout with
//
//	{"type":"control_request","request_id":R,"request":{"subtype":"can_use_tool","tool_name":…,"input":…,"tool_use_id":…}}
//
// and takes the answer on stdin:
//
//	{"type":"control_response","response":{"subtype":"success","request_id":R,"response":{"behavior":"allow","updatedInput":…}}}
//	{"type":"control_response","response":{"subtype":"success","request_id":R,"response":{"behavior":"deny","message":…}}}
//
// A request of a subtype the executor does not know gets
// {"type":"control_response","response":{"subtype":"error","request_id":R,"error":…}}
// at once, never silence. Stdin is closed once the result line is read (the
// CLI then exits) or the process ends.

// SubtypeCanUseTool is the control_request subtype of a permission request.
const SubtypeCanUseTool = "can_use_tool"

// Permission is the answer to a can_use_tool request.
type Permission struct {
	// Allow runs the tool; otherwise it is refused and Message is what the
	// model is told.
	Allow bool
	// UpdatedInput is the input the tool runs with (allow only); nil sends
	// the request's own input. AskUserQuestion takes its answers here
	// ({"questions": […], "answers": {"<question text>": "<label>"}}).
	UpdatedInput json.RawMessage
	// UpdatedPermissions are rules added for the rest of the session (allow
	// only), in the shape of the request's PermissionSuggestions.
	UpdatedPermissions json.RawMessage
	// Message is the reason of a refusal, passed to the model.
	Message string
	// Interrupt stops the turn after a refusal.
	Interrupt bool
}

// ErrNoSuchRequest is returned by Respond for a request that is not
// waiting for an answer (unknown, answered, cancelled).
var ErrNoSuchRequest = errors.New("no such control request is waiting")

// controlState is a Process's side of the control protocol.
type controlState struct {
	mu      sync.Mutex
	stdin   *os.File // nil when not in the control protocol, or closed
	pending map[string]*pendingRequest
}

type pendingRequest struct {
	req    *ControlRequest
	cancel context.CancelFunc
}

// Respond answers the can_use_tool request requestID. It is safe for
// concurrent use and may be called from any goroutine; a request is answered
// once (ErrNoSuchRequest after that, or after the CLI cancelled it or ended).
func (r *Process) Respond(requestID string, p Permission) error {
	c := &r.ctl
	c.mu.Lock()
	pr, ok := c.pending[requestID]
	if ok {
		delete(c.pending, requestID)
	}
	c.mu.Unlock()
	if !ok {
		return fmt.Errorf("respond to control request %q: %w", requestID, ErrNoSuchRequest)
	}
	pr.cancel()
	r.waitEnds(&r.pendingN)
	body := map[string]any{"behavior": "deny", "message": p.Message}
	if p.Allow {
		input := p.UpdatedInput
		if input == nil {
			input = pr.req.Input
		}
		if input == nil {
			input = json.RawMessage("{}")
		}
		body = map[string]any{"behavior": "allow", "updatedInput": input}
		if p.UpdatedPermissions != nil {
			body["updatedPermissions"] = p.UpdatedPermissions
		}
	} else if p.Interrupt {
		body["interrupt"] = true
	}
	return r.writeControl(map[string]any{
		"type": "control_response",
		"response": map[string]any{
			"subtype":    "success",
			"request_id": requestID,
			"response":   body,
		},
	})
}

// Hold says that a person is being asked for the CLI outside the control
// protocol (the PreToolUse hook holds a tool call until they answer): the
// CLI's silence is expected, so Config.IdleTimeout does not end it until
// release is called; from then on the CLI has a whole IdleTimeout again.
// Config.Timeout does not count the time until release either.
// release may be called more than once; only the first counts.
func (r *Process) Hold() (release func()) {
	r.waitBegins(&r.heldN)
	var once sync.Once
	return func() {
		once.Do(func() {
			r.waitEnds(&r.heldN)
			if r.idle != nil {
				r.idle.Reset(r.e.cfg.IdleTimeout)
			}
		})
	}
}

// writeControl writes one JSON line to the CLI's stdin.
func (r *Process) writeControl(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("control protocol: encode: %w", err)
	}
	b = append(b, '\n')
	c := &r.ctl
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stdin == nil {
		return errors.New("control protocol: the CLI's input is closed")
	}
	if _, err := c.stdin.Write(b); err != nil {
		return fmt.Errorf("control protocol: write to the CLI: %w", err)
	}
	return nil
}

// userMessage is the prompt as a stream-json user turn.
func userMessage(prompt string) map[string]any {
	return map[string]any{
		"type":    "user",
		"message": map[string]any{"role": "user", "content": prompt},
	}
}

// observeControl handles the control lines as Next reads them.
func (r *Process) observeControl(ev Event) {
	switch ev := ev.(type) {
	case *ControlRequest:
		if ev.Subtype != SubtypeCanUseTool {
			r.log.Warn("unsupported control request from the agent CLI", "subtype", ev.Subtype)
			if err := r.writeControl(map[string]any{
				"type": "control_response",
				"response": map[string]any{
					"subtype":    "error",
					"request_id": ev.RequestID,
					"error":      fmt.Sprintf("unsupported control request subtype %q", clip(ev.Subtype, 60)),
				},
			}); err != nil {
				r.warn(err.Error())
			}
			return
		}
		ctx, cancel := context.WithCancel(r.ctx)
		c := &r.ctl
		c.mu.Lock()
		if c.pending == nil {
			c.pending = map[string]*pendingRequest{}
		}
		if _, dup := c.pending[ev.RequestID]; dup {
			c.mu.Unlock()
			cancel()
			r.warn(fmt.Sprintf("control request %q asked twice; the first is still waiting", clip(ev.RequestID, 60)))
			return
		}
		c.pending[ev.RequestID] = &pendingRequest{req: ev, cancel: cancel}
		c.mu.Unlock()
		r.waitBegins(&r.pendingN)
		if cb := r.req.CanUseTool; cb != nil {
			go func() {
				p := cb(ctx, ev)
				if err := r.Respond(ev.RequestID, p); err != nil && !errors.Is(err, ErrNoSuchRequest) {
					r.warn(err.Error())
				}
			}()
		}
	case *ControlCancel:
		c := &r.ctl
		c.mu.Lock()
		pr, ok := c.pending[ev.RequestID]
		delete(c.pending, ev.RequestID)
		c.mu.Unlock()
		if ok {
			pr.cancel()
			r.waitEnds(&r.pendingN)
		}
	case *Result:
		// The turn is over: closing stdin lets the CLI exit, unless
		// background tasks it started are still in flight (background.go).
		if r.bg.inFlight() == 0 {
			r.closeStdin()
		}
	}
}

// closeStdin closes the CLI's input and drops the requests still waiting
// (their contexts end).
func (r *Process) closeStdin() {
	c := &r.ctl
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stdin != nil {
		c.stdin.Close()
		c.stdin = nil
	}
	for id, pr := range c.pending {
		pr.cancel()
		delete(c.pending, id)
		r.waitEnds(&r.pendingN)
	}
}
