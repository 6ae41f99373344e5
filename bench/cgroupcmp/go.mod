module github.com/moatbox/moat/bench/cgroupcmp

go 1.26.8

require (
	github.com/moatbox/moat v0.0.0
	github.com/opencontainers/cgroups v0.1.0
)

require (
	github.com/coreos/go-systemd/v22 v22.6.0 // indirect
	github.com/cyphar/filepath-securejoin v0.4.1 // indirect
	github.com/godbus/dbus/v5 v5.1.0 // indirect
	github.com/moby/sys/mountinfo v0.7.2 // indirect
	github.com/moby/sys/userns v0.1.0 // indirect
	github.com/sirupsen/logrus v1.9.3 // indirect
	golang.org/x/sys v0.50.0 // indirect
)

replace github.com/moatbox/moat => ../..
