module github.com/moatbox/moat

go 1.26.8

require (
	github.com/pelletier/go-toml/v2 v2.4.3
	golang.org/x/net v0.62.0
	golang.org/x/sys v0.50.0
	mvdan.cc/sh/v3 v3.14.1
)

require (
	github.com/opencontainers/runtime-spec v1.2.1 // indirect
	golang.org/x/text v0.43.0 // indirect
)

require (
	github.com/landlock-lsm/go-landlock v0.11.2
	kernel.org/pub/linux/libs/security/libcap/psx v1.2.78 // indirect
)
