package cli

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"runtime/debug"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app/config"
)

func TestDescribeBuildNamesCommit(t *testing.T) {
	t.Parallel()
	build := func(version string, settings ...string) *debug.BuildInfo {
		info := &debug.BuildInfo{Main: debug.Module{Path: "github.com/tollgate/tollgate", Version: version}}
		for i := 0; i+1 < len(settings); i += 2 {
			info.Settings = append(info.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
		}
		return info
	}
	for _, tt := range []struct {
		info *debug.BuildInfo
		want string
	}{
		{build("v1.2.3", "vcs.revision", "0123abc", "vcs.modified", "false"), "v1.2.3 commit 0123abc"},
		{build("(devel)", "vcs.revision", "0123abc", "vcs.modified", "true"), "(devel) commit 0123abc+dirty"},
		{build("", "vcs.revision", "0123abc"), "(devel) commit 0123abc"},
		{build("v0.0.0-20261201000000-0123abc"), "v0.0.0-20261201000000-0123abc (no VCS commit stamped)"},
	} {
		if got := describeBuild(tt.info); got != tt.want {
			t.Errorf("describeBuild(%v %v) = %q, want %q", tt.info.Main.Version, tt.info.Settings, got, tt.want)
		}
	}
}

func TestLogsWriteDurationsAsText(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := newLogger(config.Config{LogLevel: slog.LevelInfo}, &buf)
	log.Info("upstream slow", "timeout", 30*time.Second, slog.Group("retry", "backoff", 50*time.Millisecond), "attempts", 3)
	var line struct {
		Timeout  any                   `json:"timeout"`
		Retry    struct{ Backoff any } `json:"retry"`
		Attempts any                   `json:"attempts"`
	}
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("%v in %s", err, buf.Bytes())
	}
	if line.Timeout != "30s" || line.Retry.Backoff != "50ms" || line.Attempts != float64(3) {
		t.Errorf("logged %s; want timeout \"30s\", retry.backoff \"50ms\" and attempts still the number 3", buf.Bytes())
	}
}
