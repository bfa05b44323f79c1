package deploytest

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	"github.com/minkhq/mink/pkg/tableschema"
)

const composePath = "docker-compose.yaml"

type composeFile struct {
	Services map[string]*composeService `yaml:"services"`
	Volumes  map[string]any             `yaml:"volumes"`
}

type composeService struct {
	Image         string         `yaml:"image"`
	Build         *composeBuild  `yaml:"build"`
	ContainerName string         `yaml:"container_name"`
	Hostname      string         `yaml:"hostname"`
	Environment   composeEnv     `yaml:"environment"`
	Ports         []composePort  `yaml:"ports"`
	Volumes       []composeMount `yaml:"volumes"`
	Healthcheck   *struct {
		Test    stringList `yaml:"test"`
		Disable bool       `yaml:"disable"`
	} `yaml:"healthcheck"`
	DependsOn       composeDeps `yaml:"depends_on"`
	StopGracePeriod string      `yaml:"stop_grace_period"`
	StopSignal      string      `yaml:"stop_signal"`
	Restart         string      `yaml:"restart"`
	Entrypoint      stringList  `yaml:"entrypoint"`
	Command         stringList  `yaml:"command"`
	Profiles        []string    `yaml:"profiles"`
}

func (s *composeService) healthy() bool {
	return s.Healthcheck != nil && !s.Healthcheck.Disable && len(s.Healthcheck.Test) > 0 &&
		s.Healthcheck.Test[0] != "NONE"
}

func (s *composeService) oneShot() bool { return s.Restart == "" || s.Restart == "no" }

// program is what the service runs, from its build target or else its image.
func (s *composeService) program() (program, bool) {
	if s.Build != nil && s.Build.Target != "" {
		return programByTarget(s.Build.Target)
	}
	return programByImage(s.Image)
}

type composeBuild struct {
	Context    string `yaml:"context"`
	Dockerfile string `yaml:"dockerfile"`
	Target     string `yaml:"target"`
}

func (b *composeBuild) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		b.Context = n.Value
		return nil
	}
	type plain composeBuild
	return n.Decode((*plain)(b))
}

// composeEnv is a service's environment, written as a map or as a list of K=V.
type composeEnv map[string]string

func (e *composeEnv) UnmarshalYAML(n *yaml.Node) error {
	*e = composeEnv{}
	if n.Kind == yaml.SequenceNode {
		var list []string
		if err := n.Decode(&list); err != nil {
			return err
		}
		for _, kv := range list {
			k, v, _ := strings.Cut(kv, "=")
			(*e)[k] = v
		}
		return nil
	}
	var m map[string]any // decoding into a map resolves merge keys (<<: *anchor)
	if err := n.Decode(&m); err != nil {
		return err
	}
	for k, v := range m {
		if v == nil {
			(*e)[k] = ""
		} else {
			(*e)[k] = fmt.Sprint(v)
		}
	}
	return nil
}

// composePort is a published or exposed port, short ("127.0.0.1:8181:8181") or long syntax.
type composePort struct {
	HostIP    string
	Published string // host port or range; "" when Docker picks one
	Target    int
	raw       string
}

func (p *composePort) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.MappingNode {
		var long struct {
			Target    int    `yaml:"target"`
			Published string `yaml:"published"`
			HostIP    string `yaml:"host_ip"`
		}
		if err := n.Decode(&long); err != nil {
			return err
		}
		*p = composePort{HostIP: long.HostIP, Published: long.Published, Target: long.Target, raw: fmt.Sprintf("%+v", long)}
		return nil
	}
	p.raw = n.Value
	s, _, _ := strings.Cut(n.Value, "/")
	i := strings.LastIndexByte(s, ':')
	target := s[i+1:]
	if i >= 0 {
		rest := s[:i]
		if j := strings.LastIndexByte(rest, ':'); j >= 0 {
			p.HostIP, p.Published = rest[:j], rest[j+1:]
		} else {
			p.Published = rest
		}
	}
	t, err := strconv.Atoi(target)
	if err != nil {
		return fmt.Errorf("port %q: container port %q is not a number (ranges are not used here)", n.Value, target)
	}
	p.Target = t
	return nil
}

// composeMount is a volume or bind mount, short ("name:/path:ro") or long syntax.
type composeMount struct {
	Type     string // volume or bind
	Source   string
	Target   string
	ReadOnly bool
}

