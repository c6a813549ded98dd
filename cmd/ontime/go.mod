module github.com/ontime-go/ontime/cmd/ontime

go 1.26.8

require github.com/ontime-go/ontime v0.0.0-00010101000000-000000000000

replace github.com/ontime-go/ontime => ../..
