package main

import (
	"github.com/spf13/cobra"
)

// reassignCmd is kafka-reassign-partitions: its subcommands plan and carry out moves of
// partitions' replicas between brokers, with Kafka's JSON files (package reassign).
func reassignCmd() *cobra.Command {
	cmd, env := adminCommand("reassign", "Move partitions' replicas between brokers: generate a plan, execute, verify, cancel and list moves")
	cmd.Long = `Move partitions' replicas between brokers, as kafka-reassign-partitions does, with its JSON
files: generate proposes a balanced plan for some topics over some brokers; the other
subcommands start, check, cancel and list the moves of a plan.`
	cmd.AddCommand(
		reassignGenerateCmd(cmd, env),
		reassignExecuteCmd(cmd, env), // these four: reassign_execute.go
		reassignVerifyCmd(cmd, env),
		reassignCancelCmd(cmd, env),
		reassignListCmd(cmd, env),
	)
	return cmd
}
