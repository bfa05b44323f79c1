package deploytest

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/minkhq/mink/pkg/auth"
	"github.com/minkhq/mink/pkg/flagenv"
	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/node"
)

const k8sDir = "deploy/k8s"

// apiVersions are the kinds the manifests may hold, with their API version.
var apiVersions = map[string]string{
	"Namespace": "v1", "ConfigMap": "v1", "Secret": "v1", "Service": "v1",
	"Deployment": "apps/v1", "StatefulSet": "apps/v1", "PodDisruptionBudget": "policy/v1",
}

// Field names Kubernetes knows (v1.33) at the levels a typo is easiest to miss: an unknown
// one is silently dropped by a lenient apply, and the probe or limit with it.
var (
	podSpecFields = fieldSet(`activeDeadlineSeconds affinity automountServiceAccountToken containers
		dnsConfig dnsPolicy enableServiceLinks ephemeralContainers hostAliases hostIPC hostNetwork
		hostPID hostUsers hostname imagePullSecrets initContainers nodeName nodeSelector os
		overhead preemptionPolicy priority priorityClassName readinessGates resourceClaims
		resources restartPolicy runtimeClassName schedulerName schedulingGates securityContext
		serviceAccount serviceAccountName setHostnameAsFQDN shareProcessNamespace subdomain
		terminationGracePeriodSeconds tolerations topologySpreadConstraints volumes`)
	containerFields = fieldSet(`args command env envFrom image imagePullPolicy lifecycle
		livenessProbe name ports readinessProbe resizePolicy resources restartPolicy
		securityContext startupProbe stdin stdinOnce terminationMessagePath
		terminationMessagePolicy tty volumeDevices volumeMounts workingDir`)
	probeFields = fieldSet(`exec failureThreshold grpc httpGet initialDelaySeconds periodSeconds
		successThreshold tcpSocket terminationGracePeriodSeconds timeoutSeconds`)
)

func fieldSet(s string) map[string]bool {
	m := map[string]bool{}
	for _, f := range strings.Fields(s) {
		m[f] = true
	}
	return m
}

// k8sDoc is one object of one manifest file.
type k8sDoc struct {
	file     string
	node     *yaml.Node
	raw      map[string]any
	Kind     string `yaml:"kind"`
	APIVer   string `yaml:"apiVersion"`
	Metadata struct {
		Name   string            `yaml:"name"`
		Labels map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	Data       map[string]string `yaml:"data"`
	StringData map[string]string `yaml:"stringData"`
}

func (d *k8sDoc) where() string { return fmt.Sprintf("%s: %s %s", d.file, d.Kind, d.Metadata.Name) }

type labelSelector struct {
	MatchLabels      map[string]string `yaml:"matchLabels"`
	MatchExpressions []any             `yaml:"matchExpressions"`
}

// intOrString is a port given by number or by name.
type intOrString struct {
	Int int
	Str string
	Set bool
}

func (v *intOrString) UnmarshalYAML(n *yaml.Node) error {
	v.Set = true
	if i, err := strconv.Atoi(n.Value); err == nil && n.Tag != "!!str" {
		v.Int = i
		return nil
	}
	v.Str = n.Value
	return nil
}

type probe struct {
	GRPC *struct {
		Port int `yaml:"port"`
	} `yaml:"grpc"`
	TCPSocket *struct {
		Port intOrString `yaml:"port"`
	} `yaml:"tcpSocket"`
}

type envVar struct {
	Name      string `yaml:"name"`
	Value     string `yaml:"value"`
	ValueFrom *struct {
		FieldRef *struct {
			FieldPath string `yaml:"fieldPath"`
		} `yaml:"fieldRef"`
		ResourceFieldRef *struct {
			Resource string `yaml:"resource"`
		} `yaml:"resourceFieldRef"`
		SecretKeyRef    *keyRef `yaml:"secretKeyRef"`
		ConfigMapKeyRef *keyRef `yaml:"configMapKeyRef"`
	} `yaml:"valueFrom"`
}

type keyRef struct {
	Name string `yaml:"name"`
	Key  string `yaml:"key"`
}

type container struct {
	Name    string   `yaml:"name"`
	Image   string   `yaml:"image"`
	Command []string `yaml:"command"`
	Args    []string `yaml:"args"`
	Env     []envVar `yaml:"env"`
	EnvFrom []struct {
		Prefix       string `yaml:"prefix"`
		ConfigMapRef *struct {
			Name string `yaml:"name"`
		} `yaml:"configMapRef"`
		SecretRef *struct {
			Name string `yaml:"name"`
		} `yaml:"secretRef"`
	} `yaml:"envFrom"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	ReadinessProbe *probe `yaml:"readinessProbe"`
	LivenessProbe  *probe `yaml:"livenessProbe"`
	Lifecycle      *struct {
		PreStop *struct {
			Sleep *struct {
				Seconds int64 `yaml:"seconds"`
			} `yaml:"sleep"`
		} `yaml:"preStop"`
	} `yaml:"lifecycle"`
	Resources struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
		SubPath   string `yaml:"subPath"`
		ReadOnly  bool   `yaml:"readOnly"`
	} `yaml:"volumeMounts"`
}

// podVolume is a pod's volume; Secret volumes are the ones checked in detail.
type podVolume struct {
	Name   string `yaml:"name"`
	Secret *struct {
		SecretName  string `yaml:"secretName"`
		DefaultMode *int   `yaml:"defaultMode"`
		Items       []struct {
			Key  string `yaml:"key"`
			Path string `yaml:"path"`
		} `yaml:"items"`
	} `yaml:"secret"`
}

type workloadSpec struct {
	Spec struct {
		ServiceName string        `yaml:"serviceName"`
		Selector    labelSelector `yaml:"selector"`
		Template    struct {
			Metadata struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"metadata"`
			Spec struct {
				TerminationGracePeriodSeconds *int64      `yaml:"terminationGracePeriodSeconds"`
				Containers                    []container `yaml:"containers"`
				Volumes                       []podVolume `yaml:"volumes"`
				SecurityContext               struct {
					FSGroup *int64 `yaml:"fsGroup"`
				} `yaml:"securityContext"`
			} `yaml:"spec"`
		} `yaml:"template"`
		VolumeClaimTemplates []struct {
			Metadata struct {
				Name string `yaml:"name"`
			} `yaml:"metadata"`
			Spec struct {
				Resources struct {
					Requests map[string]string `yaml:"requests"`
				} `yaml:"resources"`
			} `yaml:"spec"`
		} `yaml:"volumeClaimTemplates"`
	} `yaml:"spec"`
}

