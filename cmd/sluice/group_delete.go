package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluicemq/sluice/client"
)

// groupDeleteCmd is `group delete`, as kafka-consumer-groups --delete.
func groupDeleteCmd(parent *cobra.Command, env *adminEnv) *cobra.Command {
	return &cobra.Command{
		Use:   "delete GROUP...",
		Short: "Delete consumer groups and their committed offsets",
		Long: `Delete consumer groups, as kafka-consumer-groups --delete: each group's committed offsets
and state, at its coordinator. Its consumers then start where auto.offset.reset (consume
--from-beginning) says. The coordinator refuses a group that has members (NON_EMPTY_GROUP):
stop its consumers first.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(_ *cobra.Command, groups []string) error {
			return env.withAdmin(func(ctx context.Context, a *client.Admin) error {
				results := a.DeleteGroups(ctx, groups...)
				var deleted []string
				var errs []error
				for _, g := range groups {
					if err := results[g]; err != nil {
						errs = append(errs, err)
						continue
					}
					deleted = append(deleted, "'"+g+"'")
				}
				if len(deleted) > 0 {
					fmt.Fprintf(parent.OutOrStdout(), "Deletion of requested consumer groups (%s) was successful.\n", strings.Join(deleted, ", "))
				}
				return errors.Join(errs...)
			})
		},
	}
}
