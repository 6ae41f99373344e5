package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/moatbox/moat/audit"
	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/daemon"
	"github.com/moatbox/moat/egress"
	"github.com/moatbox/moat/httpapi"
	"github.com/moatbox/moat/mcpserver"
	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/workspace"
)

// stringList is a flag that may be given more than once.
type stringList []string

func (l *stringList) String() string     { return fmt.Sprint(*l) }
func (l *stringList) Set(s string) error { *l = append(*l, s); return nil }

// cmdServe is moat serve: the session daemon, on a unix socket (the peer's
// uid is the tenant) and, with --listen, on TCP with bearer tokens.
func cmdServe(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sock := fs.String("socket", client.DefaultSocket(), "unix socket to listen on")
	sockMode := fs.String("socket-mode", "0600", "permissions of the socket: 0666 lets every local user in, each as its own tenant (root's daemon only)")
	listen := fs.String("listen", "", "also serve TCP on ADDR (host:port), plain HTTP: loopback, or behind a TLS proxy; needs --tokens")
	webURL := fs.String("web-url", "", "the origin (https://host[:port]) browsers reach --listen at through a TLS proxy, for the approvals page's login links (moat approvals --web)")
	tokensFile := fs.String("tokens", "", `file of "TENANT sha256:HEX [ROLE]" lines, the SHA-256 of each tenant's bearer token (ROLE: all, sessions or approvals)`)
	var origins stringList
	fs.Var(&origins, "allow-origin", "a browser origin allowed to call the API (repeatable); others are refused")
	maxSessions := fs.Int("max-sessions", 16, "sessions per tenant")
	tenantMemory := fs.String("tenant-memory", "", "bound on the sum of a tenant's sessions' limits.memory, e.g. 8GiB (each session must then set it)")
	tenantCPUs := fs.Float64("tenant-cpus", 0, "bound on the sum of a tenant's sessions' limits.cpus (each session must then set it)")
	ttl := durationFlag(fs, "ttl", time.Hour, "a session's default time to live")
	idle := durationFlag(fs, "idle-timeout", 15*time.Minute, "end a session no command used for this long")
	drain := durationFlag(fs, "drain", 30*time.Second, "on SIGTERM, how long running commands get to end; then SIGTERM and 3s more, then SIGKILL (0: kill at once; a second signal cuts it short)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	templatesDir := fs.String("templates", "", "directory of templates: each NAME.toml (or NAME.json) a policy a create request may name")
	var pools stringList
	fs.Var(&pools, "pool", "NAME=N: keep N sandboxes of template NAME made in advance, with an empty workspace (repeatable)")
	tenantDisk := fs.String("tenant-disk", "", "bound on the sum of a tenant's sessions' limits.disk and of the change sets it keeps for review, e.g. 20GiB (each session must then set it, and keep its writes off the host: overlay or readonly)")
	approvalTimeout := durationFlag(fs, "approval-timeout", 5*time.Minute, "how long an ask waits for a person's answer (moat approve, the approvals page) before it is refused")
	webhook := fs.String("approval-webhook", "", "POST a JSON notice of each new pending approval to URL")
	auditFile := fs.String("audit", "", "append the sessions' records (rule decisions, network decisions, refused system calls, run records, each session's start and end), the approvals' outcomes and the daemon's starts and stops to FILE (hash-chained JSON lines)")
	auditBurst := fs.Int("audit-burst", 1000, "records of one session written to --audit at once before --audit-rate holds; those beyond are counted, not written")
	auditRate := fs.Float64("audit-rate", 10, "records a second of one session written to --audit once its burst is spent")
	auditDaemonBurst := fs.Int("audit-daemon-burst", 10000, "records of all sessions together written to --audit at once before --audit-daemon-rate holds; those beyond are counted, not written")
	allowDegraded := fs.Bool("allow-degraded", false, "run every session whose policy asks for a protection this host cannot give (a limit without a delegated cgroup) without it, rather than refuse it; each command's report says what it runs without")
	auditDaemonRate := fs.Float64("audit-daemon-rate", 100, "records a second of all sessions together written to --audit once their burst is spent (the rules' decisions and the runs' ends are never dropped: beyond --audit-rate their session waits for them to be written)")
	if ok, code := parseFlags(fs, args, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "moat serve: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if err := emptyFlag(fs, "tenant-memory", "tenant-disk", "audit", "tokens", "listen", "templates", "approval-webhook", "web-url"); err != nil {
		fmt.Fprintf(stderr, "moat serve: %v\n", err)
		return 2
	}
	if *webURL != "" {
		if *listen == "" {
			fmt.Fprintln(stderr, "moat serve: --web-url needs --listen: it names the TCP listener as a browser reaches it")
			return 2
		}
		if _, err := httpapi.CheckWebURL(*webURL); err != nil {
			fmt.Fprintf(stderr, "moat serve: --web-url: %v\n", err)
			return 2
		}
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(stderr, "moat serve: --log-level %q: want debug, info, warn or error\n", *logLevel)
		return 2
	}
	if err := socketPathError(*sock, "--socket"); err != nil {
		fmt.Fprintf(stderr, "moat serve: %v\n", err)
		return 2
	}
	mode, err := strconv.ParseUint(*sockMode, 8, 32)
	if err != nil || mode&^0o777 != 0 {
		fmt.Fprintf(stderr, "moat serve: --socket-mode %q is not an octal permission such as 0600\n", *sockMode)
		return 2
	}
	// Connecting needs write permission on the socket. Whom another
	// user's daemon lets in, their runs do not know to keep from their
	// commands' sight: only root can record its sockets where every run
	// reads (sandbox.PublicDaemonSocketsRecord).
	if mode&0o022 != 0 && os.Geteuid() != 0 {
		fmt.Fprintf(stderr, "moat serve: --socket-mode %s lets other users connect, which only root's daemon may do: their runs would not know to keep its socket out of their commands' sight\n", *sockMode)
		return 2
	}
	var memQuota policy.Size
	if *tenantMemory != "" {
		if memQuota, err = policy.ParseSize(*tenantMemory); err != nil || memQuota <= 0 {
			fmt.Fprintf(stderr, "moat serve: --tenant-memory %q: want a size such as 8GiB\n", *tenantMemory)
			return 2
		}
	}
	if *tenantCPUs < 0 {
		fmt.Fprintln(stderr, "moat serve: --tenant-cpus is negative")
		return 2
	}
	var diskQuota policy.Size
	if *tenantDisk != "" {
		if diskQuota, err = policy.ParseSize(*tenantDisk); err != nil || diskQuota <= 0 {
			fmt.Fprintf(stderr, "moat serve: --tenant-disk %q: want a size such as 20GiB\n", *tenantDisk)
			return 2
		}
	}
	templates, err := serveTemplates(*templatesDir, pools)
	if err != nil {
		fmt.Fprintf(stderr, "moat serve: %v\n", err)
		return 2
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))
	fail := func(err error) int {
		if isTerminal(stderr) {
			// A person started it: a line to read, not a log record.
			fmt.Fprintf(stderr, "moat serve: %v\n", err)
			return exitMoatError
		}
		log.Error("moat serve: " + err.Error())
		return exitMoatError
	}

	var tokens *httpapi.Tokens
	switch {
	case *listen != "" && *tokensFile == "":
		fmt.Fprintln(stderr, "moat serve: --listen needs --tokens: TCP clients are known only by their token")
		return 2
	case *tokensFile != "":
		if tokens, err = httpapi.LoadTokens(*tokensFile); err != nil {
			return fail(err)
		}
	}
	if *approvalTimeout <= 0 {
		fmt.Fprintln(stderr, "moat serve: --approval-timeout must be positive")
		return 2
	}
	// The daemon takes a value of 0 or less as "the default": a flag
	// that asks for one must not be silently replaced.
	for _, d := range []struct {
		name string
		bad  bool
		want string
	}{
		{"max-sessions", *maxSessions <= 0, "a number of sessions, 1 or more"},
		{"ttl", *ttl <= 0, "a positive duration such as 2h"},
		{"idle-timeout", *idle <= 0, "a positive duration such as 15m"},
		{"drain", *drain < 0, "a duration such as 30s, or 0 to kill running commands at once"},
		{"audit-burst", *auditBurst <= 0, "a number of records, 1 or more"},
		{"audit-rate", !(*auditRate >= 0.001) || math.IsInf(*auditRate, 1), "a number of records a second, 0.001 or more"},
		{"audit-daemon-burst", *auditDaemonBurst <= 0, "a number of records, 1 or more"},
		{"audit-daemon-rate", !(*auditDaemonRate >= 0.001) || math.IsInf(*auditDaemonRate, 1), "a number of records a second, 0.001 or more"},
	} {
		if d.bad {
			fmt.Fprintf(stderr, "moat serve: --%s %s: want %s\n", d.name, fs.Lookup(d.name).Value, d.want)
			return 2
		}
	}
	state, err := workspace.StateDir()
	if err != nil {
		return fail(err)
	}
	cfg := daemon.Config{StateDir: state, MaxSessions: *maxSessions, TenantMemory: int64(memQuota), TenantCPUs: *tenantCPUs,
		TTL: *ttl, IdleTimeout: *idle, Logger: log, Templates: templates, TenantDisk: int64(diskQuota),
		Approvals: true, ApprovalTimeout: *approvalTimeout, ApprovalWebhook: *webhook, AuditBurst: *auditBurst, AuditRate: *auditRate,
		AuditDaemonBurst: *auditDaemonBurst, AuditDaemonRate: *auditDaemonRate, AllowDegraded: *allowDegraded}
	if *allowDegraded {
		log.Warn("--allow-degraded: a session whose policy asks for a protection this host cannot give runs without it; each command's report says what")
	}
	if abs, err := filepath.Abs(*sock); err == nil {
		cfg.Sockets = []string{abs}
	}
	// Connecting needs write permission on the socket.
	cfg.SharedSockets = mode&0o022 != 0
	if *auditFile != "" {
		// A daemon killed in the middle of a record leaves it cut short:
		// that line is set aside (and recorded) rather than the file
		// refused, which would keep the daemon from starting until
		// someone edited it. An edit anywhere else is refused.
		aw, cut, err := audit.OpenRecover(*auditFile)
		if err != nil {
			return fail(err)
		}
		defer aw.Close()
		if cut != nil {
			log.Warn("audit stream: its last line was cut short (a daemon stopped in the middle of it?); set aside",
				"file", *auditFile, "line", cut.Line, "bytes", cut.Bytes, "saved", cut.Saved)
		}
		cfg.Audit = aw
	}
	// From here on SIGTERM, SIGINT and SIGHUP (the terminal of a `moat
	// serve &` closed) drain, even one that comes while the daemon
	// starts: it would otherwise leave its socket and sessions.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	if c, err := net.DialTimeout("unix", *sock, time.Second); err == nil {
		// Said before the state directory is made (listenUnix says it
		// again, for one that came up meanwhile).
		c.Close()
		return fail(fmt.Errorf("a daemon already listens on %s%s", *sock, servedBy(*sock)))
	}
	m, err := daemon.New(cfg)
	if err != nil {
		return fail(err)
	}
	for _, id := range m.Reaped {
		log.Info("session of a previous daemon ended", "session", id)
	}
	srv := &httpapi.Server{Manager: m, Tokens: tokens, AllowOrigins: origins, StateDir: state, Logger: log}
	srv.MCP = mcpserver.NewHTTPHandler(mcpserver.HTTPConfig{Manager: m, Tenant: srv.Tenant, IdleTimeout: *idle, Logger: log,
		Options: mcpserver.Options{Version: version}})
	hs := srv.HTTPServer()

	var listeners []net.Listener
	ul, removeSock, err := listenUnix(*sock, os.FileMode(mode), "--socket")
	if err != nil {
		m.Shutdown(context.Background())
		return fail(err)
	}
	defer removeSock()
	listeners = append(listeners, ul)
	if *listen != "" {
		tl, err := net.Listen("tcp", *listen)
		if err != nil {
			ul.Close()
			m.Shutdown(context.Background())
			return fail(err)
		}
		listeners = append(listeners, tl)
		if ap := tl.Addr().(*net.TCPAddr).AddrPort(); !ap.Addr().IsLoopback() {
			log.Warn("listening beyond this host without TLS: tokens, commands and output cross the network in clear; put a TLS proxy in front (docs/reference.md)", "addr", ap.String())
		}
		srv.WebAddr = tl.Addr().String()
		srv.WebURL = *webURL
		// The sessions' proxies never reach it, whatever their policy's
		// allow_cidrs: a command could otherwise drive the daemon that
		// runs it with a token it found.
		defer egress.RefuseListener(tl.Addr().(*net.TCPAddr).AddrPort())()
	}
	errc := make(chan error, len(listeners))
	for _, l := range listeners {
		addr := l.Addr().String()
		if l == ul {
			addr = *sock // bound under a temporary name, then linked into place
		}
		log.Info("listening", "addr", addr, "network", l.Addr().Network())
		go func() { errc <- hs.Serve(l) }()
	}

	code := 0
	select {
	case s := <-sigs:
		log.Info("draining", "signal", s.String(), "bound", drain.String())
	case err := <-errc:
		log.Error("serve", "err", err)
		code = exitMoatError
	}
	// The manager refuses new work (503 draining, which a client can
	// tell from a daemon that is not there) and gives running commands
	// the drain bound, their streams ending with them; a review under
	// way (an apply into a tenant's workspace) is let finish whatever
	// the bound, its answer sent meanwhile, before the manager writes
	// its stop and lets go of the state directory. Then the HTTP
	// server stops accepting, and what it still serves gets a moment:
	// the process must not end with an apply under way, which would
	// leave the workspace half applied.
	ctx, cancel := context.WithTimeout(context.Background(), *drain)
	defer cancel()
	// A second signal cuts the drain short, as an operator who pressed
	// Ctrl-C twice means: running commands are ended now. A review under
	// way is still let finish, the workspace must not be left half
	// applied.
	go func() {
		select {
		case s := <-sigs:
			log.Warn("second signal: the drain is cut short, running commands are ended now", "signal", s.String())
			cancel()
		case <-ctx.Done():
		}
	}()
	if err := m.Shutdown(ctx); err != nil {
		log.Error("shutdown", "err", err)
		code = exitMoatError
	}
	hctx, hcancel := context.WithTimeout(context.Background(), time.Second)
	defer hcancel()
	hs.Shutdown(hctx)
	hs.Close()
	log.Info("stopped")
	return code
}