func (m *composeMount) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.MappingNode {
		type plain struct {
			Type     string `yaml:"type"`
			Source   string `yaml:"source"`
			Target   string `yaml:"target"`
			ReadOnly bool   `yaml:"read_only"`
		}
		var v plain
		if err := n.Decode(&v); err != nil {
			return err
		}
		*m = composeMount(v)
		return nil
	}
	parts := strings.Split(n.Value, ":")
	switch len(parts) {
	case 1:
		*m = composeMount{Type: "volume", Target: parts[0]} // anonymous
	default:
		*m = composeMount{Type: "volume", Source: parts[0], Target: parts[1]}
		if strings.HasPrefix(parts[0], ".") || strings.HasPrefix(parts[0], "/") || strings.HasPrefix(parts[0], "~") {
			m.Type = "bind"
		}
		if len(parts) > 2 {
			m.ReadOnly = slices.Contains(strings.Split(parts[2], ","), "ro")
		}
	}
	return nil
}

// composeDeps is depends_on, as a list of names or a map of name to condition.
type composeDeps map[string]string

func (d *composeDeps) UnmarshalYAML(n *yaml.Node) error {
	*d = composeDeps{}
	if n.Kind == yaml.SequenceNode {
		var list []string
		if err := n.Decode(&list); err != nil {
			return err
		}
		for _, s := range list {
			(*d)[s] = "service_started"
		}
		return nil
	}
	var m map[string]struct {
		Condition string `yaml:"condition"`
	}
	if err := n.Decode(&m); err != nil {
		return err
	}
	for k, v := range m {
		if v.Condition == "" {
			v.Condition = "service_started"
		}
		(*d)[k] = v.Condition
	}
	return nil
}

// stringList is a command, entrypoint or test: a string or a list of strings.
type stringList []string

func (l *stringList) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*l = stringList{n.Value}
		return nil
	}
	var list []string
	if err := n.Decode(&list); err != nil {
		return err
	}
	*l = list
	return nil
}

func loadCompose(t *testing.T, root string) (*composeFile, *yaml.Node) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, composePath))
	if err != nil {
		t.Fatalf("%s: %v", composePath, err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: not YAML: %v", composePath, err)
	}
	var f composeFile
	if err := doc.Decode(&f); err != nil {
		t.Fatalf("%s: %v", composePath, err)
	}
	if len(f.Services) == 0 {
		t.Fatalf("%s: no services", composePath)
	}
	return &f, &doc
}

