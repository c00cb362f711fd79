// Package paperspec writes the paper's example jobs as tests vary them (the hedged Table 2 job
// of the e2e benchmarks and of the virtual calibration): the settings a test holds the model and
// the executor to, written once.
package paperspec