type serviceSpec struct {
	Spec struct {
		ClusterIP string            `yaml:"clusterIP"`
		Selector  map[string]string `yaml:"selector"`
		Ports     []struct {
			Name       string      `yaml:"name"`
			Port       int         `yaml:"port"`
			TargetPort intOrString `yaml:"targetPort"`
		} `yaml:"ports"`
	} `yaml:"spec"`
}

type pdbSpec struct {
	Spec struct {
		Selector       labelSelector `yaml:"selector"`
		MinAvailable   *intOrString  `yaml:"minAvailable"`
		MaxUnavailable *intOrString  `yaml:"maxUnavailable"`
	} `yaml:"spec"`
}

// workload is what the checks of Services and PodDisruptionBudgets need of a checked
// Deployment or StatefulSet.
type workload struct {
	doc     *k8sDoc
	prog    program
	labels  map[string]string
	ports   map[string]int // container ports by name
	cfg     node.Config
	checked bool // its environment validated, so cfg holds its settings
}

func loadManifests(t *testing.T, root string) (docs []*k8sDoc, images []string) {
	t.Helper()
	dir := filepath.Join(root, k8sDir)
	const kfile = k8sDir + "/kustomization.yaml"
	b, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatalf("%s: %v", kfile, err)
	}
	var k struct {
		Resources []string `yaml:"resources"`
		Images    []struct {
			Name string `yaml:"name"`
		} `yaml:"images"`
	}
	if err := yaml.Unmarshal(b, &k); err != nil {
		t.Fatalf("%s: %v", kfile, err)
	}
	listed := map[string]bool{}
	for _, r := range k.Resources {
		listed[filepath.Clean(r)] = true
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if n := e.Name(); !e.IsDir() && (strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml")) && n != "kustomization.yaml" && !listed[n] {
			t.Errorf("%s: resources: %s is not listed, so kubectl apply -k leaves it out", kfile, n)
		}
	}
	for _, img := range k.Images {
		images = append(images, img.Name)
	}
	for _, r := range k.Resources {
		path := filepath.Join(k8sDir, r)
		f, err := os.Open(filepath.Join(dir, r))
		if err != nil {
			t.Errorf("%s: resources: %v", kfile, err)
			continue
		}
		dec := yaml.NewDecoder(f)
		for i := 0; ; i++ {
			var n yaml.Node
			err := dec.Decode(&n)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Errorf("%s: document %d: %v", path, i, err)
				break
			}
			if len(n.Content) == 0 || n.Content[0].Kind != yaml.MappingNode || len(n.Content[0].Content) == 0 {
				continue // an empty document
			}
			d := &k8sDoc{file: path, node: &n}
			if err := n.Decode(d); err != nil {
				t.Errorf("%s: document %d: %v", path, i, err)
				continue
			}
			if err := n.Decode(&d.raw); err != nil {
				t.Errorf("%s: document %d: %v", path, i, err)
				continue
			}
			docs = append(docs, d)
		}
		f.Close()
	}
	return docs, images
}