func TestCompose(t *testing.T) {
	root := repoRoot(t)
	f, doc := loadCompose(t, root)
	d := loadDockerfile(t, root)
	svc := func(name string) string { return fmt.Sprintf("%s: services.%s", composePath, name) }

	// Interpolation: the file must mean the same on every machine, so a literal $ is $$.
	checkNoInterpolation(t, doc)

	// Postgres and Kafka, with health checks and their data on named volumes.
	infra := map[string]struct{ image, health, data string }{
		"postgres": {"postgres:", "pg_isready", "/var/lib/postgresql/data"},
		"kafka":    {"apache/kafka:", "kafka-", "/var/lib/kafka/data"},
	}
	for _, name := range sortedKeys(infra) {
		want := infra[name]
		s := f.Services[name]
		if s == nil {
			t.Errorf("%s: services: no %s service", composePath, name)
			continue
		}
		if !strings.HasPrefix(s.Image, want.image) {
			t.Errorf("%s.image: %q, want %s<version>", svc(name), s.Image, want.image)
		}
		if !s.healthy() || !strings.Contains(strings.Join(s.Healthcheck.Test, " "), want.health) {
			t.Errorf("%s.healthcheck: want a test running %s", svc(name), want.health)
		}
		if !mountedOnVolume(s, want.data) {
			t.Errorf("%s.volumes: want a named volume on %s", svc(name), want.data)
		}
	}
	if k := f.Services["kafka"]; k != nil {
		if r := k.Environment["KAFKA_PROCESS_ROLES"]; !strings.Contains(r, "broker") || !strings.Contains(r, "controller") {
			t.Errorf("%s.environment.KAFKA_PROCESS_ROLES: %q; want broker,controller (KRaft, one node)", svc("kafka"), r)
		}
	}

	authFile := checkComposeAuth(t, root, f)
	metricsFile := checkComposeMetricsToken(t, f)

	published := map[string]string{} // host ip|port -> service
	nodeIDs := map[string]string{}
	var initFound bool
	var envFailed bool                       // some node's environment is wrong, so its ports are unknown
	publishedFileServer := map[string]bool{} // catalog, s3 published by some file server
	for _, name := range sortedKeys(f.Services) {
		s := f.Services[name]
		where := svc(name)
		if s.ContainerName != "" {
			t.Errorf("%s.container_name: %q; a fixed name stops --scale and a second project", where, s.ContainerName)
		}
		if s.Image == "" && s.Build == nil {
			t.Errorf("%s: neither image nor build", where)
		}
		if s.Build != nil {
			checkComposeBuild(t, root, d, where, s)
		}
		for _, p := range s.Ports {
			if p.Published == "" {
				continue
			}
			// One host port, bound on all addresses or on the same one, is taken once.
			for key, other := range published {
				ip, port, _ := strings.Cut(key, "|")
				if port == p.Published && (ip == p.HostIP || ip == "" || p.HostIP == "" || ip == "0.0.0.0" || p.HostIP == "0.0.0.0") {
					t.Errorf("%s.ports: %s: host port %s is also published by services.%s", where, p.raw, port, other)
				}
			}
			published[p.HostIP+"|"+p.Published] = name
		}
		for _, m := range s.Volumes {
			switch {
			case m.Type == "volume" && m.Source != "":
				if _, ok := f.Volumes[m.Source]; !ok {
					t.Errorf("%s.volumes: named volume %q is not declared under the top-level volumes", where, m.Source)
				}
			case m.Type == "bind":
				if _, err := os.Stat(filepath.Join(root, m.Source)); err != nil {
					t.Errorf("%s.volumes: bind source %s: %v", where, m.Source, err)
				}
			}
		}
		for dep, cond := range s.DependsOn {
			target := f.Services[dep]
			switch {
			case target == nil:
				t.Errorf("%s.depends_on.%s: no such service", where, dep)
			case cond == "service_healthy" && !target.healthy():
				t.Errorf("%s.depends_on.%s: condition service_healthy, but services.%s has no healthcheck", where, dep, dep)
			case cond == "service_completed_successfully" && !target.oneShot():
				t.Errorf("%s.depends_on.%s: condition service_completed_successfully, but services.%s restarts (%s)", where, dep, dep, target.Restart)
			case cond != "service_started" && cond != "service_healthy" && cond != "service_completed_successfully":
				t.Errorf("%s.depends_on.%s: unknown condition %q", where, dep, cond)
			}
		}

		p, ok := s.program()
		if !ok {
			continue
		}
		files := authFile.in(s)
		maps.Copy(files, metricsFile.in(s))
		checkNoSecretArgs(t, where+": entrypoint and command", p, append(slices.Clone(s.Entrypoint), s.Command...))
		cfg, envOK := checkEnv(t, root, where+".environment", p, s.Environment, files)
		if p.role == "" {
			if hasTableCreate(s) {
				initFound = true
				checkInitService(t, root, f, where, s)
				checkInitAuth(t, where, s, authFile)
			}
			continue
		}

		// A Mink node.
		if id := s.Environment["MINK_NODE_ID"]; id != "" {
			if other, dup := nodeIDs[id]; dup {
				t.Errorf("%s.environment.MINK_NODE_ID: %q is also the node id of services.%s", where, id, other)
			}
			nodeIDs[id] = name
		}
		for _, dep := range []string{"postgres", "kafka"} {
			if s.DependsOn[dep] != "service_healthy" {
				t.Errorf("%s.depends_on.%s: want condition service_healthy", where, dep)
			}
		}
		if authFile.service != "" && s.DependsOn[authFile.service] != "service_completed_successfully" {
			t.Errorf("%s.depends_on.%s: want condition service_completed_successfully: the node reads the auth config it writes", where, authFile.service)
		}
		for _, m := range s.Volumes {
			if m.Source == authFile.volume && authFile.volume != "" && !m.ReadOnly {
				t.Errorf("%s.volumes: %s:%s is writable; a node only reads the auth config (mount it :ro)", where, m.Source, m.Target)
			}
			if m.Source == metricsFile.volume && metricsFile.volume != "" && !m.ReadOnly {
				t.Errorf("%s.volumes: %s:%s is writable; a node only reads the metrics token (mount it :ro)", where, m.Source, m.Target)
			}
		}
		if metricsFile.service != "" && s.Environment["MINK_METRICS_TOKEN_FILE"] != "" && s.DependsOn[metricsFile.service] != "service_completed_successfully" {
			t.Errorf("%s.depends_on.%s: want condition service_completed_successfully: the node reads the metrics token it writes", where, metricsFile.service)
		}
		if s.oneShot() {
			t.Errorf("%s.restart: %q; a node should be restarted (unless-stopped)", where, s.Restart)
		}
		if s.StopSignal != "" && s.StopSignal != "SIGTERM" {
			t.Errorf("%s.stop_signal: %s; the node stops cleanly on SIGTERM", where, s.StopSignal)
		}
		if !envOK {
			envFailed = true
			continue
		}
		ports := listenPorts(cfg)
		if !s.healthy() {
			t.Errorf("%s.healthcheck: none", where)
		} else if test := strings.Join(s.Healthcheck.Test, " "); strings.Contains(test, "minkctl") &&
			!strings.Contains(test, fmt.Sprintf(":%d", ports["grpc"])) {
			t.Errorf("%s.healthcheck.test: %q does not dial the gRPC port %d", where, test, ports["grpc"])
		} else if strings.Contains(test, "minkctl") && !slices.Contains(s.Healthcheck.Test, "health") {
			t.Errorf("%s.healthcheck.test: %q; with auth on only `minkctl health` (grpc.health.v1) answers a check without credentials", where, test)
		}
		grace, err := time.ParseDuration(s.StopGracePeriod)
		if s.StopGracePeriod == "" {
			grace, err = 10*time.Second, nil // Compose's default
		}
		if err != nil {
			t.Errorf("%s.stop_grace_period: %v", where, err)
		} else if need := minGrace(cfg, 0); grace < need {
			t.Errorf("%s.stop_grace_period: %v; a clean stop needs at least %v (lease-ttl/3 %v to leave, shutdown-timeout %v to drain, and a margin)",
				where, grace, need, cfg.LeaseTTL/3, cfg.ShutdownTimeout)
		}
		for _, port := range s.Ports {
			if !containsPort(ports, port.Target) {
				t.Errorf("%s.ports: %s maps container port %d, where %s does not listen (%s)", where, port.raw, port.Target, p.binary, portList(ports))
			}
			if p.target == "fileserver" && port.Published != "" {
				for _, n := range []string{"catalog", "s3"} {
					if port.Target == ports[n] {
						publishedFileServer[n] = true
					}
				}
			}
		}
		if p.target == "fileserver" {
			dir := fileServer(cfg).CacheDir
			if dir == "" {
				dir = cacheParent
			}
			if !mountedOnVolume(s, dir) {
				t.Errorf("%s.volumes: the cache folder %s is not on a named volume", where, dir)
			}
		}

		// The service named after the role is the one `docker compose up --scale` grows:
		// nothing in it may be fixed to one container.
		if name == "mink-"+p.target {
			scaled := fmt.Sprintf("%s (scaled with --scale %s=N)", where, name)
			if s.Hostname != "" {
				t.Errorf("%s.hostname: %q; every replica would share it", scaled, s.Hostname)
			}
			for _, k := range []string{"MINK_NODE_ID", "MINK_ADVERTISE_ADDR", "MINK_CACHE_DIR"} {
				if v, ok := s.Environment[k]; ok && v != "" {
					t.Errorf("%s.environment.%s: %q; every replica would share it (leave it to the default, from the container's hostname)", scaled, k, v)
				}
			}
			for _, port := range s.Ports {
				if port.Published != "" {
					t.Errorf("%s.ports: %s publishes host port %s; a second replica cannot bind it", scaled, port.raw, port.Published)
				}
			}
		}
	}
	for _, p := range programs {
		if p.role != "" && f.Services["mink-"+p.target] == nil {
			t.Errorf("%s: services: no mink-%s service (the %s fleet, scaled with --scale)", composePath, p.target, p.target)
		}
	}
	for _, n := range []string{"catalog", "s3"} {
		if !publishedFileServer[n] && !envFailed {
			t.Errorf("%s: no file server publishes its %s port to the host", composePath, n)
		}
	}
	if !initFound {
		t.Errorf("%s: services: no one-shot service runs `minkctl table create` for the demo table", composePath)
	}
	used := map[string]bool{}
	for _, s := range f.Services {
		for _, m := range s.Volumes {
			used[m.Source] = true
		}
	}
	for _, v := range sortedKeys(f.Volumes) {
		if !used[v] {
			t.Errorf("%s: volumes.%s: declared, never mounted", composePath, v)
		}
	}
}