// socketPathError refuses a socket path that names no file.
func socketPathError(path, flag string) error {
	if path == "" || strings.HasSuffix(path, "/") || filepath.Base(path) == "." || filepath.Base(path) == ".." {
		return fmt.Errorf("%s %q names no socket: give a file's path, such as %s", flag, path, client.DefaultSocket())
	}
	return nil
}

// listenUnix listens on the socket path with mode, made with no wider
// permissions at any moment. A stale socket (nothing answers on it) is
// replaced; a live one is another daemon's.
//
// remove takes the socket away, and the directories made for it, when
// nothing else is left in them: a daemon that stopped leaves nothing.
// flag names the option that chose the path, for the errors.
func listenUnix(path string, mode os.FileMode, flag string) (l net.Listener, remove func(), err error) {
	if err := socketPathError(path, flag); err != nil {
		return nil, nil, err
	}
	dir := filepath.Dir(path)
	var made []string // deepest first
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil || d == filepath.Dir(d) {
			break
		}
		made = append(made, d)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, err
	}
	remove = func() {
		os.Remove(path)
		for _, d := range made {
			os.Remove(d) // only if empty
		}
	}
	defer func() {
		if err != nil {
			for _, d := range made {
				os.Remove(d)
			}
		}
	}()
	// Whoever can write the socket's directory can replace the socket, and
	// have clients talk to a daemon of its own.
	if fi, err := os.Stat(dir); err != nil {
		return nil, nil, err
	} else if st, ok := fi.Sys().(*syscall.Stat_t); ok && (int(st.Uid) != os.Geteuid() && st.Uid != 0 || fi.Mode().Perm()&0o022 != 0) {
		return nil, nil, fmt.Errorf("the socket's directory %s can be written by others (owner uid %d, mode %v): choose another %s", dir, st.Uid, fi.Mode().Perm(), flag)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, nil, fmt.Errorf("%s exists and is not a socket", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, nil, fmt.Errorf("a daemon already listens on %s%s", path, servedBy(path))
		}
		os.Remove(path)
	}
	// Bound in a directory only this user can enter, given its mode, then
	// linked into place (link fails rather than replace another daemon's
	// socket made meanwhile). Not by narrowing the umask around the bind:
	// the umask is the whole process's, and the daemon's goroutines make
	// workspaces meanwhile.
	tmpdir, err := os.MkdirTemp(dir, ".moat-sock-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(tmpdir)
	tmp := filepath.Join(tmpdir, "s")
	l, err = net.Listen("unix", tmp)
	if err != nil {
		return nil, nil, err
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	if err = os.Chmod(tmp, mode); err != nil {
		l.Close()
		return nil, nil, err
	}
	if err = os.Link(tmp, path); err != nil {
		l.Close()
		return nil, nil, err
	}
	return l, remove, nil
}

// maxPool bounds a template's warm pool: each waiting sandbox holds its
// processes and memory.
const maxPool = 256

// serveTemplates loads the templates of dir and sets the pool sizes of
// pools ("NAME=N").
func serveTemplates(dir string, pools []string) (map[string]*daemon.Template, error) {
	if dir == "" {
		if len(pools) > 0 {
			return nil, fmt.Errorf("--pool needs --templates: a pool is a template's")
		}
		return nil, nil
	}
	templates, err := daemon.LoadTemplates(dir)
	if err != nil {
		return nil, err
	}
	for _, p := range pools {
		name, n, ok := strings.Cut(p, "=")
		size, err := strconv.Atoi(n)
		if !ok || err != nil || size < 0 || size > maxPool {
			return nil, fmt.Errorf("--pool %q: want NAME=N, N from 0 to %d", p, maxPool)
		}
		t := templates[name]
		if t == nil {
			return nil, fmt.Errorf("--pool %q: no template %q in %s", p, name, dir)
		}
		t.Pool = size
	}
	return templates, nil
}

// servedBy says, of a socket a daemon already listens on, that another
// user runs it (not the caller, not root), or "".
func servedBy(path string) string {
	uid, err := client.ServingUID(path)
	if err != nil || uid == os.Geteuid() || uid == 0 {
		return ""
	}
	return fmt.Sprintf(" (served by uid %d, not you: another user made it; remove it and its directory, or choose another --socket)", uid)
}
