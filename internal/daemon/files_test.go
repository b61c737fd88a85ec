//go:build unix

package daemon

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// envFilesChild makes TestOutOfFiles the child: a daemon in a process
// whose open-file limit is filesLimit.
const envFilesChild = "ORCHESTRATOR_TEST_FILES_CHILD"

const filesLimit = 256

func TestThousands(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 4096: "4,096", -1234567: "-1,234,567", 100000: "100,000"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestOutOfFiles: a daemon whose process nears its open-file limit answers
// /healthz 503 saying how many files are open of how many; at the limit
// (every descriptor taken) /healthz, /metrics and every other request are
// answered 503 with the reason too, not left waiting; once descriptors are
// free again /healthz is 200. The daemon runs in a child process (this
// test binary) with a limit of 256 that it fills with handles of the null
// device when told.
func TestOutOfFiles(t *testing.T) {
	if os.Getenv(envFilesChild) != "" {
		filesChild(t)
		return
	}
	t.Parallel()
	if _, _, ok := fileUse(); !ok {
		t.Skip("this system does not say how many files a process has open")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestOutOfFiles$", "-test.count=1")
	cmd.Env = append(os.Environ(), envFilesChild+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	var out strings.Builder // what the child printed, for a failure
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			out.WriteString(sc.Text() + "\n")
			if v, ok := strings.CutPrefix(sc.Text(), "files-child: "); ok {
				lines <- v
			}
		}
	}()
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil && !t.Failed() {
				t.Errorf("child: %v\n%s", err, stderr.String())
			}
		case <-time.After(wait):
			cmd.Process.Kill()
			<-done
			t.Error("the child did not end")
		}
	})
	next := func() string {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the child ended:\n%s\n%s", out.String(), stderr.String())
			}
			return l
		case <-time.After(wait):
			t.Fatalf("the child said nothing:\n%s", stderr.String())
		}
		return ""
	}
	tell := func(cmd string) {
		t.Helper()
		if _, err := io.WriteString(stdin, cmd+"\n"); err != nil {
			t.Fatal(err)
		}
		if l := next(); l != "done "+cmd {
			t.Fatalf("the child said %q to %s", l, cmd)
		}
	}
	addr, ok := strings.CutPrefix(next(), "addr ")
	if !ok {
		t.Fatal("the child gave no address")
	}
	// A client that would wait forever on a daemon that never answers is
	// stopped after a minute: the test fails rather than hang. At the
	// limit each request comes on a new connection, which the daemon
	// must accept; before, on one kept open (a connection the daemon
	// closes would free a descriptor whenever it does).
	kept := &http.Client{Timeout: time.Minute}
	fresh := &http.Client{Timeout: time.Minute, Transport: &http.Transport{DisableKeepAlives: true}}
	client := kept
	get := func(path string) (int, Health) {
		t.Helper()
		resp, err := client.Get("http://" + addr + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		var h Health
		b, _ := io.ReadAll(resp.Body)
		if path == "/healthz" || resp.StatusCode == http.StatusServiceUnavailable {
			if err := json.Unmarshal(b, &h); err != nil {
				t.Fatalf("GET %s: %d %v: %q", path, resp.StatusCode, err, b)
			}
		}
		return resp.StatusCode, h
	}

	if code, h := get("/healthz"); code != http.StatusOK || h.Files != "" {
		t.Fatalf("/healthz with files to spare: %d %+v", code, h)
	}

	tell("near")
	code, h := get("/healthz")
	if code != http.StatusServiceUnavailable || h.Status != "degraded" ||
		!strings.HasPrefix(h.Files, "open files: ") || !strings.HasSuffix(h.Files, " of 256") || !strings.Contains(h.Error, h.Files) {
		t.Fatalf("/healthz near the limit: %d %+v", code, h)
	}

	tell("full")
	client = fresh
	for _, path := range []string{"/healthz", "/metrics", "/statusz"} {
		code, h := get(path)
		if code != http.StatusServiceUnavailable || h.Status != "error" || h.Error != "open files: 256 of 256" {
			t.Fatalf("%s at the limit: %d %+v", path, code, h)
		}
	}

	tell("release")
	if code, h := get("/healthz"); code != http.StatusOK || h.Files != "" {
		t.Fatalf("/healthz with descriptors free again: %d %+v", code, h)
	}
}

// filesChild is TestOutOfFiles's child: it lowers its open-file limit,
// starts a daemon, prints its address, then on each line of stdin fills
// its descriptors ("near": a few left, "full": none left) or gives them
// back ("release"), and says "done <line>".
func filesChild(t *testing.T) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	rl.Cur = filesLimit
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	st := openStore(t, t.TempDir())
	d, err := New(Config{Runs: newFakeRuns(st, ""), Store: st, Listen: "127.0.0.1:0", Metrics: NewMetrics(st)})
	if err != nil {
		t.Fatal(err)
	}
	start(t, d)
	fmt.Printf("files-child: addr %s\n", d.Addr())
	var held []*os.File
	hold := func(n int) {
		for i := 0; n < 0 || i < n; i++ {
			f, err := os.Open(os.DevNull)
			if err != nil {
				if n < 0 && outOfFiles(err) {
					return
				}
				t.Fatal(err)
			}
			held = append(held, f)
		}
	}
	defer func() {
		for _, f := range held {
			f.Close()
		}
	}()
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		switch sc.Text() {
		case "near":
			open, limit, _ := fileUse()
			hold(limit - open - fileHeadroom(limit)/2)
		case "full":
			hold(-1)
		case "release":
			for _, f := range held {
				f.Close()
			}
			held = nil
		default:
			t.Fatalf("unknown command %q", sc.Text())
		}
		fmt.Printf("files-child: done %s\n", sc.Text())
	}
}
