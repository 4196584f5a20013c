package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/net/wire"
)

// TestFullDiskRecoversWithoutARestart runs `sluice serve` with its data on a 64 MiB tmpfs and
// the default disk-space settings (degraded below 2 % of the filesystem, alert below 5 %, a
// ballast of 2 %). Produce fills the disk until the broker refuses it with the retriable
// KAFKA_STORAGE_ERROR saying the disk is full; `sluice topic delete` still commits through
// raft (the ballast's space is there for it) and the broker deletes the topic's data; produce
// then resumes by itself, no log having stopped; and SIGTERM exits 0. It needs root, to mount
// the tmpfs, and is skipped, saying so, without it.
func TestFullDiskRecoversWithoutARestart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	mnt := filepath.Join(t.TempDir(), "fs")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=64m"); err != nil {
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
			t.Skipf("mounting a 64 MiB tmpfs for a small filesystem is not permitted here (needs root): %v", err)
		}
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(mnt, 0); err != nil {
			t.Errorf("unmount %s: %v", mnt, err)
		}
	})
	bin := buildSluice(t)
	dataDir := filepath.Join(mnt, "data")
	proc, addr, logs := serve(t, bin, dataDir)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, err := client.NewAdmin(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for _, name := range []string{"fill", "keep", "more"} {
		if err := a.CreateTopic(ctx, client.TopicSpec{Name: name, Partitions: 1}); err != nil {
			t.Fatal(err)
		}
	}
	c, err := client.Dial(ctx, addr, "fulldisk")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	big := bigBatch(t, 256<<10)
	produceTo := func(topic string, recs []byte) wire.ProduceResponsePartition {
		var resp wire.ProduceResponse
		err := c.Call(ctx, &wire.ProduceRequest{Acks: wire.AcksAll, TimeoutMs: 10000, Topics: []wire.ProduceRequestTopic{
			{Topic: topic, Partitions: []wire.ProduceRequestPartition{{Partition: 0, Records: append([]byte(nil), recs...)}}},
		}}, &resp)
		if err != nil {
			t.Fatalf("produce to %s: %v\n%s", topic, err, logs.String())
		}
		return resp.Topics[0].Partitions[0]
	}
	if r := produceTo("keep", big); r.ErrorCode != wire.NoError {
		t.Fatalf("first produce: %v", r.ErrorCode)
	}

	// Fill the disk: 64 MiB at most, in 256 KiB batches.
	var refused wire.ProduceResponsePartition
	accepted := 0
	for i := 0; ; i++ {
		if i > 64<<20/len(big)+16 {
			t.Fatalf("%d batches of %d bytes accepted on a 64 MiB filesystem, none refused\n%s", accepted, len(big), logs.String())
		}
		r := produceTo("fill", big)
		if r.ErrorCode != wire.NoError {
			refused = r
			break
		}
		accepted++
	}
	msg := ""
	if refused.ErrorMessage != nil {
		msg = *refused.ErrorMessage
	}
	if refused.ErrorCode != wire.ErrKafkaStorageError || !refused.ErrorCode.Retriable() || !strings.Contains(msg, "disk full") || !strings.Contains(msg, "free") {
		t.Fatalf("produce on a full disk: %v %q, want a retriable KAFKA_STORAGE_ERROR saying the disk is full and how much is free\n%s", refused.ErrorCode, msg, logs.String())
	}
	t.Logf("%d batches of %d bytes accepted before: %s", accepted, len(big), msg)
	if _, err := os.Stat(filepath.Join(dataDir, "ballast")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("ballast file still there on a full disk: %v", err)
	}

	// Delete the topic that filled it, with the CLI, as an operator would.
	deleteTopic := func(name string) {
		t.Helper()
		cmd := rootCmd()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs([]string{"topic", "delete", name, "--broker", addr})
		if err := cmd.Execute(); err != nil {
			t.Fatalf("topic delete %s on a full disk: %v: %s\n%s", name, err, out.String(), logs.String())
		}
	}
	deleteTopic("fill")
	t.Log("topic deleted")

	// Produce resumes without a restart once the broker has deleted the data.
	produceResumes := func(why string) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; {
			r := produceTo("keep", big)
			if r.ErrorCode == wire.NoError {
				break
			}
			if r.ErrorCode != wire.ErrKafkaStorageError || time.Now().After(deadline) {
				t.Fatalf("produce after %s: %v\n%s", why, r.ErrorCode, logs.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
		for deadline := time.Now().Add(10 * time.Second); ; {
			if _, err := os.Stat(filepath.Join(dataDir, "ballast")); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no ballast file once space returned after %s\n%s", why, logs.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	produceResumes("the topic was deleted")
	t.Log("produce resumed")
	if s := logs.String(); strings.Contains(s, "log stopped") {
		t.Fatalf("a log stopped on the full disk:\n%s", s)
	}

	// Now something else takes every last byte: the broker's own margin is gone, and only the
	// ballast's space is left, for raft to commit a deletion and for the shutdown's recovery
	// points (one small file per log, 50 of them the offsets topic's) and clean-shutdown
	// marker. Without the ballast those fail with ENOSPC (tmpfs allocates a page per file),
	// and the shutdown exits 1.
	filler := filepath.Join(mnt, "filler")
	fillDisk(t, filler)
	for deadline := time.Now().Add(10 * time.Second); ; {
		_, err := os.Stat(filepath.Join(dataDir, "ballast"))
		if r := produceTo("keep", big[:0]); r.ErrorCode == wire.ErrKafkaStorageError && errors.Is(err, os.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not degraded, or the ballast not released, on a disk with no free byte\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Log("degraded by a filler file, ballast released")
	deleteTopic("more")
	t.Log("topic deleted with only the ballast's space")

	status, killedBy := exitAfterSignal(t, proc, syscall.SIGTERM, logs)
	if status != 0 {
		t.Fatalf("exit after SIGTERM on a full disk: status %d (signal %v)\n%s", status, killedBy, logs.String())
	}
	if s := logs.String(); strings.Contains(s, "log stopped") {
		t.Fatalf("a log stopped on the full disk:\n%s", s)
	}
	if _, err := os.Stat(filepath.Join(dataDir, ".clean-shutdown")); err != nil {
		t.Fatalf("no clean-shutdown marker after SIGTERM on a full disk: %v\n%s", err, logs.String())
	}
}

// bigBatch is one record batch of about size bytes (incompressible enough: not compressed).
func bigBatch(t *testing.T, size int) []byte {
	t.Helper()
	value := make([]byte, size)
	for i := range value {
		value[i] = byte(i*7 + i>>8)
	}
	bl := batch.NewBuilder(batch.DefaultBuilderOptions())
	bl.Append(&batch.Record{Timestamp: time.Now().UnixMilli(), Value: value})
	recs, err := bl.Build()
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), recs...)
}

// fillDisk writes path until the filesystem has no byte left (ENOSPC).
func fillDisk(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for range 1 << 14 { // 1 GiB at most
		if _, err := f.Write(chunk); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return
			}
			t.Fatal(err)
		}
	}
	t.Fatal("1 GiB written to a 64 MiB filesystem")
}
