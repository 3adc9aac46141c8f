package servers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// The account and database every MariaDB started here has. The server only
// listens on loopback, so a fixed password is no secret worth keeping.
const (
	MariaDBUser     = "seckill"
	MariaDBPassword = "seckill"
	MariaDBDatabase = "seckill"
)

// MariaDBDSN is the go-sql-driver/mysql DSN for the account StartMariaDB
// creates on addr.
func MariaDBDSN(addr string) string {
	return fmt.Sprintf("%s:%s@tcp(%s)/%s", MariaDBUser, MariaDBPassword, addr, MariaDBDatabase)
}

// mariadbInit runs at every start (mariadbd --init-file), so it must be
// idempotent. A TCP account on 127.0.0.1 is needed because
// mariadb-install-db creates only root@localhost, which with
// --skip-name-resolve matches the Unix socket alone. ALL PRIVILEGES covers
// what the lock tests do from an admin connection: PROCESSLIST of every
// user, KILL of any connection.
const mariadbInit = `CREATE DATABASE IF NOT EXISTS ` + MariaDBDatabase + `;
CREATE USER IF NOT EXISTS '` + MariaDBUser + `'@'127.0.0.1' IDENTIFIED BY '` + MariaDBPassword + `';
GRANT ALL PRIVILEGES ON *.* TO '` + MariaDBUser + `'@'127.0.0.1';
`

// mariadbTuning keeps start-up and memory small (the lab runs several
// servers on two cores) without giving up durability: commits still fsync
// the redo log, so tokens minted before a restart survive it.
var mariadbTuning = []string{
	"--innodb-buffer-pool-size=16M",
	"--innodb-log-file-size=8M",
	"--performance-schema=OFF",
	"--skip-name-resolve",
	"--character-set-server=utf8mb4",
	"--collation-server=utf8mb4_general_ci",
	"--max-connections=1000",
}

// StartMariaDB runs Debian's mariadbd (package mariadb-server, 10.11) as a
// plain process on addr: a data directory in dir/data initialised by
// mariadb-install-db, its socket and pid file in dir, no system service.
// The account MariaDBUser/MariaDBPassword on 127.0.0.1 and the database
// MariaDBDatabase exist once it is ready (MariaDBDSN). The data directory
// survives Restart, as a real restart would; Stop is a clean shutdown
// (SIGTERM), Kill a crash.
func StartMariaDB(ctx context.Context, dir, addr string) (*Process, error) {
	server, err := sbinPath("mariadbd")
	if err != nil {
		return nil, err
	}
	install, err := sbinPath("mariadb-install-db")
	if err != nil {
		return nil, err
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	tmp := filepath.Join(dir, "tmp")
	for _, d := range []string{dir, tmp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	// mariadbd refuses to run as root unless told to; as anyone else
	// --user would need privileges it does not have.
	var asUser []string
	if os.Geteuid() == 0 {
		asUser = []string{"--user=root"}
	}
	if err := mariadbInstall(ctx, install, dir, data, tmp, asUser); err != nil {
		return nil, err
	}
	initFile := filepath.Join(dir, "init.sql")
	if err := os.WriteFile(initFile, []byte(mariadbInit), 0o600); err != nil {
		return nil, err
	}
	args := append([]string{"--no-defaults"}, asUser...)
	args = append(args,
		"--datadir="+data,
		"--tmpdir="+tmp,
		"--socket="+socketPath(dir),
		"--pid-file="+filepath.Join(dir, "mariadbd.pid"),
		"--bind-address="+host,
		"--port="+port,
		"--init-file="+initFile,
	)
	args = append(args, mariadbTuning...)
	return Start(ctx, Spec{
		Name:  "mariadb",
		Path:  server,
		Args:  args,
		Dir:   dir,
		Addr:  addr,
		Ready: mariadbReady,
	})
}

// mariadbInstall creates the system tables in data. --skip-test-db and
// native root authentication keep it to about two seconds; the log goes
// to dir/mariadb-install.log and its tail into the error.
func mariadbInstall(ctx context.Context, install, dir, data, tmp string, asUser []string) error {
	args := append([]string{"--no-defaults"}, asUser...)
	args = append(args,
		"--datadir="+data,
		// Its own: the bootstrap server names its temporary tables
		// "#sql-temptable-<id>-…" in the temp directory, and two installs
		// at once in /tmp (tests in parallel) took each other's, failing
		// with "Unknown table 'mysql.tmp_user_sys'".
		"--tmpdir="+tmp,
		"--auth-root-authentication-method=normal",
		"--skip-test-db",
	)
	args = append(args, mariadbTuning...)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	logPath := filepath.Join(dir, "mariadb-install.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.CommandContext(ctx, install, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Run(); err != nil {
		b, _ := os.ReadFile(logPath)
		lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		// The cause is in the server's [ERROR] lines, above the
		// installer's advice that ends the log.
		var errs []string
		for _, l := range lines {
			if strings.Contains(l, "ERROR") {
				errs = append(errs, l)
			}
		}
		if len(lines) > 20 {
			lines = lines[len(lines)-20:]
		}
		return fmt.Errorf("mariadb-install-db: %w\n%s\n%s", err, strings.Join(errs, "\n"), strings.Join(lines, "\n"))
	}
	return nil
}

// socketPath is the server's Unix socket, in dir when the path fits the
// kernel's 108-byte limit; a test's temp dir can be longer, and then the
// socket goes to a short name in the system temp dir that embeds dir's
// hash. Nothing here connects through it; mariadbd only insists on one.
func socketPath(dir string) string {
	p := filepath.Join(dir, "mariadbd.sock")
	if len(p) < 100 {
		return p
	}
	var h uint32 = 2166136261
	for i := 0; i < len(dir); i++ {
		h = (h ^ uint32(dir[i])) * 16777619
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("mariadbd-%08x.sock", h))
}

// sbinPath finds a binary on PATH or in /usr/sbin (Debian puts mariadbd
// there, which is not on an ordinary user's PATH).
func sbinPath(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, d := range []string{"/usr/sbin", "/usr/bin"} {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("mariadb: %w: %s not found on PATH or in /usr/sbin", ErrNotInstalled, name)
}

// mariadbReady reads the server's greeting: protocol version 10 means it
// accepts logins (the init file has run by then); an error packet (0xff),
// such as "too many connections", is not ready.
func mariadbReady(ctx context.Context, addr string) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	var hdr [5]byte // 3-byte length, sequence id, first payload byte
	if _, err := io.ReadFull(conn, hdr[:]); err != nil {
		return fmt.Errorf("greeting: %w", err)
	}
	switch hdr[4] {
	case 10:
		return nil
	case 0xff:
		return errors.New("greeting: server answered with an error packet")
	default:
		return fmt.Errorf("greeting: protocol version %d, want 10", hdr[4])
	}
}