// composeAuthFile is where a file the nodes read comes from (the auth config, the metrics
// token): the one-shot that writes it (minkctl auth init), into a named volume, at a path
// inside it.
type composeAuthFile struct {
	service string
	volume  string
	rel     string // the file's path inside the volume
	sample  string // a local file with what auth init writes
}

// in is the auth config as service s sees it: its path in the container, through any
// mount of the volume, mapped to the sample (nil when s mounts no such volume).
func (a composeAuthFile) in(s *composeService) map[string]string {
	files := map[string]string{}
	for _, m := range s.Volumes {
		if a.volume != "" && m.Type == "volume" && m.Source == a.volume {
			files[filepath.Join(m.Target, a.rel)] = a.sample
		}
	}
	return files
}

var outFlag = regexp.MustCompile(`--out[= ](\S+)`)

var metricsOutFlag = regexp.MustCompile(`--metrics-token-out[= ](\S+)`)

// checkComposeMetricsToken checks the one-shot that writes the token /metrics asks for
// (minkctl auth init --metrics-token-out): run once per start, writing into a named
// volume; it returns where the token is, with a sample of what is written there.
func checkComposeMetricsToken(t *testing.T, f *composeFile) composeAuthFile {
	t.Helper()
	var a composeAuthFile
	for _, name := range sortedKeys(f.Services) {
		s := f.Services[name]
		p, ok := s.program()
		m := metricsOutFlag.FindStringSubmatch(strings.Join(append(append([]string{}, s.Entrypoint...), s.Command...), " "))
		if !ok || p.target != "minkctl" || m == nil {
			continue
		}
		where := fmt.Sprintf("%s: services.%s", composePath, name)
		a.service = name
		if !s.oneShot() {
			t.Errorf("%s.restart: %q; the metrics token's writer runs once per start (restart: \"no\")", where, s.Restart)
		}
		for _, v := range s.Volumes {
			if v.Type == "volume" && v.Source != "" && under(m[1], v.Target) {
				if v.ReadOnly {
					t.Errorf("%s.volumes: %s is read-only; auth init writes %s there", where, v.Target, m[1])
				}
				a.volume, a.rel = v.Source, strings.TrimPrefix(strings.TrimPrefix(m[1], v.Target), "/")
			}
		}
		if a.volume == "" {
			t.Errorf("%s: the metrics token %s is on no named volume: the nodes and Prometheus would never see it", where, m[1])
		}
	}
	if a.service == "" {
		t.Errorf("%s: services: no one-shot runs `minkctl auth init --metrics-token-out`, so nothing makes the token /metrics asks for", composePath)
	}
	a.sample = filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(a.sample, []byte(strings.Repeat("0123456789abcdef", 4)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return a
}

// checkComposeAuth checks the one-shot that generates the auth config: minkctl auth init,
// run once per start (it keeps an existing file), writing into a named volume the nodes
// mount; and that the header says how to read the credentials and rotate them.
func checkComposeAuth(t *testing.T, root string, f *composeFile) composeAuthFile {
	t.Helper()
	var a composeAuthFile
	for _, name := range sortedKeys(f.Services) {
		s := f.Services[name]
		p, ok := s.program()
		cmd := strings.Join(append(append([]string{}, s.Entrypoint...), s.Command...), " ")
		if !ok || p.target != "minkctl" || !strings.Contains(cmd, "auth init") {
			continue
		}
		where := fmt.Sprintf("%s: services.%s", composePath, name)
		if a.service != "" {
			t.Errorf("%s: a second service writes the auth config (services.%s does)", where, a.service)
			continue
		}
		a.service = name
		if !s.oneShot() {
			t.Errorf("%s.restart: %q; the auth config's writer runs once per start (restart: \"no\")", where, s.Restart)
		}
		out := s.Environment["MINK_AUTH_CONFIG"]
		if m := outFlag.FindStringSubmatch(cmd); m != nil {
			out = m[1]
		}
		if out == "" {
			t.Errorf("%s: minkctl auth init writes no file (--out or MINK_AUTH_CONFIG)", where)
			continue
		}
		for _, m := range s.Volumes {
			if m.Type == "volume" && m.Source != "" && under(out, m.Target) {
				if m.ReadOnly {
					t.Errorf("%s.volumes: %s is read-only; auth init writes %s there", where, m.Target, out)
				}
				a.volume, a.rel = m.Source, strings.TrimPrefix(strings.TrimPrefix(out, m.Target), "/")
			}
		}
		if a.volume == "" {
			t.Errorf("%s: auth init writes %s, which is on no named volume: the nodes would never see it, and it would be lost", where, out)
		}
	}
	if a.service == "" {
		t.Errorf("%s: services: no one-shot runs `minkctl auth init`, so nothing makes the auth config the nodes read", composePath)
	}
	a.sample = writeAuthConfig(t, sampleAuthConfig(t))

	// The header: how to read the credentials, and how to rotate them.
	b, _ := os.ReadFile(filepath.Join(root, composePath))
	var header strings.Builder
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "#") {
			break
		}
		header.WriteString(line + "\n")
	}
	for _, want := range []string{"docker compose exec", "auth secret", "previous_cluster_secrets", "auth init --force", "SIGHUP"} {
		if !strings.Contains(header.String(), want) {
			t.Errorf("%s: the header comment does not say how to read or rotate the credentials (no %q)", composePath, want)
		}
	}
	return a
}

