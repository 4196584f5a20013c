package main

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/internal/vfs"
)

// diskFullPoll is how often serve looks for the --simulate-power-loss control file.
const diskFullPoll = 100 * time.Millisecond

// powerLoss is serve's --simulate-power-loss: the partition logs on a vfs.PowerLossFS
// journalled into journal, and a goroutine that keeps the file system's full disk on while
// the control file journal+".disk-full" exists. stop ends the goroutine, waits for it and
// closes the journal.
type powerLoss struct {
	fs   *vfs.PowerLossFS
	done chan struct{}
	wg   sync.WaitGroup
}

func startPowerLoss(journal string, cfg *broker.Config) (*powerLoss, error) {
	plfs, err := vfs.NewPowerLossFS(journal)
	if err != nil {
		return nil, err
	}
	cfg.SetLogFS(plfs)
	cfg.Logger.Warn("simulating power loss: the logs' unsynced bytes are lost at a kill once vfs.RollBack runs on the journal (slower: every sync journals)",
		"journal", journal, "disk full while this exists", journal+".disk-full")
	p := &powerLoss{fs: plfs, done: make(chan struct{})}
	p.wg.Add(1)
	go p.pollDiskFull(journal+".disk-full", cfg.Logger)
	return p, nil
}

func (p *powerLoss) pollDiskFull(control string, log *slog.Logger) {
	defer p.wg.Done()
	t := time.NewTicker(diskFullPoll)
	defer t.Stop()
	for {
		_, err := os.Stat(control)
		full := err == nil
		if full != p.fs.DiskFull() && (full || errors.Is(err, fs.ErrNotExist)) {
			p.fs.SetDiskFull(full)
			log.Warn("simulated disk", "full", full, "control file", control)
		}
		select {
		case <-p.done:
			return
		case <-t.C:
		}
	}
}

func (p *powerLoss) stop() error {
	if p == nil {
		return nil
	}
	close(p.done)
	p.wg.Wait()
	return p.fs.Close()
}
