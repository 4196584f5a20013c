// Command sluice is Sluice's one binary: the broker (serve) and its command-line tools. It only
// parses flags and wires packages together.
package main

import (
	"fmt"
	"os"

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
	root.AddCommand(serveCmd(), topicCmd(), produceCmd(), consumeCmd(), benchCmd())
	return root
}
