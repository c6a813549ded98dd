// Command ontime is the ontime server and CLI: `ontime serve` runs the HTTP
// API and the delivery workers; the other verbs talk to a server or to Redis.
// See docs/server.md.
package main

import (
	"os"
	// The binary carries the tz database: recurring timers' cron zones must
	// resolve the same way on every server, tzdata installed or not.
	_ "time/tzdata"

	"github.com/ontime-go/ontime/cmd/ontime/internal/cli"
)

func main() { os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }
