package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/internal/vfs"
	"github.com/sluicemq/sluice/net/wire"
)

// servePowerLoss starts `sluice serve --simulate-power-loss journal` on a unix socket and
// waits until it answers.
func servePowerLoss(t *testing.T, bin, dataDir, journal string) (*exec.Cmd, string, *lockedBuffer) {
	t.Helper()
	sock := filepath.Join(dataDir, "s.sock")
	var logs lockedBuffer
	cmd := exec.Command(bin, "serve", "--data-dir", dataDir, "--listen", "", "--unix", sock, "--simulate-power-loss", journal)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := "unix://" + sock
	for deadline := time.Now().Add(30 * time.Second); ; {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		a, err := client.NewAdmin(ctx, addr)
		if err == nil {
			_, err = a.ListTopics(ctx)
			a.Close()
		}
		cancel()
		if err == nil {
			return cmd, addr, &logs
		}
		if time.Now().After(deadline) {
			t.Fatalf("broker did not come up: %v\n%s", err, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// `sluice serve --simulate-power-loss` is what `sluice chaos` relies on for its disk faults:
// while JOURNAL.disk-full exists produce fails, and after it is removed produce works again
// without a restart; a kill -9 followed by vfs.RollBack of the journal (a torn prefix of the
// unsynced bytes kept) is a power cut after which every acks=all record is still there, in
// order, and served whole.
func TestServeSimulatePowerLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildSluice(t)
	dir := filepath.Join(t.TempDir(), "data")
	journal := filepath.Join(filepath.Dir(dir), "journal")
	proc, addr, logs := servePowerLoss(t, bin, dir, journal)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	a, err := client.NewAdmin(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.CreateTopic(ctx, client.TopicSpec{Name: "durable", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	a.Close()
	c, err := client.Dial(ctx, addr, "powerloss")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var want []string
	produceUntil := func(ok bool, what string) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; {
			v := fmt.Sprintf("record-%d", len(want))
			res := produceAll(t, c, "durable", v)
			if res.ErrorCode == wire.NoError {
				want = append(want, v)
			}
			if (res.ErrorCode == wire.NoError) == ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: produce still %v after 30 s\n%s", what, res.ErrorCode, logs.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	produceUntil(true, "before the full disk")
	if err := os.WriteFile(journal+".disk-full", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	produceUntil(false, "disk full")
	if err := os.Remove(journal + ".disk-full"); err != nil {
		t.Fatal(err)
	}
	produceUntil(true, "disk freed")
	for range 200 {
		v := fmt.Sprintf("record-%d", len(want))
		if res := produceAll(t, c, "durable", v); res.ErrorCode != wire.NoError {
			t.Fatalf("produce %s: %v", v, res.ErrorCode)
		}
		want = append(want, v)
	}
	// More produce, cut off by the kill: the ones answered before it are acknowledged too.
	landed := make(chan struct{})
	late := make(chan string, 100000)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ctx.Err() == nil; i++ {
			v := fmt.Sprintf("late-%d", i)
			if res := produceAll(t, c, "durable", v); res.ErrorCode != wire.NoError {
				return
			}
			late <- v
			if i == 10 {
				close(landed)
			}
		}
	}()
	select { // some of them landed (and more are in flight)
	case <-landed:
	case <-time.After(30 * time.Second):
		t.Fatal("no produce answered in 30 s")
	}
	if err := proc.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = proc.Wait()
	<-done
	close(late)
	for v := range late {
		want = append(want, v)
	}
	rep, err := vfs.RollBack(journal, vfs.CrashOptions{Rand: rand.New(rand.NewPCG(1, 2)), KeepUnsyncedPrefix: true, TearLastPage: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("roll back: %+v", rep)

	_, addr, logs = serve(t, bin, dir)
	c2, err := client.Dial(ctx, addr, "powerloss-check")
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	got := checkAcknowledgedKept(ctx, t, c2, "durable", want, "the power cut", logs)
	t.Logf("%d acknowledged, %d present after the power cut", len(want), len(got))
}
