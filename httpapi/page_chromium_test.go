//go:build linux

package httpapi_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/daemon"
	"github.com/moatbox/moat/httpapi"
)

// chromium returns the path of a Chromium to drive, or skips the test
// saying why (fails under MOAT_REQUIRE_CHROMIUM=1: CI installs it, except
// in the QEMU guest).
func chromium(t *testing.T) string {
	if os.Getenv("MOAT_VMTEST_GUEST") == "1" {
		// The host's chromium is on the guest's read-only root, but a
		// browser under QEMU's software emulation takes minutes to start;
		// the host runs this test.
		t.Skip("in the QEMU guest (scripts/vmtest.sh): the host drives the browser")
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("MOAT_REQUIRE_CHROMIUM") == "1" {
		t.Fatal("no chromium on PATH, and MOAT_REQUIRE_CHROMIUM=1 (apt-get install chromium)")
	}
	t.Skip("no chromium on PATH (apt-get install chromium): the approvals page is not tested in a browser here")
	return ""
}

// TestApprovalsPageInChromium drives the approvals page in a real headless
// Chromium against a real daemon whose session's commands wait on asks:
// the page shows what waits (a command whose words are markup shown as
// text, never run), a click on Approve lets the command finish, a click
// on Deny fails the next one with the rule named. A command's control
// characters are shown escaped, the words around them as they are.
// Screenshots go to $MOAT_SCREENSHOT_DIR (a temporary directory when
// unset), named in the log.
func TestApprovalsPageInChromium(t *testing.T) {
	bin := chromium(t)
	d := startDaemon(t, daemon.Config{Approvals: true, ApprovalTimeout: 2 * time.Minute}, &httpapi.Tokens{})
	d.srv.WebAddr = d.tcp
	shots := os.Getenv("MOAT_SCREENSHOT_DIR")
	if shots == "" {
		shots = t.TempDir()
	} else if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots in %s", shots)

	opts := append([]chromedp.ExecAllocatorOption{}, chromedp.DefaultExecAllocatorOptions[:]...)
	opts = append(opts, chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1000, 800),
		// Its singleton socket's directory goes in TMPDIR, which it never
		// removes: the test's own, not /tmp.
		chromedp.Env("TMPDIR="+t.TempDir()),
		chromedp.Flag("disable-quic", true), chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	defer cancelBrowser()
	ctx, cancel := context.WithTimeout(bctx, 90*time.Second)
	defer cancel()
	shot := func(name string) chromedp.Action[chromedp.Void] {
		return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
			png, err := chromedp.FullScreenshot(100)(ctx, tg)
			if err != nil {
				return chromedp.Void{}, err
			}
			return chromedp.Void{}, os.WriteFile(filepath.Join(shots, name), png, 0o644)
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return s
	}
	eval := func(js string) bool {
		t.Helper()
		b, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js))
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		return b
	}

	// An overlay session: the page shows its changes so far.
	s := d.create(t, &client.CreateSessionRequest{Policy: shipPolicy, WorkspaceMode: "overlay"})
	if _, _, rep := run(t, d.c, s.ID, &client.ExecRequest{Args: []string{"sh", "-c", "echo 'release notes <b>v2</b>' > NOTES"}}); rep.ExitCode != 0 {
		t.Fatalf("write a file: %+v", rep)
	}
	// Its words also hold what would make the card read as another
	// command: a right-to-left override, which reorders what follows it,
	// and a newline, which pushes the rest out of sight.
	// And a Hangul filler, drawn as a blank, and a tag character, drawn
	// as nothing, which hid words before (found by a tester).
	markup := []string{"echo", "ship", "<script>window.pwned=1</script>", "<img src=x onerror=window.pwned=2>", "notes.\u202etxt.sh", "v2\n\n\nrelease", "a\u3164b\U000e0041c"}
	res := execAsync(d.c, s.ID, markup...)
	a := waitApproval(t, d.c, markup...)

	l, err := d.c.WebLogin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	card := "#a-" + a.ID
	if err := chromedp.Do(ctx,
		chromedp.Navigate(l.URL),
		chromedp.WaitVisible(chromedp.CSS(card+" pre.what")),
		shot("1-pending.png"),
	); err != nil {
		t.Fatalf("page: %v", err)
	}
	shown, rule := text(card+" pre.what"), text(card+" dl")
	if diff := text(card + " pre.diff"); !strings.Contains(diff, "NOTES") || !strings.Contains(diff, "+release notes <b>v2</b>") {
		t.Errorf("the card's diff: %q", diff)
	}
	pwned := eval(`window.pwned !== undefined`)
	injected := eval(`document.querySelectorAll("#list script, #list img").length > 0`)
	url, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(shown, "\u202e\n\u3164\U000e0041") || !strings.Contains(shown, `$'notes.\u202etxt.sh' $'v2\x0a\x0a\x0arelease' $'a\u3164b\U000e0041c'`) {
		t.Errorf("the page shows %q: a control character not escaped", shown)
	}
	for _, w := range markup[2:4] {
		if !strings.Contains(shown, w) {
			t.Errorf("the page shows %q, without %q", shown, w)
		}
	}
	if pwned || injected {
		t.Errorf("markup in a command ran or became elements (pwned %v, elements %v)", pwned, injected)
	}
	if !strings.Contains(rule, "ship") || !strings.Contains(rule, "shipping leaves this machine") || !strings.Contains(rule, s.ID) {
		t.Errorf("the card says %q", rule)
	}
	if strings.Contains(url, l.Code) {
		t.Errorf("the login code stays in the address bar: %s", url)
	}

	// Approve: the command runs to its end.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(card+" button.approve"))); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-res:
		if r.err != nil || r.rep.ExitCode != 0 || !strings.Contains(r.out, "<script>window.pwned=1</script>") || !strings.Contains(r.out, "notes.\u202etxt.sh v2\n\n\nrelease") {
			t.Fatalf("approved in the page: %+v %v %q", r.rep, r.err, r.out)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the command approved in the page did not finish")
	}
	if err := chromedp.Do(ctx,
		chromedp.WaitNotPresent(chromedp.CSS(card)),
		chromedp.WaitVisible(chromedp.CSS("#empty")),
		shot("2-approved.png"),
	); err != nil {
		t.Fatalf("after approving: %v", err)
	}

	// Deny, with a reason: the command fails, naming the rule.
	res = execAsync(d.c, s.ID, "echo", "ship", "to", "production")
	a = waitApproval(t, d.c, "echo", "ship", "to", "production")
	card = "#a-" + a.ID
	if err := chromedp.Do(ctx,
		chromedp.WaitVisible(chromedp.CSS(card+" input.why")),
		chromedp.SendKeys(chromedp.CSS(card+" input.why"), "not on a Friday"),
		shot("3-deny.png"),
		chromedp.Click(chromedp.CSS(card+" button.deny")),
		chromedp.WaitNotPresent(chromedp.CSS(card)),
	); err != nil {
		t.Fatalf("deny: %v", err)
	}
	select {
	case r := <-res:
		if r.err != nil || r.rep.Reason != "denied" || r.out != "" || !strings.Contains(r.rep.Error, "rule ship") || !strings.Contains(r.rep.Error, "not on a Friday") {
			t.Fatalf("denied in the page: %+v %v %q", r.rep, r.err, r.out)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the command denied in the page did not end")
	}
	if err := chromedp.Do(ctx, shot("4-denied.png")); err != nil {
		t.Fatal(err)
	}
}
