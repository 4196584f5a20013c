package cluster

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// hclogAdapter sends hashicorp/raft's hclog output to a slog.Logger.
// Messages below floor are dropped: raft is chatty at info level about
// routine state changes that a broker operator rarely needs.
type hclogAdapter struct {
	log   *slog.Logger
	floor slog.Leveler
	name  string
	args  []any
}

var _ hclog.Logger = (*hclogAdapter)(nil)

func newHCLogAdapter(l *slog.Logger, floor slog.Leveler) *hclogAdapter {
	return &hclogAdapter{log: l, floor: floor, name: "raft"}
}

func slogLevel(l hclog.Level) slog.Level {
	switch l {
	case hclog.Trace:
		return slog.LevelDebug - 4
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Info, hclog.NoLevel:
		return slog.LevelInfo
	case hclog.Warn:
		return slog.LevelWarn
	default:
		return slog.LevelError
	}
}

func (a *hclogAdapter) enabled(l slog.Level) bool {
	return l >= a.floor.Level() && a.log.Enabled(context.Background(), l)
}

func (a *hclogAdapter) Log(level hclog.Level, msg string, args ...any) {
	if level == hclog.Off {
		return
	}
	l := slogLevel(level)
	if !a.enabled(l) {
		return
	}
	all := make([]any, 0, 2+len(a.args)+len(args))
	all = append(all, "component", a.name)
	all = append(all, a.args...)
	for _, arg := range args {
		// hclog.Fmt values are deferred Sprintf calls; slog would print the
		// raw format slice.
		if f, ok := arg.(hclog.Format); ok && len(f) > 0 {
			if format, ok := f[0].(string); ok {
				arg = fmt.Sprintf(format, f[1:]...)
			}
		}
		all = append(all, arg)
	}
	a.log.Log(context.Background(), l, msg, all...)
}

func (a *hclogAdapter) Trace(msg string, args ...any) { a.Log(hclog.Trace, msg, args...) }
func (a *hclogAdapter) Debug(msg string, args ...any) { a.Log(hclog.Debug, msg, args...) }
func (a *hclogAdapter) Info(msg string, args ...any)  { a.Log(hclog.Info, msg, args...) }
func (a *hclogAdapter) Warn(msg string, args ...any)  { a.Log(hclog.Warn, msg, args...) }
func (a *hclogAdapter) Error(msg string, args ...any) { a.Log(hclog.Error, msg, args...) }

func (a *hclogAdapter) IsTrace() bool { return a.enabled(slogLevel(hclog.Trace)) }
func (a *hclogAdapter) IsDebug() bool { return a.enabled(slog.LevelDebug) }
func (a *hclogAdapter) IsInfo() bool  { return a.enabled(slog.LevelInfo) }
func (a *hclogAdapter) IsWarn() bool  { return a.enabled(slog.LevelWarn) }
func (a *hclogAdapter) IsError() bool { return a.enabled(slog.LevelError) }

func (a *hclogAdapter) ImpliedArgs() []any { return a.args }

func (a *hclogAdapter) With(args ...any) hclog.Logger {
	c := *a
	c.args = append(append([]any(nil), a.args...), args...)
	return &c
}

func (a *hclogAdapter) Name() string { return a.name }

func (a *hclogAdapter) Named(name string) hclog.Logger {
	c := *a
	if c.name != "" {
		c.name += "." + name
	} else {
		c.name = name
	}
	return &c
}

func (a *hclogAdapter) ResetNamed(name string) hclog.Logger {
	c := *a
	c.name = name
	return &c
}

// SetLevel is ignored: levels belong to the slog handler and Config.RaftLogLevel.
func (a *hclogAdapter) SetLevel(hclog.Level) {}

func (a *hclogAdapter) GetLevel() hclog.Level {
	switch l := a.floor.Level(); {
	case l < slog.LevelDebug:
		return hclog.Trace
	case l < slog.LevelInfo:
		return hclog.Debug
	case l < slog.LevelWarn:
		return hclog.Info
	case l < slog.LevelError:
		return hclog.Warn
	default:
		return hclog.Error
	}
}

func (a *hclogAdapter) StandardLogger(*hclog.StandardLoggerOptions) *log.Logger {
	if !a.IsInfo() {
		return log.New(io.Discard, "", 0)
	}
	return slog.NewLogLogger(a.log.Handler(), slog.LevelInfo)
}

func (a *hclogAdapter) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	return a.StandardLogger(opts).Writer()
}
