// Package deploytest checks Mink's deployment files without Docker or a cluster: that
// docker-compose.yaml, deploy/Dockerfile and the Kubernetes manifests in deploy/k8s agree
// with each other and with the binaries they run. Its tests are all it has;
// `go test ./deploy/...` runs them, and every failure names the file and the field at fault.
//
// Design notes: docs/design/deploytest.md.
package deploytest
