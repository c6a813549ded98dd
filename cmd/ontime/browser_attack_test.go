package main_test

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ontime-go/ontime/internal/wire"
)

// serveDeadEnds runs `ontime serve` on the embedded store with topic
// deadEnd delivered to a webhook that always fails, once: its timers
// become dead letters at once.
func serveDeadEnds(t *testing.T, deadEnd string) *srv {
	t.Helper()
	hook := newDashboardHook(t, 1<<30)
	cfg := filepath.Join(t.TempDir(), "ontime.toml")
	err := os.WriteFile(cfg, []byte(fmt.Sprintf(`
[topics.%s]
retry = { max_attempts = 1 }
target = { type = "http", url = %q, secret = "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=", timeout = "5s" }
`, deadEnd, hook.URL)), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	return serve(t, nil, "--config", cfg, "--data-dir", t.TempDir())
}

// storeView is what the attack test compares before and after: every
// topic's counts, timer x of topic "t2" and the message count.
func storeView(t *testing.T, a *api) string {
	t.Helper()
	var b bytes.Buffer
	b.Write(a.must(200, "GET", "/v1/topics", nil).body)
	b.Write(a.must(200, "GET", "/v1/topics/t2/timers/x", nil).body)
	b.Write(a.must(200, "GET", "/v1/topics/messages/timers", nil).body)
	return b.String()
}

// TestBrowserAttacks: pages a browser loads from elsewhere cannot write
// to `ontime serve`, which has no tokens (the default), in Debian's
// Chromium:
//   - a page on another loopback port submits a text/plain <form> that
//     purges every dead letter with duplicate keys
//     ({"all":true,"ids":["="],"ids":null}), and sends no-cors fetches that
//     create a timer, fire one, cancel one (as a POST) and post /messages;
//   - a DNS-rebinding page: served at http://rebind.test:P by the
//     attacker, then rebind.test:P reaches the server (a proxy on port P
//     stands for the flipped DNS record): its same-origin reads and
//     writes carry Host rebind.test:P and are refused with 421.
//
// The store is unchanged afterwards, and the same requests from curl and
// from the dashboard itself still work.
// Not parallel, as TestDashboardBrowser.
func TestBrowserAttacks(t *testing.T) {
	s := serveDeadEnds(t, "refunds")
	a := newAPI(t, s)
	a.must(201, "POST", "/v1/topics/refunds/timers", map[string]any{"id": "ref-1", "body": "refund", "delay": "0s"})
	a.must(201, "POST", "/v1/topics/refunds/timers", map[string]any{"id": "ref-2", "body": "refund", "delay": "0s"})
	a.must(201, "POST", "/v1/topics/t2/timers", map[string]any{"id": "x", "body": "keep", "delay": "1h"})
	waitAPI(t, 15*time.Second, "two dead refunds", func() bool {
		var p wire.DeadPage
		a.must(200, "GET", "/v1/topics/refunds/dead", nil).decode(t, &p)
		return len(p.Dead) == 2
	})
	before := storeView(t, a)

	// The page of another origin (another loopback port).
	const formKey = `{"all":true,"ids":["`
	attack := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><title>attack</title>
<iframe name="sink" id="sink"></iframe>
<form id="f" method="POST" enctype="text/plain" target="sink" action="%[1]s/v1/topics/refunds/dead:purge">
<input type="hidden" name='%[2]s' value='"],"ids":null}'>
</form>
<script>
const base = %[1]q;
const opts = (body) => ({method: 'POST', mode: 'no-cors', headers: {'Content-Type': 'text/plain'}, body});
const sent = [];
const send = (path, body) => sent.push(fetch(base + path, opts(body)).then(() => 'sent', (e) => 'blocked: ' + e));
document.getElementById('sink').onload = () => {
  send('/v1/topics/t2/timers', '{"id":"evil","body":"evil","delay":"0s"}');
  send('/v1/topics/t2/timers/x/fire', '');
  send('/v1/topics/refunds/dead:replay', '{"all":true}');
  send('/messages', '{"message":"evil"}');
  Promise.all(sent).then((r) => { document.title = 'done ' + r.join(','); });
};
document.getElementById('f').submit();
</script>`, s.URL, formKey)
	}))
	t.Cleanup(attack.Close)

	// The rebinding page: a listener on port P serves the attacker's page
	// at /attack, and passes every other request to the server, Host
	// header and all, as the server's own listener on P would.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target, _ := url.Parse(s.URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	rebind := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/attack" {
			proxy.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><title>rebind</title><script>
const steps = [
  ['GET', '/v1/topics', null],
  ['GET', '/v1/topics/t2/timers/x', null],
  ['DELETE', '/v1/topics/t2/timers/x', null],
  ['POST', '/v1/topics/refunds/dead:purge', '{"all":true}'],
  ['POST', '/v1/topics/t2/timers', '{"id":"rebound","delay":"0s"}'],
];
Promise.all(steps.map(([m, p, b]) => fetch(p, {method: m, body: b, headers: b ? {'Content-Type': 'application/json'} : {}})
  .then(async (r) => m + ' ' + p + ' ' + r.status + ' ' + (await r.text()).length, (e) => m + ' ' + p + ' error ' + e)))
  .then((r) => { document.title = 'done'; document.body.textContent = r.join('\n'); });
</script>`)
	})}
	go func() { _ = rebind.Serve(ln) }()
	t.Cleanup(func() { _ = rebind.Close() })
	_, rebindPort, _ := net.SplitHostPort(ln.Addr().String())

	b := newBrowser(t, chromedp.Flag("host-resolver-rules", "MAP rebind.test 127.0.0.1"))
	waitTitle := func(what string) string {
		t.Helper()
		var title string
		deadline := time.Now().Add(30 * time.Second)
		for !strings.HasPrefix(title, "done") {
			if time.Now().After(deadline) {
				b.shot("failed-" + what)
				t.Fatalf("%s: the page did not finish (title %q)", what, title)
			}
			time.Sleep(100 * time.Millisecond)
			title = evalJS[string](b, "document.title")
		}
		return title
	}
	b.run("open the cross-origin page", 30*time.Second, chromedp.Navigate(attack.URL))
	title := waitTitle("cross-origin page")
	t.Logf("cross-origin page: %s", title)
	b.shot("cross-origin")
	b.run("open the rebinding page", 30*time.Second, chromedp.Navigate("http://rebind.test:"+rebindPort+"/attack"))
	waitTitle("rebinding page")
	results := evalJS[string](b, "document.body.textContent")
	t.Logf("rebinding page:\n%s", results)
	for _, l := range strings.Split(results, "\n") {
		if f := strings.Fields(l); len(f) < 3 || f[2] != "421" {
			t.Errorf("rebinding page: %q, want 421 for every request", l)
		}
	}
	b.shot("rebinding")

	if after := storeView(t, a); after != before {
		t.Errorf("the store changed under the attack pages:\nbefore %s\nafter  %s", before, after)
	}
	if got := a.do("GET", "/v1/topics/t2/timers/evil", nil).status; got != 404 {
		t.Errorf("the no-cors fetch created timer evil (%d)", got)
	}
	if log := s.stderr(); !strings.Contains(log, "status=403") || !strings.Contains(log, "status=421") {
		t.Logf("server log (no 403/421 line at debug level is fine):\n%s", log)
	}

	// curl's way (no Origin) works: the README's example.
	out, err := exec.Command("curl", "-s", "-X", "POST", s.URL+"/messages", "-d", `{"message": "hello in 5 seconds", "delay_sec": 5}`).Output()
	if err != nil || !strings.Contains(string(out), `"scheduled_for"`) {
		t.Errorf("curl -d: %q, %v", out, err)
	}
	// And the dashboard, same-origin, still purges.
	b.run("open the dead letters", 30*time.Second, chromedp.Navigate(s.URL+"/ui/#/topic/refunds/dead"),
		chromedp.WaitVisible(chromedp.CSS(`#dead tr[data-id="ref-2"]`)),
		chromedp.Click(chromedp.CSS(`#purge-all`)), chromedp.WaitVisible(chromedp.CSS(`#confirm-typed`)),
		chromedp.SendKeys(chromedp.CSS(`#confirm-typed`), "refunds"), chromedp.Click(chromedp.CSS(`#confirm-ok`)),
		chromedp.WaitVisible(chromedp.CSS(`#no-dead`)))
}

