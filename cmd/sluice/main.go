// Command sluice is Sluice's one binary: the broker (serve) and its command-line tools. It only
// parses flags and wires packages together.
package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

func main() {
	if err := rootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "sluice:", err)
		os.Exit(1)
	}
}

func rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "sluice",
		Short:         "Sluice: a Kafka-style message broker",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(serveCmd(), topicCmd(), groupCmd(), reassignCmd(), leaderElectionCmd(), produceCmd(), consumeCmd(), clusterCmd(), benchCmd(), chaosCmd(), versionCmd())
	// Add cobra's completion command now rather than in Execute, so that the loop below sees
	// it too (it only groups the shells' commands).
	root.InitDefaultCompletionCmd()
	requireSubcommands(root)
	return root
}

// requireSubcommands makes every command under root (root included) that only groups
// subcommands fail when not given one of them. Left to cobra, `sluice topic craete orders`
// prints the help and exits 0, so a script takes the typo for success. Asking for help
// (--help, `sluice help topic`) still succeeds.
func requireSubcommands(cmd *cobra.Command) {
	for _, sub := range cmd.Commands() {
		requireSubcommands(sub)
	}
	if !cmd.HasSubCommands() || cmd.Runnable() {
		return
	}
	cmd.Args = unknownSubcommand
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2 // as cobra's own check at the root: "craete" finds "create"
	}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 1 && args[0] == "help" {
			return cmd.Help() // `sluice topic help`, as `sluice help topic`
		}
		// Nothing was done: the usage (the subcommands there are) goes with the error to
		// stderr, and the exit status is non-zero, as for an unknown subcommand.
		fmt.Fprint(cmd.ErrOrStderr(), cmd.UsageString())
		return fmt.Errorf("missing subcommand for %q", cmd.CommandPath())
	}
}

// unknownSubcommand refuses arguments to a command that only groups subcommands: Find leaves
// the first word that names none of them as an argument.
func unknownSubcommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 || len(args) == 1 && args[0] == "help" {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return fmt.Errorf("%s (see %s --help)", msg, cmd.CommandPath())
}

// noArgs is cobra.NoArgs with a message that says what was wrong: cobra's calls the first
// argument an unknown command (`sluice consume orders`: unknown command "orders" for "sluice
// consume"), which sends a user looking for a subcommand. hint, if any, says where the
// argument may belong.
func noArgs(hint string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		msg := fmt.Sprintf("%s takes no arguments, got %q", cmd.CommandPath(), strings.Join(args, " "))
		if hint != "" {
			msg += ": " + hint
		}
		return errors.New(msg)
	}
}