// checkInitAuth checks that the table creator calls as the admin: it reads the admin's
// secret from the auth config (minkctl auth secret) and passes it on as MINK_TOKEN.
func checkInitAuth(t *testing.T, where string, s *composeService, a composeAuthFile) {
	t.Helper()
	script := strings.Join(append(append([]string{}, s.Entrypoint...), s.Command...), " ")
	if !strings.Contains(script, "auth secret") || !strings.Contains(script, "MINK_TOKEN") {
		t.Errorf("%s: the table creator does not call as the admin (MINK_TOKEN from `minkctl auth secret`): the nodes refuse CreateTable without credentials", where)
	}
	if path := s.Environment["MINK_AUTH_CONFIG"]; path == "" || a.in(s)[path] == "" {
		t.Errorf("%s.environment.MINK_AUTH_CONFIG: %q is not the auth config mounted from the volume %s", where, path, a.volume)
	}
	for _, m := range s.Volumes {
		if m.Source == a.volume && a.volume != "" && !m.ReadOnly {
			t.Errorf("%s.volumes: %s is writable; it only reads the auth config (mount it :ro)", where, m.Target)
		}
	}
}

func containsPort(ports map[string]int, p int) bool {
	for _, q := range ports {
		if q == p {
			return true
		}
	}
	return false
}

