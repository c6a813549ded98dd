package config

import "time"

// Watching defaults (docs/server.md, "Watching").
const (
	// DefaultLease is a topic's lease when neither its section nor
	// [defaults] sets one: the library's default. It is also how long a
	// watcher may take to confirm an event.
	DefaultLease = 30 * time.Second
	// DefaultWatchWindow is how many events a confirming watcher may hold
	// unconfirmed.
	DefaultWatchWindow = 16
	// MaxWatchWindow caps watch_window.
	MaxWatchWindow = 1000
)

// WatchWindowOrDefault returns the topic's watch_window, or the default.
func (t Topic) WatchWindowOrDefault() int {
	if t.WatchWindow > 0 {
		return t.WatchWindow
	}
	return DefaultWatchWindow
}
