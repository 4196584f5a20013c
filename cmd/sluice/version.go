package main

import (
	"fmt"
	"io"
	"runtime/debug"

	"github.com/spf13/cobra"
)

func versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print sluice's version, the Go version it was built with and its commit",
		Args:  noArgs(""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			bi, ok := debug.ReadBuildInfo()
			if !ok {
				// A binary built without module support; nothing to say but that.
				fmt.Fprintln(cmd.OutOrStdout(), "sluice (no build information)")
				return nil
			}
			writeVersion(cmd.OutOrStdout(), bi)
			return nil
		},
	}
}

// writeVersion prints the module version ("(devel)" for a build from a checkout), the Go
// version, and the commit the VCS stamp recorded, with "-dirty" for uncommitted changes.
func writeVersion(w io.Writer, bi *debug.BuildInfo) {
	fmt.Fprintf(w, "sluice %s\n", bi.Main.Version)
	fmt.Fprintf(w, "go: %s\n", bi.GoVersion)
	var rev, at string
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return
	}
	if dirty {
		rev += "-dirty"
	}
	if at != "" {
		rev += " (" + at + ")"
	}
	fmt.Fprintf(w, "commit: %s\n", rev)
}
