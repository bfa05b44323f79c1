package bench

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/minkhq/mink/pkg/roleproc"
)

// ProfileCPU runs fn under a CPU profile written to dir/name.pprof and summarises it by
// package. The profile is of this process: with the default in-process Kafka broker it
// includes kfake serving the reads, which shows under its own package.
func ProfileCPU(dir, name string, fn func() error) (Profile, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Profile{}, err
	}
	path := filepath.Join(dir, name+".pprof")
	f, err := os.Create(path)
	if err != nil {
		return Profile{}, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return Profile{}, err
	}
	ferr := fn()
	pprof.StopCPUProfile()
	if err := f.Close(); err != nil {
		return Profile{}, err
	}
	if ferr != nil {
		return Profile{}, ferr
	}
	return Profile{Name: name, Path: path, Top: pprofSummary(path)}, nil
}

// repeatFor runs fn until at least d has passed, so a profile has enough samples.
func repeatFor(d time.Duration, fn func() error) error {
	for start := time.Now(); time.Since(start) < d; {
		if err := fn(); err != nil {
			return err
		}
	}
	return nil
}

// pkgOf is the package of a Go symbol: "github.com/a/b.(*T).m" is "github.com/a/b".
func pkgOf(sym string) string {
	sym = strings.TrimSuffix(strings.TrimSpace(sym), ".abi0")
	slash := strings.LastIndexByte(sym, '/')
	if i := strings.IndexByte(sym[slash+1:], '.'); i >= 0 {
		return sym[:slash+1+i]
	}
	return sym
}

// bucketOf is pkgOf, with the runtime split by what its time is for.
func bucketOf(sym string) string {
	p := pkgOf(sym)
	if p != "runtime" && !strings.HasPrefix(p, "internal/runtime/gc") {
		return p
	}
	fn := strings.TrimPrefix(strings.TrimSpace(sym), "runtime.")
	switch {
	case strings.HasPrefix(p, "internal/runtime/gc"):
		return "runtime: GC and allocation"
	case strings.HasPrefix(fn, "mem"):
		return "runtime: memmove, memclr (copying, zeroing)"
	}
	for _, gc := range []string{"gc", "scan", "mark", "sweep", "greyobject", "findObject", "heapBits", "malloc", "newobject",
		"makeslice", "growslice", "(*mspan)", "(*mheap)", "(*mcache)", "(*mcentral)", "(*gcWork)", "(*gcBits)", "wbBuf", "bulkBarrier",
		"typePointers", "spanOf", "(*pageAlloc)", "(*pallocBits)", "nextFreeFast", "(*sweepLocked)", "(*spanSet)", "(*unwinder)",
		"tryDeferToSpanScan", "(*stkframe)", "pcvalue", "funcInfo", "findfunc", "step", "(*mSpanStateBox)", "writeBarrier", "(*gcControllerState)"} {
		if strings.HasPrefix(fn, gc) {
			return "runtime: GC and allocation"
		}
	}
	return "runtime: scheduler, timers, syscalls, other"
}

// pprofSummary is a profile's time by package: flat (where samples landed) and
// cumulative (packages anywhere on the stack), from go tool pprof -traces.
func pprofSummary(path string) string {
	out, err := exec.Command(roleproc.GoBin(), "tool", "pprof", "-traces", path).Output()
	if err != nil {
		return "go tool pprof -traces: " + err.Error()
	}
	flat, cum := map[string]time.Duration{}, map[string]time.Duration{}
	var total, dur time.Duration
	var (
		cur   time.Duration
		stack map[string]bool
	)
	flush := func() {
		for p := range stack {
			cum[p] += cur
		}
		stack = nil
	}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "Duration:"):
			if f := strings.Fields(line); len(f) > 1 {
				dur, _ = time.ParseDuration(strings.TrimSuffix(f[1], ","))
			}
		case strings.HasPrefix(line, "-----------+"):
			flush()
		case strings.HasPrefix(line, "      ") || strings.HasPrefix(line, "     "):
			f := strings.Fields(line)
			if len(f) == 0 {
				continue
			}
			if stack == nil && len(f) >= 2 {
				v, err := time.ParseDuration(f[0])
				if err != nil {
					continue
				}
				cur, total = v, total+v
				stack = map[string]bool{}
				flat[bucketOf(f[1])] += v
				stack[pkgOf(f[1])] = true
				continue
			}
			if stack != nil {
				stack[pkgOf(f[0])] = true
			}
		}
	}
	flush()
	if total == 0 {
		return "no samples"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s of CPU samples in %s of wall time\n", total.Round(time.Millisecond), dur.Round(time.Millisecond))
	table := func(title string, m map[string]time.Duration) {
		fmt.Fprintf(&b, "\n%s:\n", title)
		keys := slices.SortedFunc(maps.Keys(m), func(a, b string) int { return cmp.Compare(m[b], m[a]) })
		for _, k := range keys[:min(14, len(keys))] {
			fmt.Fprintf(&b, "  %5.1f%%  %s\n", 100*float64(m[k])/float64(total), k)
		}
	}
	table("flat, by package (where the samples landed)", flat)
	table("cumulative, by package (on the stack)", cum)
	return strings.TrimRight(b.String(), "\n")
}

