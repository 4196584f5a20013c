package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/sluicemq/sluice/broker"
)

func serveCmd() *cobra.Command {
	var (
		dataDir, listen, unixPath, configFile, logLevel, cpuProfile string
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a broker (single node: data in ./data, TCP 127.0.0.1:9092, unix socket in the data dir)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := broker.DefaultConfig()
			if configFile != "" {
				f, err := os.Open(configFile)
				if err != nil {
					return err
				}
				err = broker.ParseProperties(f, &cfg)
				f.Close()
				if err != nil {
					return fmt.Errorf("%s: %w", configFile, err)
				}
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
				return err
			}
			cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

			// Catch signals before the listeners open, so a SIGTERM that arrives during start-up
			// still shuts down cleanly once Open returns.
			sig := make(chan os.Signal, 1)
			signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
			stopProfile, err := startProfiles(cpuProfile, "", "")
			if err != nil {
				return err
			}
			b, err := broker.Open(cfg)
			if err != nil {
				return errors.Join(err, stopProfile())
			}
			s := <-sig
			cfg.Logger.Info("shutting down", "signal", s.String())
			ctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
			defer cancel()
			return errors.Join(b.Close(ctx), stopProfile())
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", "data", "directory for logs and metadata (log.dirs)")
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:9092", "TCP address to listen on (listeners); empty for none")
	cmd.Flags().StringVar(&unixPath, "unix", "", "unix socket path (default <data-dir>/sluice.sock; - for none)")
	cmd.Flags().StringVar(&configFile, "config", "", "Kafka-style properties file (log.dirs, listeners, num.partitions, message.max.bytes, ...)")
	cmd.Flags().StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	cmd.Flags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the broker from start to shutdown to this file (go tool pprof)")
	return cmd
}