// mountedOnVolume reports whether path lies on a named volume of the service.
func mountedOnVolume(s *composeService, path string) bool {
	for _, m := range s.Volumes {
		if m.Type == "volume" && m.Source != "" && under(path, m.Target) {
			return true
		}
	}
	return false
}

func checkComposeBuild(t *testing.T, root string, d *dockerfile, where string, s *composeService) {
	t.Helper()
	b := s.Build
	ctx := filepath.Join(root, b.Context)
	if _, err := os.Stat(filepath.Join(ctx, "go.mod")); err != nil {
		t.Errorf("%s.build.context: %q is not the repository root (no go.mod)", where, b.Context)
		return
	}
	file := b.Dockerfile
	if file == "" {
		file = "Dockerfile"
	}
	if filepath.Clean(file) != filepath.Clean(dockerfilePath) {
		t.Errorf("%s.build.dockerfile: %q; want %s", where, b.Dockerfile, dockerfilePath)
		return
	}
	if b.Target == "" || d.stage(b.Target) == nil {
		t.Errorf("%s.build.target: %q is not a stage of %s", where, b.Target, dockerfilePath)
		return
	}
	p, ok := programByTarget(b.Target)
	if !ok {
		t.Errorf("%s.build.target: %q builds none of Mink's programs", where, b.Target)
		return
	}
	if s.Image != "" {
		if q, ok := programByImage(s.Image); !ok || q.target != p.target {
			t.Errorf("%s.image: %q, but build.target %s makes %s", where, s.Image, b.Target, p.binary)
		}
	}
	// A shell entrypoint needs an image with a shell (distroless :debug has busybox).
	if len(s.Entrypoint) > 0 && strings.HasPrefix(s.Entrypoint[0], "/busybox/") {
		chain := d.chain(b.Target)
		if base := chain[len(chain)-1].base; !strings.Contains(base, "debug") {
			t.Errorf("%s.entrypoint: %s, but target %s runs on %s, which has no busybox", where, s.Entrypoint[0], b.Target, base)
		}
	}
}

