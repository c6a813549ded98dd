// Command ontime is the ontime server and CLI. See package cli.
package main

func main() {}
