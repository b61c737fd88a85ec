// Package browsertest starts the system's headless Chromium for tests and
// drives it with chromedp. A test that needs it fails, never skips, when
// Chromium is missing, and says how to install it (`make test` does).
//
// Chromium runs with a fresh profile in the test's temporary directory,
// without sandbox (tests may run as root), GPU, first-run, background
// networking, component updates or sync: it talks only to the test's
// servers on 127.0.0.1.
package browsertest

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// EnvChromium names the Chromium binary to use instead of the one on PATH.
const EnvChromium = "ORCHESTRATOR_TEST_CHROMIUM"

// EnvArtifacts is a directory where screenshots are kept after the test;
// by default they go to the test's temporary directory.
const EnvArtifacts = "ORCHESTRATOR_TEST_ARTIFACTS"

// InstallHint is how to get Chromium on Debian (what `make test` runs).
const InstallHint = "apt-get install -y chromium (or run `make test`, which installs it; or set " + EnvChromium + ")"

// Binary finds Chromium: $ORCHESTRATOR_TEST_CHROMIUM, else chromium or
// chromium-browser on PATH.
func Binary() (string, error) {
	if p := os.Getenv(EnvChromium); p != "" {
		return exec.LookPath(p)
	}
	p, err := exec.LookPath("chromium")
	if err != nil {
		p, err = exec.LookPath("chromium-browser")
	}
	return p, err
}

// New starts a headless Chromium and returns a chromedp context for one
// tab; everything is stopped when the test ends. timeout bounds the whole
// browser session.
func New(t *testing.T, timeout time.Duration) context.Context {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Fatalf("this test needs Chromium, which is not installed: %s", InstallHint)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("metrics-recording-only", true),
		chromedp.Flag("no-proxy-server", true),
		chromedp.WindowSize(1024, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	tab, cancelTab := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	// The first call starts the browser, which lives as long as the
	// context of that call: no timeout on it, only on what follows.
	if err := chromedp.Do(tab); err != nil {
		cancelTab()
		cancelAlloc()
		t.Fatalf("start Chromium (%s): %v", bin, err)
	}
	ctx, cancelTimeout := context.WithTimeout(tab, timeout)
	t.Cleanup(func() {
		cancelTimeout()
		cancelTab()
		cancelAlloc()
	})
	return ctx
}

// Stop closes the browser of ctx (a context from New) before the test
// ends: a server that shuts down meanwhile otherwise waits for the
// connections the browser opened ahead of need.
func Stop(t *testing.T, ctx context.Context) {
	t.Helper()
	if err := chromedp.Cancel(ctx); err != nil && !errors.Is(err, context.Canceled) {
		t.Logf("stop Chromium: %v", err)
	}
}

// Screenshot saves a PNG of the whole page as name.png (in
// $ORCHESTRATOR_TEST_ARTIFACTS, else the test's temporary directory), fails
// the test when it is blank (all pixels nearly one colour), and returns its
// path.
func Screenshot(t *testing.T, ctx context.Context, name string) string {
	t.Helper()
	buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	dir := os.Getenv(EnvArtifacts)
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(buf))
	if err != nil {
		t.Fatalf("screenshot %s is not a PNG: %v", name, err)
	}
	if v := Variance(img); v < MinVariance {
		t.Fatalf("screenshot %s looks blank: luminance variance %.1f < %.1f (%s)", name, v, MinVariance, path)
	}
	t.Logf("screenshot %s: %s", name, path)
	return path
}

// MinVariance is the least luminance variance (0–255 scale) of a page with
// text on it; a blank page is 0.
const MinVariance = 20.0

// Variance is the variance of the pixels' luminance (0–255).
func Variance(img image.Image) float64 {
	b := img.Bounds()
	var n, sum, sq float64
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			l := (0.299*float64(r) + 0.587*float64(g) + 0.114*float64(bl)) / 257
			n++
			sum += l
			sq += l * l
		}
	}
	if n == 0 {
		return 0
	}
	mean := sum / n
	return sq/n - mean*mean
}
