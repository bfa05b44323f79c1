// Package lint holds the repository's structural rules as tests, which make lint runs:
// what the compiler, go vet and staticcheck do not check, such as which package may
// import which. Each rule has a test on a fixture that shows it fails on a violation.
package lint
