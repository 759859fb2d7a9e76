package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/agentmeter/agentmeter/middleware"
	"github.com/agentmeter/agentmeter/pricing"
	"github.com/agentmeter/agentmeter/runtime/config"
	"github.com/agentmeter/agentmeter/runtime/gateway"
	"github.com/agentmeter/agentmeter/runtime/store"
	"github.com/agentmeter/agentmeter/runtime/store/postgres"
	"github.com/agentmeter/agentmeter/runtime/store/sqlite"
	"github.com/agentmeter/agentmeter/runtime/telemetry"
)

func init() {
	// The gateway: and store: sections of config.yaml (strict like every section).
	config.RegisterSection("gateway", func() any { return gateway.NewConfig() })
	config.RegisterSection("store", func() any { return store.NewConfig() })
	commands["serve"] = command{summary: "run the HTTP gateway: serve [--config FILE] [--listen HOST:PORT]", run: serveCommand}
}

func serveCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "", "config.yaml (default: the built-in offline demo configuration)")
	listen := fs.String("listen", "", "override gateway.listen (host:port; port 0 picks a free one)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: agentmeter serve [--config FILE] [--listen HOST:PORT]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "agentmeter serve: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, *cfgPath, *listen, stderr); err != nil {
		fmt.Fprintf(stderr, "agentmeter serve: %v\n", err)
		return 1
	}
	return 0
}

// serve runs the gateway until ctx is cancelled (SIGINT/SIGTERM), then shuts down
// gracefully within gateway.shutdown_timeout.
func serve(ctx context.Context, cfgPath, listen string, stderr io.Writer) error {
	cfg, err := loadConfig(cfgPath)
	if err != nil {
		return err
	}
	gwCfg, _ := cfg.Sections["gateway"].(*gateway.Config)
	stCfg, _ := cfg.Sections["store"].(*store.Config)
	if gwCfg == nil || stCfg == nil {
		return errors.New("config: gateway and store sections are not registered")
	}
	if listen != "" {
		gwCfg.Listen = listen
		if err := gwCfg.Validate(); err != nil {
			return fmt.Errorf("--listen: %w", err)
		}
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	tel, err := telemetry.Setup(ctx, telemetry.Options{
		Enabled: config.BoolOr(cfg.Telemetry.Enabled, true), ServiceName: cfg.Telemetry.ServiceName,
		ServiceVersion: version, ExportTimeout: cfg.Telemetry.ExportTimeout, Warnings: stderr,
	})
	if err != nil {
		return err
	}
	defer tel.Shutdown(context.Background())

	st, err := openStore(ctx, stCfg)
	if err != nil {
		return err
	}
	defer st.Close()
	lead, err := NewLeadAgent(cfg, LeadOptions{Memory: storeMemory{st}})
	if err != nil {
		return err
	}

	pricer, stopPrices, err := cfg.Pricer(func(r pricing.RefreshResult) {
		if r.Err != nil {
			log.Warn("price refresh failed; the price table in use is kept", "err", r.Err, "dataset_version", r.Active.Version)
		} else if r.Outcome == pricing.RefreshUpdated {
			log.Info("price table refreshed", "dataset_version", r.Active.Version, "source", r.Active.Source)
		}
	})
	if err != nil {
		return err
	}
	defer stopPrices()
	mc := middleware.ConfigFrom(cfg)
	runtimeSettings := mc.Settings.Runtime
	var fallbackTitle func(string) string
	if mc.Title.Enabled {
		fallbackTitle = func(user string) string { return middleware.FallbackTitle(user, mc.Title.MaxChars) }
	}
	runCtx := telemetry.WithContentCapture(context.Background(), cfg.Telemetry.CaptureContent)
	srv, err := gateway.New(gateway.Options{
		Config: *gwCfg, Store: st, Logger: log, RunContext: runCtx, Pricer: pricer,
		Agents: func(_ context.Context, threadID string) (gateway.Lead, error) {
			sb, err := lead.Sandbox(threadID)
			if err != nil {
				return gateway.Lead{}, err
			}
			return gateway.Lead{Agent: lead.Agent, Sandbox: sb, ModelName: lead.ModelName}, nil
		},
		ContextWindow: func(name string) int {
			for _, m := range cfg.Models {
				if m.Model == name || m.Name == name {
					return m.ContextWindow
				}
			}
			return 0
		},
		DefaultModel:  lead.ModelName,
		FallbackTitle: fallbackTitle,
		// The folder UploadsMiddleware checks (ThreadDataMiddleware's uploads path), mounted
		// in the run's sandbox at /mnt/user-data/uploads.
		Uploads: func(userID, threadID string) (string, error) {
			if userID == "" {
				userID = middleware.DefaultUserID
			}
			td, err := middleware.ThreadPaths(runtimeSettings, userID, threadID)
			return td.UploadsPath, err
		},
	})
	if err != nil {
		return err
	}
	ln, err := srv.Listen()
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "agentmeter serve: listening on http://%s (store %s)\n", ln.Addr(), stCfg.Driver)
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	select {
	case err := <-serveErr:
		return err
	case <-ctx.Done():
	}
	timeout := gwCfg.ShutdownTimeout
	if timeout <= 0 {
		timeout = gateway.DefaultShutdownTimeout
	}
	fmt.Fprintf(stderr, "agentmeter serve: shutting down (running runs get %s)\n", timeout)
	sctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err = srv.Shutdown(sctx)
	<-serveErr
	return err
}

// openStore opens the configured backend and applies its migrations.
func openStore(ctx context.Context, c *store.Config) (store.RunStore, error) {
	dsn := c.DSN
	if c.DSNEnv != "" {
		if dsn = os.Getenv(c.DSNEnv); dsn == "" {
			return nil, fmt.Errorf("store.dsn_env: environment variable %s is not set", c.DSNEnv)
		}
	}
	switch c.Driver {
	case store.DriverPostgres:
		return postgres.Open(ctx, dsn)
	default:
		if dsn == "" {
			dsn = store.DefaultSQLitePath
		}
		return sqlite.Open(ctx, dsn)
	}
}

// storeMemory keeps MemoryMiddleware's per-user memory in the run store, so every
// replica sharing the database sees the same memory.
type storeMemory struct{ st store.RunStore }

func (m storeMemory) Load(ctx context.Context, userID, agentName string) (string, error) {
	return m.st.LoadMemory(ctx, userID, agentName)
}

func (m storeMemory) Save(ctx context.Context, userID, agentName, memory string) error {
	return m.st.SaveMemory(ctx, userID, agentName, memory)
}
