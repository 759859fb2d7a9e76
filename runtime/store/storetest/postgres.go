package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// PostgresDSNEnv names the variable holding a PostgreSQL DSN for tests (CI's
// .ci/setup.d/40-postgres.sh exports it). The role must be allowed to create databases:
// every test gets its own database.
const PostgresDSNEnv = "AGENTMETER_TEST_POSTGRES_DSN"

// ErrNoPostgres means neither the DSN variable nor a PostgreSQL installation was found.
var ErrNoPostgres = errors.New("no PostgreSQL: set " + PostgresDSNEnv + " or install Debian's postgresql (apt-get install postgresql)")

// PostgresServer is a PostgreSQL server tests can create databases on: the one named by
// AGENTMETER_TEST_POSTGRES_DSN, or a throwaway cluster started from /usr/lib/postgresql.
type PostgresServer struct {
	// DSN connects to the maintenance database as a role that may create databases.
	DSN  string
	cmd  *exec.Cmd
	dir  string
	logs string
	done chan struct{}
}

// StartPostgres returns the server to use. Without the DSN variable it runs initdb and
// postgres from the newest /usr/lib/postgresql/*/bin on a free loopback port (as user
// postgres when running as root: PostgreSQL refuses to run as root), in a temp folder
// that Stop removes. It returns ErrNoPostgres when no binaries exist.
func StartPostgres() (*PostgresServer, error) {
	if dsn := os.Getenv(PostgresDSNEnv); dsn != "" {
		return &PostgresServer{DSN: dsn}, nil
	}
	bin, err := postgresBinDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "agentmeter-pg-")
	if err != nil {
		return nil, fmt.Errorf("postgres temp folder: %w", err)
	}
	s := &PostgresServer{dir: dir, logs: filepath.Join(dir, "postgres.log"), done: make(chan struct{})}
	cred, err := runAs()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("chown postgres temp folder: %w", err)
		}
	}
	data := filepath.Join(dir, "data")
	initdb := command(cred, filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %w: %s", err, out)
	}
	port, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	logf, err := os.Create(s.logs)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	// fsync off: a throwaway test cluster trades durability for speed.
	s.cmd = command(cred, filepath.Join(bin, "postgres"), "-D", data, "-k", dir, "-p", strconv.Itoa(port),
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "full_page_writes=off", "-c", "max_connections=200")
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	if err := s.cmd.Start(); err != nil {
		logf.Close()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	go func() { _ = s.cmd.Wait(); logf.Close(); close(s.done) }()
	s.DSN = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgx.Connect(ctx, s.DSN)
		cancel()
		if err == nil {
			conn.Close(context.Background())
			return s, nil
		}
		select {
		case <-s.done:
			b, _ := os.ReadFile(s.logs)
			os.RemoveAll(dir)
			return nil, fmt.Errorf("postgres exited at start: %s", b)
		default:
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(s.logs)
			s.Stop()
			return nil, fmt.Errorf("postgres not ready after 30s (%v): %s", err, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Stop ends a throwaway server (fast shutdown) and removes its folder; a server named by
// the DSN variable is left alone.
func (s *PostgresServer) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.done:
	case <-time.After(15 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
	os.RemoveAll(s.dir)
}

// NewDatabase creates an empty database for one test and drops it at cleanup; it
// returns its DSN.
func (s *PostgresServer) NewDatabase(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.DSN)
	if err != nil {
		t.Fatalf("connect to test postgres: %v", err)
	}
	defer conn.Close(context.Background())
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "agentmeter_test_" + hex.EncodeToString(b[:])
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, s.DSN)
		if err != nil {
			t.Logf("drop test database %s: %v", name, err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Logf("drop test database %s: %v", name, err)
		}
	})
	cfg, err := pgx.ParseConfig(s.DSN)
	if err != nil {
		t.Fatalf("parse %s: %v", PostgresDSNEnv, err)
	}
	return withDatabase(s.DSN, cfg, name)
}

// withDatabase swaps the database of a DSN (URL or key=value form).
func withDatabase(dsn string, cfg *pgx.ConnConfig, name string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		rest := dsn[strings.Index(dsn, "://")+3:]
		query := ""
		if i := strings.IndexByte(rest, '?'); i >= 0 {
			rest, query = rest[:i], rest[i:]
		}
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			rest = rest[:i]
		}
		return dsn[:strings.Index(dsn, "://")+3] + rest + "/" + name + query
	}
	_ = cfg
	return dsn + " dbname=" + name
}

// postgresBinDir finds the newest /usr/lib/postgresql/<version>/bin with initdb.
func postgresBinDir() (string, error) {
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(matches) == 0 {
		return "", ErrNoPostgres
	}
	sort.Slice(matches, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(matches[i]))))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(matches[j]))))
		return vi > vj
	})
	return filepath.Dir(matches[0]), nil
}

// runAs returns the credentials to run PostgreSQL with: nil (ourselves) unless we are
// root, then user postgres (Debian's package creates it). The process gets those
// credentials directly (no runuser in between), so signals reach postgres itself.
func runAs() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root needs the postgres user to start PostgreSQL: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func command(cred *syscall.Credential, name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		cmd.Dir = "/"
	}
	return cmd
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// RequirePostgres is what tests call with the result of StartPostgres: a missing
// PostgreSQL skips on a developer machine but fails in CI (CI=true), where the setup
// script must have provided one.
func RequirePostgres(t testing.TB, s *PostgresServer, err error) *PostgresServer {
	t.Helper()
	if err == nil {
		return s
	}
	if errors.Is(err, ErrNoPostgres) && os.Getenv("CI") != "true" {
		t.Skipf("PostgreSQL tests skipped: %v", err)
	}
	t.Fatalf("PostgreSQL is required: %v", err)
	return nil
}