func TestKubernetes(t *testing.T) {
	root := repoRoot(t)
	df := loadDockerfile(t, root)
	docs, kustomizeImages := loadManifests(t, root)

	byKind := map[string]map[string]*k8sDoc{}
	for _, d := range docs {
		if d.APIVer == "" || d.Kind == "" || d.Metadata.Name == "" {
			t.Errorf("%s: an object lacks apiVersion, kind or metadata.name (%q, %q, %q)", d.file, d.APIVer, d.Kind, d.Metadata.Name)
			continue
		}
		if want, ok := apiVersions[d.Kind]; !ok {
			t.Errorf("%s: kind %s is not checked by this test; add it to apiVersions", d.where(), d.Kind)
		} else if d.APIVer != want {
			t.Errorf("%s: apiVersion %s; want %s", d.where(), d.APIVer, want)
		}
		if byKind[d.Kind] == nil {
			byKind[d.Kind] = map[string]*k8sDoc{}
		}
		if _, dup := byKind[d.Kind][d.Metadata.Name]; dup {
			t.Errorf("%s: a second %s named %s", d.where(), d.Kind, d.Metadata.Name)
		}
		byKind[d.Kind][d.Metadata.Name] = d
	}

	var workloads []*workload
	imagesUsed := map[string]bool{}
	for _, kind := range []string{"Deployment", "StatefulSet"} {
		for _, name := range sortedKeys(byKind[kind]) {
			w := checkWorkload(t, root, df, byKind, byKind[kind][name], imagesUsed)
			if w != nil {
				workloads = append(workloads, w)
			}
		}
	}
	for _, p := range programs {
		if p.role == "" {
			continue
		}
		var n int
		for _, w := range workloads {
			if w.prog.target == p.target {
				n++
				if p.role != lease.RoleFileServer && w.doc.Kind != "Deployment" {
					t.Errorf("%s: %s nodes keep nothing on disk; want a Deployment", w.doc.where(), p.target)
				}
			}
		}
		if n == 0 {
			t.Errorf("%s: no workload runs %s", k8sDir, p.binary)
		}
	}
	for _, img := range kustomizeImages {
		if !imagesUsed[img] {
			t.Errorf("%s/kustomization.yaml: images: %s is used by no workload", k8sDir, img)
		}
	}
	for img := range imagesUsed {
		found := false
		for _, k := range kustomizeImages {
			found = found || k == img
		}
		if !found {
			t.Errorf("%s/kustomization.yaml: images: no entry for %s, so its tag is never set", k8sDir, img)
		}
	}

	checkServices(t, byKind, workloads)
	checkAuthSecret(t, root, byKind)
	checkMetricsSecret(t, root, byKind)
	checkTLSDoc(t, root)

	// A PodDisruptionBudget for every workload.
	for _, w := range workloads {
		var covered bool
		for _, name := range sortedKeys(byKind["PodDisruptionBudget"]) {
			d := byKind["PodDisruptionBudget"][name]
			var pdb pdbSpec
			if err := d.node.Decode(&pdb); err != nil {
				t.Errorf("%s: %v", d.where(), err)
				continue
			}
			if pdb.Spec.MinAvailable == nil && pdb.Spec.MaxUnavailable == nil {
				t.Errorf("%s: spec: neither minAvailable nor maxUnavailable", d.where())
			}
			if len(pdb.Spec.Selector.MatchLabels) > 0 && subset(pdb.Spec.Selector.MatchLabels, w.labels) {
				covered = true
			}
		}
		if !covered {
			t.Errorf("%s: no PodDisruptionBudget selects its pods (labels %v)", w.doc.where(), w.labels)
		}
	}
	for _, name := range sortedKeys(byKind["PodDisruptionBudget"]) {
		d := byKind["PodDisruptionBudget"][name]
		var pdb pdbSpec
		if d.node.Decode(&pdb) == nil && !selectsAny(pdb.Spec.Selector.MatchLabels, workloads) {
			t.Errorf("%s: spec.selector.matchLabels %v selects no workload's pods", d.where(), pdb.Spec.Selector.MatchLabels)
		}
	}
}

