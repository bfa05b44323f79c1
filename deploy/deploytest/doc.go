// Package deploytest checks Mink's deployment files without Docker or a cluster: that
// docker-compose.yaml, deploy/Dockerfile and the Kubernetes manifests in deploy/k8s agree
// with each other and with the binaries they run. Every MINK_* variable must be the twin
// of a flag of the role that reads it (pkg/flagenv's rule), and the values must pass the
// role's own Config.Validate; builds, targets, ports, probes, health checks, volumes,
// selectors and stop grace periods are checked as well. The Grafana dashboard and the
// Prometheus alerting rules (deploy/monitoring reads them) must parse as PromQL, every
// alert must say what to do, and the compose monitoring profile must wire them to every
// node; test/e2e checks that the metrics they name are exported. Its tests are all it
// has; `go test ./deploy/...` runs them, and every failure names the file and the field
// at fault.
package deploytest
