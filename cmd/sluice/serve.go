package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/internal/sched"
)

func serveCmd() *cobra.Command {
	var (
		dataDir, listen, unixPath, configFile, logLevel, cpuProfile string
		powerLossJournal                                            string
		schedSlice                                                  time.Duration
		overrides                                                   []string
	)
	cmd := &cobra.Command{
		Use:   "serve [server.properties]",
		Short: "Run a broker (single node: data in ./data, TCP 127.0.0.1:9092, unix socket in the data dir)",
		Long: `Run a broker (single node: data in ./data, TCP 127.0.0.1:9092, unix socket in the data dir).

The optional argument is a Kafka-style properties file, as kafka-server-start.sh takes it; it is
the same as --config FILE (give one or the other). A Kafka KRaft quick start's server.properties
is taken as a whole: Kafka keys with no effect in Sluice are listed once at start. --override
key=value (repeatable, as kafka-server-start's) replaces a key of the file; --data-dir, --listen
and --unix win over both. Every property: docs/configuration.md.`,
		Args: serveArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				configFile = args[0]
			}
			cfg, ignored, err := loadConfig(configFile, overrides)
			if err != nil {
				return err
			}
			// Flags given on the command line win over the file.
			if cmd.Flags().Changed("data-dir") {
				cfg.DataDir = dataDir
			}
			if cmd.Flags().Changed("listen") {
				cfg.Listen = listen
			}
			if cmd.Flags().Changed("unix") {
				cfg.UnixPath = unixPath
			}
			var level slog.Level
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				// slog's own message ("slog: level string ...") names neither the flag nor
				// the choices.
				return fmt.Errorf("--log-level %q: want debug, info, warn or error", logLevel)
			}
			cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
			if len(ignored) > 0 {
				cfg.Logger.Info("ignored (no effect in Sluice): "+strings.Join(ignored, ", "), "config", configFile)
			}
			if err := applySchedSlice(schedSlice); err != nil {
				return err
			}
			var pl *powerLoss
			if powerLossJournal != "" {
				if pl, err = startPowerLoss(powerLossJournal, &cfg); err != nil {
					return fmt.Errorf("--simulate-power-loss: %w", err)
				}
			}

			// Catch signals before the listeners open, so a SIGTERM that arrives during start-up
			// still shuts down cleanly once Open returns.
			sig := make(chan os.Signal, 2)
			signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
			defer signal.Stop(sig)
			defer dumpStacksOnSIGUSR1(cfg.Logger)()
			stopProfile, err := startProfiles(cpuProfile, "", "")
			if err != nil {
				return err
			}
			opened := make(chan struct{})
			early := watchStartup(sig, opened, cfg.Logger)
			b, err := openBroker(cfg)
			close(opened)
			if err != nil {
				return errors.Join(err, stopProfile(), pl.stop())
			}
			var s os.Signal
			select {
			case s = <-early:
			case s = <-sig:
			}
			cfg.Logger.Info("shutting down", "signal", s.String())
			ctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
			defer cancel()
			return errors.Join(b.Close(ctx), stopProfile(), pl.stop())
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", "data", "directory for logs and metadata (log.dirs)")
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:9092", "TCP address to listen on (listeners); empty for none")
	cmd.Flags().StringVar(&unixPath, "unix", "", "unix socket path (default <data-dir>/sluice.sock; - for none)")
	cmd.Flags().StringVar(&configFile, "config", "", "Kafka-style properties file (log.dirs, listeners, num.partitions, message.max.bytes, ...); or give it as the argument")
	cmd.Flags().StringArrayVar(&overrides, "override", nil, "key=value: a property that replaces the file's (repeatable; as kafka-server-start's --override)")
	cmd.Flags().StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	cmd.Flags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the broker from start to shutdown to this file (go tool pprof)")
	cmd.Flags().StringVar(&powerLossJournal, "simulate-power-loss", "", "for fault-injection tests (sluice chaos runs brokers with it): the logs journal into `JOURNAL` what is durable, so that a kill -9 of the broker followed by vfs.RollBack on the journal is a power cut (unsynced bytes lost, optionally torn); slower, every sync journals. While JOURNAL.disk-full exists, log writes fail with ENOSPC (a full disk)")
	addSchedSliceFlag(cmd, &schedSlice, "the broker's")
	return cmd
}

// loadConfig is the broker's configuration from the properties file (none when file is "")
// and the --override properties, with the Kafka keys that have no effect in Sluice.
func loadConfig(file string, overrides []string) (broker.Config, []string, error) {
	cfg := broker.DefaultConfig()
	if file == "" && len(overrides) == 0 {
		return cfg, nil, nil
	}
	var r io.Reader = strings.NewReader("")
	if file != "" {
		f, err := os.Open(file)
		if err != nil {
			return cfg, nil, err
		}
		defer f.Close()
		r = f
	}
	ignored, err := broker.ReadProperties(r, &cfg, overrides...)
	if err != nil {
		if file != "" {
			return cfg, nil, fmt.Errorf("%s: %w", file, err)
		}
		return cfg, nil, err
	}
	return cfg, ignored, nil
}

// serveArgs accepts at most one argument, the properties file, and not with --config: an
// argument that was not used would start a broker with settings nobody asked for.
func serveArgs(cmd *cobra.Command, args []string) error {
	switch {
	case len(args) > 1:
		return fmt.Errorf("serve takes at most one argument, the properties file; got %d: %s", len(args), strings.Join(args, " "))
	case len(args) == 1 && cmd.Flags().Changed("config"):
		return fmt.Errorf("properties file given twice: argument %s and --config %s (give one)", args[0], cmd.Flag("config").Value)
	}
	return nil
}

// openBroker and exitNow are broker.Open and os.Exit; tests replace them.
var (
	openBroker = broker.Open
	exitNow    = os.Exit
)

// watchStartup handles signals while the broker opens, which can take minutes with many
// partitions and cannot be interrupted: the first signal is passed on (on the returned
// channel) to shut down cleanly once the logs are open, and a second exits at once, as a
// crash would (the logs recover from their recovery points at the next start).
func watchStartup(sig <-chan os.Signal, opened <-chan struct{}, log *slog.Logger) <-chan os.Signal {
	early := make(chan os.Signal, 1)
	go func() {
		select {
		case s := <-sig:
			log.Warn("signal during start-up: shutting down once the logs are open; signal again to exit at once",
				"signal", s.String())
			early <- s
			select {
			case s := <-sig:
				log.Error("second signal during start-up: exiting now; the logs recover at the next start", "signal", s.String())
				exitNow(1)
			case <-opened:
			}
		case <-opened:
		}
	}()
	return early
}

// addSchedSliceFlag adds --sched-slice, for whose threads says whose they are.
func addSchedSliceFlag(cmd *cobra.Command, d *time.Duration, whose string) {
	cmd.Flags().DurationVar(d, "sched-slice", 0, "ask Linux (6.12 or later) for this scheduler time slice for "+whose+
		" threads, from 100us to 100ms (the kernel's default is 1.4 ms on 2 cores, 2.8 ms on 8 or more): a shorter slice lets a thread that wakes for a request preempt one that has run longer, which cuts tail latency when the cores are busy, at the cost of more context switches; 0 leaves the kernel's default")
}

// applySchedSlice sets the process's threads' slice (0: leave it).
func applySchedSlice(d time.Duration) error {
	if d == 0 {
		return nil
	}
	if _, err := sched.SetSlice(d); err != nil {
		return fmt.Errorf("--sched-slice %v: %w", d, err)
	}
	return nil
}