func checkWorkload(t *testing.T, root string, df *dockerfile, byKind map[string]map[string]*k8sDoc, d *k8sDoc, imagesUsed map[string]bool) *workload {
	t.Helper()
	where := d.where()
	var w workloadSpec
	if err := d.node.Decode(&w); err != nil {
		t.Errorf("%s: %v", where, err)
		return nil
	}
	spec := w.Spec
	labels := spec.Template.Metadata.Labels
	sel := spec.Selector.MatchLabels
	switch {
	case len(sel) == 0:
		t.Errorf("%s: spec.selector.matchLabels is empty", where)
	case !subset(sel, labels):
		t.Errorf("%s: spec.selector.matchLabels %v does not match spec.template.metadata.labels %v", where, sel, labels)
	}
	podRaw := dig(d.raw, "spec", "template", "spec")
	unknownFields(t, where+": spec.template.spec", podRaw, podSpecFields)
	if containers, ok := podRaw["containers"].([]any); ok {
		for i, c := range containers {
			cm, _ := c.(map[string]any)
			cwhere := fmt.Sprintf("%s: spec.template.spec.containers[%d]", where, i)
			unknownFields(t, cwhere, cm, containerFields)
			for _, pf := range []string{"readinessProbe", "livenessProbe", "startupProbe"} {
				if pm, ok := cm[pf].(map[string]any); ok {
					unknownFields(t, cwhere+"."+pf, pm, probeFields)
				}
			}
		}
	}

	volumes := map[string]string{} // name -> "pod" or "claim"
	for _, v := range spec.Template.Spec.Volumes {
		volumes[v.Name] = "pod"
	}
	claims := map[string]int64{}
	for _, c := range spec.VolumeClaimTemplates {
		volumes[c.Metadata.Name] = "claim"
		if s, ok := c.Spec.Resources.Requests["storage"]; ok {
			n, err := parseSize(s)
			if err != nil {
				t.Errorf("%s: spec.volumeClaimTemplates %s: storage: %v", where, c.Metadata.Name, err)
			}
			claims[c.Metadata.Name] = n
		}
	}
	if d.Kind == "StatefulSet" {
		svc := byKind["Service"][spec.ServiceName]
		var s serviceSpec
		if svc == nil || svc.node.Decode(&s) != nil || s.Spec.ClusterIP != "None" {
			t.Errorf("%s: spec.serviceName %q is not a headless Service (clusterIP: None) in %s", where, spec.ServiceName, k8sDir)
		}
	}

	var out *workload
	for _, c := range spec.Template.Spec.Containers {
		cwhere := fmt.Sprintf("%s: container %s", where, c.Name)
		p, ok := programByImage(c.Image)
		if !ok || p.role == "" {
			continue
		}
		if df.stage(p.target) == nil {
			t.Errorf("%s: image %s, but %s has no target %s to build it", cwhere, c.Image, dockerfilePath, p.target)
		}
		imagesUsed[strings.SplitN(c.Image, ":", 2)[0]] = true
		if out != nil {
			t.Errorf("%s: a second Mink container in one pod", cwhere)
			continue
		}
		out = &workload{doc: d, prog: p, labels: labels, ports: map[string]int{}}
		for _, port := range c.Ports {
			out.ports[port.Name] = port.ContainerPort
		}

		checkNoSecretArgs(t, cwhere+": command and args", p, append(slices.Clone(c.Command), c.Args...))
		checkSecretsFromSecrets(t, cwhere, byKind, p, c)
		env, envOK := podEnv(t, cwhere, byKind, d.Metadata.Name, c)
		files := secretFiles(t, cwhere, byKind, c, spec.Template.Spec.Volumes, spec.Template.Spec.SecurityContext.FSGroup)
		cfg, cfgOK := checkEnv(t, root, cwhere+": env", p, env, files)
		if !envOK || !cfgOK {
			continue
		}
		out.cfg, out.checked = cfg, true
		checkIdentity(t, cwhere, c, cfg)

		ports := listenPorts(cfg)
		for _, name := range sortedKeys(ports) {
			if name == "metrics" {
				continue
			}
			if !containsPort(out.ports, ports[name]) {
				t.Errorf("%s: ports: no containerPort %d (%s)", cwhere, ports[name], name)
			}
		}
		grpcPort := ports["grpc"]
		if r := c.ReadinessProbe; r == nil || r.GRPC == nil || r.GRPC.Port != grpcPort {
			t.Errorf("%s: readinessProbe: want grpc.port %d (grpc.health.v1: SERVING once the node has registered)", cwhere, grpcPort)
		}
		if l := c.LivenessProbe; l == nil {
			t.Errorf("%s: livenessProbe: none", cwhere)
		} else if !(l.GRPC != nil && l.GRPC.Port == grpcPort) && !(l.TCPSocket != nil && resolvePort(l.TCPSocket.Port, out.ports) == grpcPort) {
			t.Errorf("%s: livenessProbe: want grpc.port or tcpSocket.port on the gRPC port %d", cwhere, grpcPort)
		}

		var preStop time.Duration
		if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Sleep != nil {
			preStop = time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
		}
		grace := 30 * time.Second // Kubernetes' default
		if g := spec.Template.Spec.TerminationGracePeriodSeconds; g != nil {
			grace = time.Duration(*g) * time.Second
		}
		if need := minGrace(cfg, preStop); grace < need {
			t.Errorf("%s: spec.template.spec.terminationGracePeriodSeconds: %v; a clean stop needs at least %v (preStop %v, lease-ttl/3 %v to leave, shutdown-timeout %v to drain, and a margin)",
				where, grace, need, preStop, cfg.LeaseTTL/3, cfg.ShutdownTimeout)
		}

		for _, r := range []string{"cpu", "memory"} {
			if c.Resources.Requests[r] == "" {
				t.Errorf("%s: resources.requests.%s: not set", cwhere, r)
			}
		}

		mounts := map[string]string{} // mount path -> volume
		for _, m := range c.VolumeMounts {
			if volumes[m.Name] == "" {
				t.Errorf("%s: volumeMounts: %s is neither a pod volume nor a volumeClaimTemplate", cwhere, m.Name)
			}
			mounts[m.MountPath] = m.Name
		}
		if p.role == lease.RoleFileServer {
			checkCacheVolume(t, cwhere, d.Kind, cfg, mounts, volumes, claims)
		}
	}
	if out == nil {
		t.Errorf("%s: no container runs a Mink role image (minkhq/mink-indexer, ...)", where)
	}
	return out
}

