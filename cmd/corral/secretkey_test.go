package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"corral/internal/secrets"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// serveOnce starts the server on data, stops it as soon as it serves, and
// returns what it logged and the error it stopped with.
func serveOnce(t *testing.T, data, secretKey string) (string, error) {
	t.Helper()
	var log syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- runServer(ctx, serveConfig{Addr: "127.0.0.1:0", Data: data, Role: "all", Signup: "closed", ChangeTTL: time.Hour, SecretKey: secretKey},
			slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug})), ready)
	}()
	select {
	case <-ready:
		cancel()
		return log.String(), <-done
	case err := <-done:
		return log.String(), err
	}
}

func TestSecretKeyAtStart(t *testing.T) {
	t.Run("made 0600 on the first start, reused on the next, never logged", func(t *testing.T) {
		data := t.TempDir()
		log, err := serveOnce(t, data, "")
		if err != nil {
			t.Fatalf("first start: %v", err)
		}
		path := filepath.Join(data, secrets.KeyFile)
		st, err := os.Stat(path)
		if err != nil || st.Mode().Perm() != 0o600 || st.Size() != secrets.KeySize {
			t.Fatalf("key file after the first start: %v %v", st, err)
		}
		key, _ := os.ReadFile(path)
		log2, err := serveOnce(t, data, "")
		if err != nil {
			t.Fatalf("second start: %v", err)
		}
		if again, _ := os.ReadFile(path); !bytes.Equal(again, key) {
			t.Fatal("the second start replaced the key")
		}
		for _, enc := range []string{base64.StdEncoding.EncodeToString(key), base64.RawStdEncoding.EncodeToString(key), hex.EncodeToString(key)} {
			if strings.Contains(log+log2, enc) {
				t.Fatalf("the log carries the key:\n%s", log+log2)
			}
		}
	})
	t.Run("refused when others may read it", func(t *testing.T) {
		data := t.TempDir()
		path := filepath.Join(data, secrets.KeyFile)
		if err := os.WriteFile(path, bytes.Repeat([]byte{1}, secrets.KeySize), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := serveOnce(t, data, ""); err == nil || !strings.Contains(err.Error(), "chmod 600") {
			t.Fatalf("start with a 0644 key file = %v, want a refusal saying chmod 600", err)
		}
	})
	t.Run("from CORRAL_SECRET_KEY: no file is made", func(t *testing.T) {
		data := t.TempDir()
		env := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0x5a}, secrets.KeySize))
		log, err := serveOnce(t, data, env)
		if err != nil {
			t.Fatalf("start with CORRAL_SECRET_KEY: %v", err)
		}
		if _, err := os.Stat(filepath.Join(data, secrets.KeyFile)); !os.IsNotExist(err) {
			t.Fatalf("a key file was made although CORRAL_SECRET_KEY was given: %v", err)
		}
		if strings.Contains(log, env) {
			t.Fatal("the log carries CORRAL_SECRET_KEY")
		}
	})
	t.Run("a malformed CORRAL_SECRET_KEY is refused without being repeated", func(t *testing.T) {
		bad := base64.StdEncoding.EncodeToString([]byte("sixteen byte key"))
		_, err := serveOnce(t, t.TempDir(), bad)
		if err == nil || strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "CORRAL_SECRET_KEY") {
			t.Fatalf("start with a 16-byte key = %v, want a refusal naming CORRAL_SECRET_KEY and not its value", err)
		}
	})
}
