package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sluicemq/sluice/client"
)

const defaultBroker = "127.0.0.1:9092"

// addBootstrapFlags adds --bootstrap-server (-b), Kafka's tools' name for the brokers to start
// from, and --broker, the name Sluice's commands had, as an alias of it: both set dst.
func addBootstrapFlags(f *pflag.FlagSet, dst *string) {
	f.StringVarP(dst, "bootstrap-server", "b", defaultBroker, "brokers to start from (bootstrap.servers): `host:port[,host:port...]`, or unix:///path/to.sock")
	f.Var(f.Lookup("bootstrap-server").Value, "broker", "alias of --bootstrap-server")
}

// bootstrapServers splits a --bootstrap-server list into its addresses.
func bootstrapServers(list string) ([]string, error) {
	var out []string
	for _, a := range strings.Split(list, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--bootstrap-server %q: no address (want host:port[,host:port...])", list)
	}
	return out, nil
}

// adminEnv is what the subcommands of a command made by adminCommand share: the brokers of
// its --bootstrap-server flag.
type adminEnv struct {
	bootstrap string
}

// adminTimeout bounds one admin command, from its connection to its last answer.
const adminTimeout = 60 * time.Second

// withAdmin runs fn with an Admin on the first broker of the list that answers, the whole
// within adminTimeout.
func (e *adminEnv) withAdmin(fn func(ctx context.Context, a *client.Admin) error) error {
	addrs, err := bootstrapServers(e.bootstrap)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	a, err := client.NewAdminWithConfig(ctx, client.AdminConfig{Config: client.Config{Brokers: addrs, ClientID: "sluice-admin"}})
	if err != nil {
		return err
	}
	defer a.Close()
	return fn(ctx, a)
}

// withConn runs fn with a connection to the first broker of the list that answers, for the
// requests Admin does not make (DescribeCluster, DeleteGroups, Metadata with its brokers).
func (e *adminEnv) withConn(fn func(ctx context.Context, c *client.Conn) error) error {
	addrs, err := bootstrapServers(e.bootstrap)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	var errs []error
	for _, addr := range addrs {
		c, err := client.Dial(ctx, addr, "sluice-admin")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		defer c.Close()
		return fn(ctx, c)
	}
	return fmt.Errorf("no broker answered: %w", errors.Join(errs...)) // each error names its address
}

// adminCommand makes a command group whose subcommands reach the brokers of its
// --bootstrap-server flag through the returned adminEnv.
func adminCommand(use, short string) (*cobra.Command, *adminEnv) {
	e := &adminEnv{}
	cmd := &cobra.Command{Use: use, Short: short}
	addBootstrapFlags(cmd.PersistentFlags(), &e.bootstrap)
	return cmd, e
}