// checkSecretsFromSecrets checks that each secret flag of p the container sets (the
// Postgres URL above all) comes from a Secret, never from a ConfigMap or a value written
// in the manifest, and that no value outside a Secret is a URL with a password.
func checkSecretsFromSecrets(t *testing.T, where string, byKind map[string]map[string]*k8sDoc, p program, c container) {
	t.Helper()
	secret := map[string]bool{}
	for _, f := range secretFlags(p) {
		secret[flagenv.EnvName(f)] = true
	}
	plain := func(how, name, value string) {
		if secret[name] {
			t.Errorf("%s: %s comes from %s; it is a secret: take it from a Secret (envFrom secretRef or valueFrom.secretKeyRef)", where, name, how)
		}
		if u, err := url.Parse(value); err == nil && u.User != nil {
			if _, has := u.User.Password(); has {
				t.Errorf("%s: %s (from %s) is a URL with a password: it belongs in a Secret", where, name, how)
			}
		}
	}
	for _, ef := range c.EnvFrom {
		if ef.ConfigMapRef == nil {
			continue
		}
		if cm := byKind["ConfigMap"][ef.ConfigMapRef.Name]; cm != nil {
			for k, v := range cm.Data {
				plain("ConfigMap "+ef.ConfigMapRef.Name, ef.Prefix+k, v)
			}
		}
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			plain("a value in the manifest", e.Name, e.Value)
		case e.ValueFrom.ConfigMapKeyRef != nil:
			if cm := byKind["ConfigMap"][e.ValueFrom.ConfigMapKeyRef.Name]; cm != nil {
				plain("ConfigMap "+e.ValueFrom.ConfigMapKeyRef.Name, e.Name, cm.Data[e.ValueFrom.ConfigMapKeyRef.Key])
			}
		}
	}
}

// podEnv resolves a container's environment as the kubelet would: envFrom first, then env
// in order, with $(VAR) referring only to variables defined before it. Downward-API values
// take sample values (the pod name, an IP).
func podEnv(t *testing.T, where string, byKind map[string]map[string]*k8sDoc, podName string, c container) (map[string]string, bool) {
	t.Helper()
	env := map[string]string{}
	ok := true
	for _, ef := range c.EnvFrom {
		var data map[string]string
		switch {
		case ef.ConfigMapRef != nil:
			cm := byKind["ConfigMap"][ef.ConfigMapRef.Name]
			if cm == nil {
				t.Errorf("%s: envFrom: no ConfigMap %s in %s", where, ef.ConfigMapRef.Name, k8sDir)
				ok = false
				continue
			}
			data = cm.Data
		case ef.SecretRef != nil:
			s := byKind["Secret"][ef.SecretRef.Name]
			if s == nil {
				t.Errorf("%s: envFrom: no Secret %s in %s", where, ef.SecretRef.Name, k8sDir)
				ok = false
				continue
			}
			data = map[string]string{}
			for k, v := range s.Data {
				b, err := base64.StdEncoding.DecodeString(v)
				if err != nil {
					t.Errorf("%s: Secret %s: data.%s is not base64: %v", where, s.Metadata.Name, k, err)
				}
				data[k] = string(b)
			}
			for k, v := range s.StringData {
				data[k] = v
			}
		}
		for k, v := range data {
			env[ef.Prefix+k] = v
		}
	}
	ref := regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = ref.ReplaceAllStringFunc(e.Value, func(m string) string {
				name := ref.FindStringSubmatch(m)[1]
				v, defined := env[name]
				if !defined {
					t.Errorf("%s: env %s: $(%s) is not defined before it, so Kubernetes leaves it as written", where, e.Name, name)
					ok = false
				}
				return v
			})
		case e.ValueFrom.FieldRef != nil:
			switch fp := e.ValueFrom.FieldRef.FieldPath; fp {
			case "metadata.name":
				env[e.Name] = podName + "-0"
			case "status.podIP":
				env[e.Name] = "10.1.2.3"
			default:
				env[e.Name] = "sample"
			}
		case e.ValueFrom.ResourceFieldRef != nil:
			env[e.Name] = "1073741824"
		case e.ValueFrom.SecretKeyRef != nil, e.ValueFrom.ConfigMapKeyRef != nil:
			kind, r := "Secret", e.ValueFrom.SecretKeyRef
			if r == nil {
				kind, r = "ConfigMap", e.ValueFrom.ConfigMapKeyRef
			}
			d := byKind[kind][r.Name]
			if d == nil {
				t.Errorf("%s: env %s: no %s %s in %s", where, e.Name, kind, r.Name, k8sDir)
				ok = false
				continue
			}
			v, found := d.StringData[r.Key]
			if !found {
				v, found = d.Data[r.Key]
			}
			if !found {
				t.Errorf("%s: env %s: %s %s has no key %s", where, e.Name, kind, r.Name, r.Key)
				ok = false
			}
			env[e.Name] = v
		}
	}
	return env, ok
}