// Perf records CPU samples of other processes (the role binaries serve no pprof) with
// Linux perf while a measurement repeats.
type Perf struct {
	name, path string
	labels     map[int]string // pid to what it is
	cmd        *exec.Cmd
}

// StartPerf attaches perf to the processes; nil (and no error) when perf is not
// installed. labels name the pids in the summary.
func StartPerf(dir, name string, labels map[int]string) (*Perf, error) {
	bin, err := exec.LookPath("perf")
	if err != nil || len(labels) == 0 {
		return nil, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var ps []string
	for _, p := range slices.Sorted(maps.Keys(labels)) {
		ps = append(ps, strconv.Itoa(p))
	}
	p := &Perf{name: name, path: filepath.Join(dir, name+".perf.data"), labels: labels}
	p.cmd = exec.Command(bin, "record", "-F", "999", "-g", "-o", p.path, "-p", strings.Join(ps, ","))
	p.cmd.Stdout, p.cmd.Stderr = io.Discard, io.Discard
	if err := p.cmd.Start(); err != nil {
		return nil, nil
	}
	time.Sleep(300 * time.Millisecond) // perf attaches to every thread before sampling
	return p, nil
}

// Stop ends the recording and summarises it per process, by package ("kernel" for
// kernel symbols).
func (p *Perf) Stop() Profile {
	if p == nil {
		return Profile{Name: "perf not available", Top: "install Linux perf to profile the role processes"}
	}
	p.cmd.Process.Signal(syscall.SIGINT)
	p.cmd.Wait()
	var b strings.Builder
	for _, pid := range slices.Sorted(maps.Keys(p.labels)) {
		out, err := exec.Command("perf", "report", "-i", p.path, "--stdio", "--no-children", "--sort", "sym",
			"-g", "none", "--pid", strconv.Itoa(pid), "--percent-limit", "0").Output()
		if err != nil {
			fmt.Fprintf(&b, "%s: perf report: %v\n", p.labels[pid], err)
			continue
		}
		flat := map[string]float64{}
		samples := ""
		for _, l := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(l, "# Samples:") {
				samples = strings.TrimPrefix(l, "# ")
			}
			f := strings.Fields(l)
			if len(f) < 3 || !strings.HasSuffix(f[0], "%") {
				continue
			}
			pct, err := strconv.ParseFloat(strings.TrimSuffix(f[0], "%"), 64)
			if err != nil {
				continue
			}
			pkg := "kernel"
			if f[1] != "[k]" {
				pkg = bucketOf(f[2])
			}
			flat[pkg] += pct
		}
		share := 0.0
		for _, v := range flat {
			share += v
		}
		fmt.Fprintf(&b, "%s: %.0f%% of the %s; flat by package:\n", p.labels[pid], min(share, 100), strings.ToLower(samples))
		keys := slices.SortedFunc(maps.Keys(flat), func(a, b string) int { return cmp.Compare(flat[b], flat[a]) })
		for _, k := range keys[:min(12, len(keys))] {
			fmt.Fprintf(&b, "  %5.1f%%  %s\n", 100*flat[k]/max(share, 1e-9), k)
		}
		b.WriteString("\n")
	}
	return Profile{Name: p.name + " (perf, role processes)", Path: p.path, Top: strings.TrimRight(b.String(), "\n"), Perf: true}
}