func hasTableCreate(s *composeService) bool {
	all := strings.Join(append(append([]string{}, s.Entrypoint...), s.Command...), " ")
	return strings.Contains(all, "table create")
}

var specFlag = regexp.MustCompile(`--spec[= ](\S+)`)

// checkInitService checks the one-shot that creates the demo table: it waits for a node
// and, when it reads a --spec file, that file is mounted and is a valid CreateTableRequest
// (the JSON grpcurl takes) with a valid schema.
func checkInitService(t *testing.T, root string, f *composeFile, where string, s *composeService) {
	t.Helper()
	if !s.oneShot() {
		t.Errorf("%s.restart: %q; the table creator runs once (restart: \"no\")", where, s.Restart)
	}
	var waitsForNode bool
	for dep, cond := range s.DependsOn {
		target := f.Services[dep]
		if target == nil {
			continue // reported with depends_on above
		}
		if p, ok := target.program(); ok && p.role != "" && cond == "service_healthy" {
			waitsForNode = true
		}
	}
	if !waitsForNode {
		t.Errorf("%s.depends_on: want a Mink node with condition service_healthy", where)
	}
	m := specFlag.FindStringSubmatch(strings.Join(s.Command, " ") + " " + strings.Join(s.Entrypoint, " "))
	if m == nil {
		return
	}
	inContainer := m[1]
	var source string
	for _, v := range s.Volumes {
		if v.Type == "bind" && v.Target == inContainer {
			source = v.Source
		}
	}
	if source == "" {
		t.Errorf("%s.volumes: --spec %s is not bind-mounted from the repository", where, inContainer)
		return
	}
	checkTableSpec(t, fmt.Sprintf("%s (%s.volumes)", source, where), filepath.Join(root, source))
}

// checkTableSpec checks a CreateTableRequest in JSON, as minkctl --spec and grpcurl read it.
func checkTableSpec(t *testing.T, where, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Errorf("%s: %v", where, err)
		return
	}
	var req adminv1.CreateTableRequest
	if err := protojson.Unmarshal(b, &req); err != nil {
		t.Errorf("%s: not a mink.admin.v1.CreateTableRequest: %v", where, err)
		return
	}
	if req.GetName() == "" || req.GetTopic() == "" {
		t.Errorf("%s: name and topic are required", where)
	}
	spec := tableschema.Spec{Format: tableschema.Format(strings.ToLower(strings.TrimPrefix(req.GetFormat().String(), "RECORD_FORMAT_")))}
	for _, c := range req.GetColumns() {
		spec.Columns = append(spec.Columns, tableschema.Column{Name: c.GetName(), Type: c.GetType(), Required: c.GetRequired(), JSONPath: c.GetJsonPath()})
	}
	if err := spec.Validate(); err != nil {
		t.Errorf("%s: %v", where, err)
	}
}

// checkNoInterpolation fails on a $ that Compose would interpolate: the file uses no
// variables, so every literal $ (in a shell script, say) is written $$.
func checkNoInterpolation(t *testing.T, n *yaml.Node) {
	t.Helper()
	var walk func(*yaml.Node, string)
	walk = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.DocumentNode, yaml.SequenceNode:
			for i, c := range n.Content {
				p := path
				if n.Kind == yaml.SequenceNode {
					p = fmt.Sprintf("%s[%d]", path, i)
				}
				walk(c, p)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				walk(n.Content[i+1], strings.TrimPrefix(path+"."+n.Content[i].Value, "."))
			}
		case yaml.ScalarNode:
			v := strings.ReplaceAll(n.Value, "$$", "")
			if strings.Contains(v, "$") {
				t.Errorf("%s:%d: %s: a lone $ is interpolated by Compose; write $$ for a literal $", composePath, n.Line, path)
			}
		}
	}
	walk(n, "")
}