// secretFiles are the files a container's Secret volumes put in it: path in the container →
// a local file with the key's content (an auth config's CHANGE-ME placeholders replaced
// by secrets, as the operator does). Each mount must be read-only and not a subPath (a
// subPath mount never sees a changed Secret, and the nodes reload the auth config and
// their certificates when the files change), its files readable by the pod's fsGroup
// and no one else.
func secretFiles(t *testing.T, where string, byKind map[string]map[string]*k8sDoc, c container, volumes []podVolume, fsGroup *int64) map[string]string {
	t.Helper()
	files := map[string]string{}
	for _, m := range c.VolumeMounts {
		var v *podVolume
		for i := range volumes {
			if volumes[i].Name == m.Name && volumes[i].Secret != nil {
				v = &volumes[i]
			}
		}
		if v == nil {
			continue
		}
		mwhere := fmt.Sprintf("%s: volumeMounts %s (Secret %s)", where, m.Name, v.Secret.SecretName)
		if !m.ReadOnly {
			t.Errorf("%s: readOnly is not set; the node only reads it", mwhere)
		}
		if m.SubPath != "" {
			t.Errorf("%s: subPath %s: a subPath mount never sees a changed Secret, and the node reloads these files when they change", mwhere, m.SubPath)
		}
		mode := 0o644 // Kubernetes' default
		if v.Secret.DefaultMode != nil {
			mode = *v.Secret.DefaultMode
		}
		switch {
		case mode&0o004 != 0:
			t.Errorf("%s: defaultMode %#o lets every user of the node read the secrets; want 0440 with fsGroup", mwhere, mode)
		case mode&0o040 == 0 || fsGroup == nil:
			t.Errorf("%s: defaultMode %#o (fsGroup %v): the node's user (not root) could not read the files; want 0440 and the pod's fsGroup", mwhere, mode, fsGroup)
		}
		d := byKind["Secret"][v.Secret.SecretName]
		if d == nil {
			t.Errorf("%s: no Secret %s in %s", mwhere, v.Secret.SecretName, k8sDir)
			continue
		}
		keys := map[string]string{} // key -> path in the volume
		for k := range d.StringData {
			keys[k] = k
		}
		for k := range d.Data {
			keys[k] = k
		}
		if len(v.Secret.Items) > 0 {
			picked := map[string]string{}
			for _, it := range v.Secret.Items {
				picked[it.Key] = it.Path
			}
			keys = picked
		}
		for k, rel := range keys {
			content, found := d.StringData[k]
			if !found {
				b, _ := base64.StdEncoding.DecodeString(d.Data[k])
				content = string(b)
			}
			switch {
			case strings.HasSuffix(k, ".json") && strings.Contains(content, "cluster_secret"):
				content = withSecrets(content)
			case strings.HasPrefix(content, "CHANGE-ME"): // a bare token, the metrics one
				content = strings.Trim(withSecrets(`"`+content+`"`), `"`)
			}
			local := filepath.Join(t.TempDir(), filepath.Base(rel))
			if err := os.WriteFile(local, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			files[filepath.Join(m.MountPath, rel)] = local
		}
	}
	return files
}

// placeholder is how the committed auth config marks the secrets an operator fills in.
var placeholder = regexp.MustCompile(`"CHANGE-ME[^"]*"`)

// withSecrets is an auth config with each placeholder replaced by its own random secret.
func withSecrets(config string) string {
	return placeholder.ReplaceAllStringFunc(config, func(string) string {
		b := make([]byte, 32)
		rand.Read(b)
		return `"` + hex.EncodeToString(b) + `"`
	})
}

// checkMetricsSecret checks the Secret mink-metrics: its token is a placeholder the nodes
// refuse, and its comment says how to make a real one and give Prometheus it.
func checkMetricsSecret(t *testing.T, root string, byKind map[string]map[string]*k8sDoc) {
	t.Helper()
	d := byKind["Secret"]["mink-metrics"]
	if d == nil {
		t.Errorf("%s: no Secret mink-metrics (the token /metrics asks for, key token)", k8sDir)
		return
	}
	tok, ok := d.StringData["token"]
	if !ok || !strings.HasPrefix(tok, "CHANGE-ME") || len(tok) >= auth.MinStaticToken {
		t.Errorf("%s: stringData.token %q: want a CHANGE-ME placeholder shorter than any token a node takes", d.where(), tok)
	}
	b, _ := os.ReadFile(filepath.Join(root, d.file))
	for _, want := range []string{"kubectl -n mink create secret generic mink-metrics --from-file=token", "credentials_file", "PodMonitor"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s: the comment does not say %q", d.where(), want)
		}
	}
}

