//go:build race

package ontimebolt_test

// raceBuild is true in a test binary built with -race, which also turns on
// checkptr for every package, bbolt included.
const raceBuild = true