// TestDashboardHostileData: stored strings a person would misread are
// shown escaped, as the CLI prints them on a terminal: a timer id with a
// right-to-left override ("invoice-\u202egpj.exe" reads
// "invoice-exe.jpg"), a body and a header with invisible and
// bidirectional characters, in the list, the timer's page, the cancel
// dialog and the dead letters' dialog; no such character reaches the
// page's text. A topic of 50 bodies of 1 MiB loads the first KiB of each
// (the list's answer stays small) and a link loads the whole body of one.
// Not parallel, as TestDashboardBrowser.
func TestDashboardHostileData(t *testing.T) {
	s := serveDeadEnds(t, "dead-bills")
	a := newAPI(t, s)
	const id = "invoice-\u202egpj.exe"
	const shown = `invoice-\u202egpj.exe`
	a.must(201, "POST", "/v1/topics/bills/timers", map[string]any{"id": id, "delay": "1h",
		"body": "pay\u200b now \u2066ok\u2069\nline 2\x1b[31m", "headers": map[string]string{"x-note": "a\u202eb"}, "correlation_id": "c\u2028d"})
	a.must(201, "POST", "/v1/topics/dead-bills/timers", map[string]any{"id": id, "body": "x", "delay": "0s"})
	big := strings.Repeat("b", 1<<20)
	for i := range 50 {
		a.must(201, "POST", "/v1/topics/big/timers", map[string]any{"id": fmt.Sprintf("big-%02d", i), "body": big, "delay": "1h"})
	}
	a.must(201, "POST", "/v1/topics/dead-bills/timers", map[string]any{"id": "big-dead", "body": big, "delay": "0s"})
	waitAPI(t, 15*time.Second, "two dead letters", func() bool {
		var p wire.DeadPage
		a.must(200, "GET", "/v1/topics/dead-bills/dead?body_limit=1024", nil).decode(t, &p)
		return len(p.Dead) == 2
	})

	b := newBrowser(t)
	noRaw := func(where string) {
		t.Helper()
		text := evalJS[string](b, "document.body.innerText")
		for _, c := range []string{"\u202e", "\u2066", "\u2069", "\u200b", "\u2028", "\x1b"} {
			if strings.Contains(text, c) {
				t.Errorf("%s: the page shows %U raw", where, []rune(c)[0])
			}
		}
	}
	b.run("open the topic", 30*time.Second, chromedp.Navigate(s.URL+"/ui/#/topic/bills"), chromedp.WaitVisible(chromedp.CSS(`#timers td.id`)))
	if got := b.text(`#timers td.id`); got != shown {
		t.Errorf("list id: %q, want %q", got, shown)
	}
	if got := b.text(`#timers td.ellipsis`); got != `pay\u200b now \u2066ok\u2069\nline 2\x1b[31m` {
		t.Errorf("list body: %q", got)
	}
	noRaw("the topic's list")
	b.shot("hostile-list")
	b.run("open the timer", 30*time.Second, chromedp.Click(chromedp.CSS(`#timers td.id a`)), chromedp.WaitVisible(chromedp.CSS(`#cancel`)))
	if got := b.text(`#timer-id`); !strings.HasPrefix(got, shown) {
		t.Errorf("timer page title: %q", got)
	}
	if got := evalJS[string](b, `document.getElementById('body').textContent`); got != "pay\\u200b now \\u2066ok\\u2069\nline 2\\x1b[31m" {
		t.Errorf("timer body: %q", got)
	}
	if got := b.text(`#headers`); got != `x-note: a\u202eb` {
		t.Errorf("headers: %q", got)
	}
	if got := b.text(`#correlation-id`); got != `c\u2028d` {
		t.Errorf("correlation id: %q", got)
	}
	noRaw("the timer's page")
	b.run("the cancel dialog", 10*time.Second, chromedp.Click(chromedp.CSS(`#cancel`)), chromedp.WaitVisible(chromedp.CSS(`#confirm-ok`)))
	if got := b.text(`#confirm-body code`); got != shown {
		t.Errorf("cancel dialog: %q, want %q", got, shown)
	}
	noRaw("the cancel dialog")
	b.shot("hostile-cancel")
	b.run("dismiss", 10*time.Second, chromedp.Click(chromedp.CSS(`#confirm-cancel`)), chromedp.WaitNotVisible(chromedp.CSS(`#confirm`)))

	b.run("open the dead letters", 30*time.Second, chromedp.Navigate(s.URL+"/ui/#/topic/dead-bills/dead"),
		chromedp.WaitVisible(chromedp.CSS(`#dead tr[data-id="big-dead"]`)))
	if got := b.text(`#dead tbody tr:first-child td.id`); got != shown {
		t.Errorf("dead letter id: %q", got)
	}
	// A dead letter's body is cut in the list too, with a link to all of it.
	size := evalJS[int](b, `Math.max(...performance.getEntriesByType('resource').filter((e) => e.name.includes('/v1/topics/dead-bills/dead?')).map((e) => e.decodedBodySize))`)
	if size <= 0 || size > 20<<10 {
		t.Errorf("the dead letters' list with a 1 MiB body: %d bytes, want under 20 KiB", size)
	}
	if got := b.text(`#dead tr[data-id="big-dead"] a.whole`); got != "whole body (1.0 MiB)" {
		t.Errorf("the link to the dead letter's whole body: %q", got)
	}
	b.run("load the dead letter's whole body", 60*time.Second, chromedp.Click(chromedp.CSS(`#dead tr[data-id="big-dead"] a.whole`)), chromedp.WaitVisible(chromedp.CSS(`#dead-letter #body`)))
	if n := evalJS[int](b, `document.getElementById('body').textContent.length`); n != 1<<20 {
		t.Errorf("the dead letter's whole body: %d characters, want %d", n, 1<<20)
	}
	b.run("the hostile dead letter's page", 30*time.Second, chromedp.Navigate(s.URL+"/ui/#/topic/dead-bills/dead/"+url.PathEscape(id)),
		chromedp.WaitVisible(chromedp.CSS(`#dead-id`)))
	if got := b.text(`#dead-id`); !strings.HasPrefix(got, shown) {
		t.Errorf("dead letter page title: %q", got)
	}
	noRaw("the dead letter's page")
	b.run("back to the dead letters", 30*time.Second, chromedp.Navigate(s.URL+"/ui/#/topic/dead-bills/dead"),
		chromedp.WaitVisible(chromedp.CSS(`#dead tr[data-id="big-dead"]`)))
	b.run("select and purge", 10*time.Second, chromedp.Click(chromedp.CSS(`#dead tbody tr:first-child input[type=checkbox]`)),
		chromedp.Click(chromedp.CSS(`#purge`)), chromedp.WaitVisible(chromedp.CSS(`#confirm-ok`)))
	if got := b.text(`#confirm-ids`); got != shown {
		t.Errorf("purge dialog: %q, want %q", got, shown)
	}
	noRaw("the purge dialog")
	b.run("dismiss the purge", 10*time.Second, chromedp.Click(chromedp.CSS(`#confirm-cancel`)), chromedp.WaitNotVisible(chromedp.CSS(`#confirm`)))

	// 50 bodies of 1 MiB: the list loads 1 KiB of each.
	b.run("open the big topic", 60*time.Second, chromedp.Navigate(s.URL+"/ui/#/topic/big"), chromedp.WaitVisible(chromedp.CSS(`#timers tr[data-id="big-49"]`)))
	size = evalJS[int](b, `Math.max(...performance.getEntriesByType('resource').filter((e) => e.name.includes('/v1/topics/big/timers?')).map((e) => e.decodedBodySize))`)
	if size <= 0 || size > 200<<10 {
		t.Errorf("the list of 50 timers of 1 MiB: %d bytes, want under 200 KiB", size)
	}
	if got := b.text(`#timers tr[data-id="big-07"] a.whole`); got != "whole body (1.0 MiB)" {
		t.Errorf("the link to the whole body: %q", got)
	}
	b.run("load one whole body", 60*time.Second, chromedp.Click(chromedp.CSS(`#timers tr[data-id="big-07"] a.whole`)), chromedp.WaitVisible(chromedp.CSS(`#body`)))
	if n := evalJS[int](b, `document.getElementById('body').textContent.length`); n != 1<<20 {
		t.Errorf("the whole body: %d characters, want %d", n, 1<<20)
	}
	b.shot("whole-body")
}