// checkAuthSecret checks the Secret mink-auth: its auth.json is the auth config's format,
// every secret in it a placeholder that the nodes refuse (no one runs on a published
// secret), valid once they are filled in, and its comment says how to make a real one.
func checkAuthSecret(t *testing.T, root string, byKind map[string]map[string]*k8sDoc) {
	t.Helper()
	d := byKind["Secret"]["mink-auth"]
	if d == nil {
		t.Errorf("%s: no Secret mink-auth (the auth config, key auth.json)", k8sDir)
		return
	}
	config, found := d.StringData["auth.json"]
	if !found {
		t.Errorf("%s: no key auth.json in stringData", d.where())
		return
	}
	_, err := auth.ParseFile([]byte(config))
	if err == nil || !strings.Contains(err.Error(), "cluster_secret") {
		t.Errorf("%s: auth.json: the nodes accept it as committed (%v); its secrets must be CHANGE-ME placeholders they refuse", d.where(), err)
	}
	var raw struct {
		ClusterSecret string `json:"cluster_secret"`
		Principals    []struct {
			Secret string `json:"secret"`
		} `json:"principals"`
	}
	if err := json.Unmarshal([]byte(config), &raw); err != nil {
		t.Errorf("%s: auth.json: %v", d.where(), err)
		return
	}
	secrets := []string{raw.ClusterSecret}
	for _, p := range raw.Principals {
		secrets = append(secrets, p.Secret)
	}
	for _, s := range secrets {
		if !placeholder.MatchString(`"`+s+`"`) || len(s) >= 16 {
			t.Errorf("%s: auth.json: secret %q is not a CHANGE-ME placeholder shorter than any secret a node takes", d.where(), s)
		}
	}
	f, err := auth.ParseFile([]byte(withSecrets(config)))
	if err != nil {
		t.Errorf("%s: auth.json with its placeholders filled in: %v", d.where(), err)
	} else {
		var admin, reader bool
		for _, p := range f.Principals {
			admin = admin || p.Role == auth.RoleAdmin
			reader = reader || p.Role == auth.RoleReader
		}
		if !admin || !reader {
			t.Errorf("%s: auth.json: want an admin and a reader principal, as minkctl auth init writes", d.where())
		}
	}
	b, _ := os.ReadFile(filepath.Join(root, d.file))
	for _, want := range []string{"minkctl auth init --out auth.json", "kubectl -n mink create secret generic mink-auth --from-file=auth.json", "previous_cluster_secrets"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s: the comment does not say %q (how to make a real config, and rotate it)", d.file, want)
		}
	}
}

// checkTLSDoc checks the optional cert-manager manifest: cert-manager objects, a
// certificate for the Services engines use and every pod's name under the headless
// Services, for servers and clients alike, and instructions naming real role flags.
func checkTLSDoc(t *testing.T, root string) {
	t.Helper()
	const path = k8sDir + "/tls/certificate.yaml"
	b, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		t.Errorf("%s: %v", path, err)
		return
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	var leaf bool
	for {
		var doc struct {
			APIVersion string `yaml:"apiVersion"`
			Kind       string `yaml:"kind"`
			Spec       struct {
				SecretName string   `yaml:"secretName"`
				DNSNames   []string `yaml:"dnsNames"`
				Usages     []string `yaml:"usages"`
			} `yaml:"spec"`
		}
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Errorf("%s: %v", path, err)
			return
		}
		if doc.APIVersion != "cert-manager.io/v1" || (doc.Kind != "Issuer" && doc.Kind != "Certificate") {
			t.Errorf("%s: %s %s: want cert-manager.io/v1 Issuers and Certificates", path, doc.APIVersion, doc.Kind)
		}
		if doc.Kind != "Certificate" || doc.Spec.SecretName != "mink-tls" {
			continue
		}
		leaf = true
		for _, want := range []string{"mink-catalog.mink.svc", "mink-s3.mink.svc", "*.mink-grpc.mink.svc", "*.mink-fileserver.mink.svc"} {
			if !slices.Contains(doc.Spec.DNSNames, want) {
				t.Errorf("%s: Certificate mink-tls: dnsNames lack %s", path, want)
			}
		}
		for _, want := range []string{"server auth", "client auth"} {
			if !slices.Contains(doc.Spec.Usages, want) {
				t.Errorf("%s: Certificate mink-tls: usages lack %q (a node is a server and, to the nodes it calls, a client)", path, want)
			}
		}
	}
	if !leaf {
		t.Errorf("%s: no Certificate with secretName mink-tls", path)
	}
	flags := map[string]bool{}
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	fsProg, _ := programByTarget("fileserver")
	fsCfg := fsProg.nodeConfig()
	fsCfg.RegisterFlags(fs)
	fs.VisitAll(func(f *flag.Flag) { flags[flagenv.EnvName(f.Name)] = true })
	for _, v := range regexp.MustCompile(`MINK_[A-Z_]+`).FindAllString(string(b), -1) {
		if !flags[v] {
			t.Errorf("%s: %s is no role's variable", path, v)
		}
	}
}

