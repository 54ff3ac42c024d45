package main

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// clockTicks is Linux's USER_HZ, the unit of /proc/<pid>/stat times; it is 100
// on every Linux architecture Go runs on.
const clockTicks = 100

// procCPU is the user+system CPU time the processes have used so far, read from
// /proc/<pid>/stat (10 ms resolution, so it is divided over many requests).
func procCPU(pids ...int) time.Duration {
	var ticks uint64
	for _, pid := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			continue
		}
		// The command name may hold spaces and parentheses; fields resume after the last ')'.
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) < 13 {
			continue
		}
		utime, _ := strconv.ParseUint(fields[11], 10, 64) // field 14 of stat
		stime, _ := strconv.ParseUint(fields[12], 10, 64) // field 15
		ticks += utime + stime
	}
	return time.Duration(ticks) * time.Second / clockTicks
}

// procRSS is the process's resident set size in bytes (VmRSS).
func procRSS(pid int) int64 {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// withChildren is pid and the processes whose parent it is (nginx's workers).
func withChildren(pid int) []int {
	pids := []int{pid}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			child, _ := strconv.Atoi(filepath.Base(filepath.Dir(path)))
			pids = append(pids, child)
		}
	}
	return pids
}

// named is the processes whose command name is name (Postgres's server and
// its backends are all "postgres").
func named(name string) []int {
	var pids []int
	comms, _ := filepath.Glob("/proc/[0-9]*/comm")
	for _, path := range comms {
		b, err := os.ReadFile(path)
		if err == nil && strings.TrimSpace(string(b)) == name {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(path)))
			pids = append(pids, pid)
		}
	}
	return pids
}

// redisCPU is the Redis server's own CPU time so far (INFO cpu). The server is
// shared, so a delta over a phase includes anyone else's use of it.
func redisCPU(ctx context.Context, r *redis.Client) time.Duration {
	info, err := r.Info(ctx, "cpu").Result()
	if err != nil {
		return 0
	}
	var total float64
	for _, line := range strings.Split(info, "\r\n") {
		name, v, ok := strings.Cut(line, ":")
		if ok && (name == "used_cpu_sys" || name == "used_cpu_user") {
			f, _ := strconv.ParseFloat(v, 64)
			total += f
		}
	}
	return time.Duration(total * float64(time.Second))
}

// raiseFileLimit lifts this process's open-file soft limit to the hard one. Go
// does that by itself but hands children the original limit; setting it
// explicitly lets the gateways and the mock inherit it too, which the memory
// scenario's thousands of connections need.
func raiseFileLimit() (uint64, error) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, err
	}
	l.Cur = l.Max
	return l.Cur, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
}
