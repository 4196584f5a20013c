package main

import "github.com/spf13/cobra"

func clusterLocalCmd() *cobra.Command { return &cobra.Command{Use: "local"} }