// checkIdentity checks that a node's id is its pod's name and that it advertises its pod
// IP with its gRPC port: both unique per pod, and the address reachable from other pods.
func checkIdentity(t *testing.T, where string, c container, cfg node.Config) {
	t.Helper()
	fieldOf := map[string]string{}
	values := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			fieldOf[e.Name] = e.ValueFrom.FieldRef.FieldPath
		}
		values[e.Name] = e.Value
	}
	if fieldOf["MINK_NODE_ID"] != "metadata.name" {
		t.Errorf("%s: env MINK_NODE_ID: want valueFrom.fieldRef.fieldPath metadata.name (the pod's name)", where)
	}
	adv := values["MINK_ADVERTISE_ADDR"]
	var fromIP bool
	for _, m := range regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`).FindAllStringSubmatch(adv, -1) {
		fromIP = fromIP || fieldOf[m[1]] == "status.podIP"
	}
	_, port, _ := net.SplitHostPort(cfg.AdvertiseAddr)
	_, grpcPort, _ := net.SplitHostPort(cfg.GRPCAddr)
	if !fromIP || port != grpcPort {
		t.Errorf("%s: env MINK_ADVERTISE_ADDR: %q; want $(POD_IP):%s with POD_IP from fieldRef status.podIP", where, adv, grpcPort)
	}
}

// checkCacheVolume checks that a file server's cache folder is on a volume: a claim of its
// own in a StatefulSet, sized above --cache-bytes.
func checkCacheVolume(t *testing.T, where, kind string, cfg node.Config, mounts, volumes map[string]string, claims map[string]int64) {
	t.Helper()
	fc := fileServer(cfg)
	dir := fc.CacheDir
	if dir == "" {
		t.Errorf("%s: env MINK_CACHE_DIR: not set; the default lies under /tmp, not on the cache volume", where)
		return
	}
	var vol string
	for path, v := range mounts {
		if under(dir, path) && len(path) > len(vol) {
			vol = v
		}
	}
	switch {
	case vol == "":
		t.Errorf("%s: volumeMounts: the cache folder %s (MINK_CACHE_DIR) is on no volume", where, dir)
	case kind == "StatefulSet" && volumes[vol] != "claim":
		t.Errorf("%s: volumeMounts: the cache folder %s is on %s, not a volumeClaimTemplate", where, dir, vol)
	case volumes[vol] == "claim" && claims[vol] > 0 && int64(fc.CacheBytes) > claims[vol]:
		t.Errorf("%s: env MINK_CACHE_BYTES: %s is more than the cache volume %s holds (%d bytes)", where, fc.CacheBytes.String(), vol, claims[vol])
	}
}

func checkServices(t *testing.T, byKind map[string]map[string]*k8sDoc, workloads []*workload) {
	t.Helper()
	found := map[string]bool{} // catalog, s3, headless grpc
	for _, name := range sortedKeys(byKind["Service"]) {
		d := byKind["Service"][name]
		var s serviceSpec
		if err := d.node.Decode(&s); err != nil {
			t.Errorf("%s: %v", d.where(), err)
			continue
		}
		if len(s.Spec.Selector) == 0 {
			t.Errorf("%s: spec.selector is empty", d.where())
			continue
		}
		var selected []*workload
		for _, w := range workloads {
			if subset(s.Spec.Selector, w.labels) {
				selected = append(selected, w)
			}
		}
		if len(selected) == 0 {
			t.Errorf("%s: spec.selector %v selects no workload's pods", d.where(), s.Spec.Selector)
			continue
		}
		for _, port := range s.Spec.Ports {
			for _, w := range selected {
				target := port.TargetPort
				if !target.Set {
					target = intOrString{Int: port.Port, Set: true}
				}
				n := resolvePort(target, w.ports)
				if n == 0 {
					t.Errorf("%s: port %s: targetPort %v is not a port of %s's containers", d.where(), port.Name, targetString(target), w.doc.Metadata.Name)
					continue
				}
				if !w.checked {
					continue
				}
				lp := listenPorts(w.cfg)
				switch {
				case w.prog.role == lease.RoleFileServer && n == lp["catalog"]:
					found["catalog"] = true
				case w.prog.role == lease.RoleFileServer && n == lp["s3"]:
					found["s3"] = true
				case n == lp["grpc"] && s.Spec.ClusterIP == "None":
					found["headless gRPC"] = true
				}
			}
		}
	}
	for _, w := range workloads {
		if !w.checked {
			return // its ports are unknown; its environment's errors are reported already
		}
	}
	for _, want := range []string{"catalog", "s3", "headless gRPC"} {
		if !found[want] {
			t.Errorf("%s: no Service routes to the file servers' or nodes' %s port", k8sDir, want)
		}
	}
}

func resolvePort(p intOrString, named map[string]int) int {
	if p.Str != "" {
		return named[p.Str]
	}
	if containsPort(named, p.Int) {
		return p.Int
	}
	return 0
}

func targetString(p intOrString) string {
	if p.Str != "" {
		return strconv.Quote(p.Str)
	}
	return strconv.Itoa(p.Int)
}

func subset(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func selectsAny(sel map[string]string, ws []*workload) bool {
	if len(sel) == 0 {
		return false
	}
	for _, w := range ws {
		if subset(sel, w.labels) {
			return true
		}
	}
	return false
}

func dig(m map[string]any, path ...string) map[string]any {
	for _, p := range path {
		next, _ := m[p].(map[string]any)
		m = next
	}
	return m
}

func unknownFields(t *testing.T, where string, m map[string]any, known map[string]bool) {
	t.Helper()
	for _, k := range sortedKeys(m) {
		if !known[k] {
			t.Errorf("%s: unknown field %q (a typo? Kubernetes would drop it)", where, k)
		}
	}
}
