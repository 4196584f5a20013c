package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/net/wire"
)

// clusterCmd groups the commands about the cluster as a whole.
func clusterCmd() *cobra.Command {
	// Not adminCommand: --bootstrap-server is describe's alone (local starts the brokers).
	cmd := &cobra.Command{Use: "cluster", Short: "Describe a cluster, or start one of broker processes on this host"}
	env := &adminEnv{}
	describe := &cobra.Command{
		Use:   "describe",
		Short: "Show the cluster id, the active controller and every broker with its endpoints and state",
		Args:  noArgs(""),
		RunE: func(*cobra.Command, []string) error {
			return env.withConn(func(ctx context.Context, c *client.Conn) error {
				var resp wire.DescribeClusterResponse
				if err := c.Call(ctx, &wire.DescribeClusterRequest{}, &resp); err != nil {
					return err
				}
				if resp.ErrorCode != wire.NoError {
					if resp.ErrorMessage != nil && *resp.ErrorMessage != "" {
						return fmt.Errorf("%w: %s", resp.ErrorCode, *resp.ErrorMessage)
					}
					return resp.ErrorCode
				}
				return writeCluster(cmd.OutOrStdout(), &resp)
			})
		},
	}
	addBootstrapFlags(describe.Flags(), &env.bootstrap)
	cmd.AddCommand(describe, clusterLocalCmd())
	return cmd
}

// writeCluster prints a DescribeCluster answer.
func writeCluster(out io.Writer, resp *wire.DescribeClusterResponse) error {
	controller := "none"
	if resp.ControllerID >= 0 {
		controller = strconv.Itoa(int(resp.ControllerID))
	}
	fmt.Fprintf(out, "Cluster ID: %s\nController: %s\n", resp.ClusterID, controller)
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tENDPOINTS\tSTATE")
	for _, br := range resp.Brokers {
		var eps []string
		if br.Port > 0 {
			eps = append(eps, fmt.Sprintf("PLAINTEXT://%s:%d", br.Host, br.Port))
		}
		if br.UnixPath != "" {
			eps = append(eps, "unix://"+br.UnixPath)
		}
		state := br.State.String()
		if br.BrokerID == resp.ControllerID {
			state += " (controller)"
		}
		fmt.Fprintf(w, "%d\t%s\t%s\n", br.BrokerID, strings.Join(eps, ","), state)
	}
	return w.Flush()
}
