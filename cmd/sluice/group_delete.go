package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/net/wire"
)

// groupDeleteCmd is `group delete`, as kafka-consumer-groups --delete.
func groupDeleteCmd(parent *cobra.Command, env *adminEnv) *cobra.Command {
	return &cobra.Command{
		Use:   "delete GROUP...",
		Short: "Delete consumer groups (today: their committed offsets)",
		Long: `Delete consumer groups, as kafka-consumer-groups --delete. Sluice's groups have no
membership yet, so a group is its committed offsets, and deleting it deletes them: its
consumers then start where auto.offset.reset (consume --from-beginning) says. Stop them first:
a running consumer of the group would commit its position again.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(_ *cobra.Command, groups []string) error {
			return env.withConn(func(ctx context.Context, c *client.Conn) error {
				var resp wire.DeleteGroupsResponse
				if err := c.Call(ctx, &wire.DeleteGroupsRequest{Groups: groups}, &resp); err != nil {
					return err
				}
				var deleted []string
				var errs []error
				for _, r := range resp.Results {
					if r.ErrorCode == wire.NoError {
						deleted = append(deleted, "'"+r.GroupID+"'")
						continue
					}
					errs = append(errs, fmt.Errorf("group %s: %w", r.GroupID, r.ErrorCode))
				}
				if len(deleted) > 0 {
					fmt.Fprintf(parent.OutOrStdout(), "Deletion of requested consumer groups (%s) was successful.\n", strings.Join(deleted, ", "))
				}
				return errors.Join(errs...)
			})
		},
	}
}
