//go:build race

package main_test

// raceBuild: the binary under test is built with -race too.
const raceBuild = true
