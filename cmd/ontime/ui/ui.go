// Package ui is the former home of ontime's web dashboard.
//
// Deprecated: the dashboard moved to package
// github.com/ontime-go/ontime/dashboard in the root module, which depends on
// the library alone (no CLI, no franz-go, no replace directive). These names
// forward to it and will be removed in a later release.
package ui

import (
	"net/http"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/dashboard"
)

// Options configure New.
//
// Deprecated: use dashboard.Options.
type Options = dashboard.Options

// Activity records the topics' last minute for the dashboard.
//
// Deprecated: use dashboard.Activity.
type Activity = dashboard.Activity

// NewActivity returns an empty Activity.
//
// Deprecated: use dashboard.NewActivity.
func NewActivity() *Activity { return dashboard.NewActivity() }

// New returns the dashboard and the HTTP API it calls.
//
// Deprecated: use dashboard.New.
func New(client *ontime.Client, o *Options) http.Handler { return dashboard.New(client, o) }

// Handler serves the dashboard's page alone.
//
// Deprecated: use dashboard.Handler.
func Handler(apiBase string) http.Handler { return dashboard.Handler(apiBase) }
